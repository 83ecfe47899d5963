"""A job's story on its page (issue 36): one sentence from its row and its history, for each state it can be in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.operating.display import ago, duration_exact, iso
from jenkins_dispatch.operating.story import job_story, phase

T0 = datetime(2026, 12, 8, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def history(*steps: tuple[str, str | None, str | None, float]) -> list[dict]:
    return [{"id": n, "event": e, "from_status": f, "to_status": t, "at": at(s)}
            for n, (e, f, t, s) in enumerate(steps, 1)]


ENQUEUED = ("enqueued", None, "pending", 0)
CLAIMED = ("claimed", "pending", "processing", 30)
TRIGGERED = ("triggered", "processing", "processing", 41)
STARTED = ("started", "processing", "processing", 50)


def row(status: str, **fields) -> dict:
    return {"status": status, "controller": "eu", "build_number": None, "jenkins_result": None, "attempts": 1,
            "max_attempts": 3, "created_at": T0, "finished_at": None, **fields}


@pytest.mark.parametrize(("job", "events", "now", "named", "story"), [
    (row("completed", build_number=72, jenkins_result="SUCCESS", finished_at=at(50 + 192)),
     history(ENQUEUED, CLAIMED, TRIGGERED, STARTED, ("settled", "processing", "completed", 242)), at(300), True,
     "built as eu #72, waited 41s, ran 3m12s: SUCCESS"),
    (row("failed", build_number=9, jenkins_result="FAILURE", finished_at=at(55)),
     history(ENQUEUED, CLAIMED, TRIGGERED, STARTED), at(60), False, "built as #9, waited 41s, ran 5s: FAILURE"),
    # Retried after it failed: the wait is the retry's, not the first attempt's.
    (row("completed", build_number=10, jenkins_result="SUCCESS", finished_at=at(700)),
     history(ENQUEUED, CLAIMED, TRIGGERED, STARTED, ("settled", "processing", "failed", 100),
             ("retried", "failed", "pending", 600), ("claimed", "pending", "processing", 601),
             ("triggered", "processing", "processing", 603), ("started", "processing", "processing", 650)),
     at(800), False, "built as #10, waited 3s, ran 50s: SUCCESS"),
    # Jenkins never had it (unknown job): no build, no wait.
    (row("failed", finished_at=at(31)), history(ENQUEUED, CLAIMED), at(40), False, "never built: failed"),
    (row("cancelled", finished_at=at(500)), history(ENQUEUED), at(600), False, "cancelled, after waiting 8m20s: "
                                                                               "cancelled"),
    (row("cancelled", build_number=4, finished_at=at(70)), history(ENQUEUED, CLAIMED, TRIGGERED, STARTED), at(80),
     True, "built as eu #4, waited 41s, ran 20s: cancelled"),
    (row("pending", attempts=0), history(ENQUEUED), at(75), False, "waiting for 75s"),
    (row("pending", attempts=1), history(ENQUEUED), at(5), False, "waiting for 5s (attempt 2 of 3)"),
    (row("processing"), history(ENQUEUED, CLAIMED), at(31), False, "being sent to Jenkins"),
    # A time no datetime holds (a MySQL zero date, read as OddTime) tells no duration, and breaks nothing.
    (row("pending", attempts=0, created_at="0000-00-00 00:00:00"), [], at(5), False, "waiting for a moment"),
    (row("completed", build_number=3, jenkins_result="SUCCESS", finished_at="0000-00-00 00:00:00"),
     history(ENQUEUED, CLAIMED, TRIGGERED, STARTED), at(90), False, "built as #3, waited 41s: SUCCESS"),
    (row("processing"), history(ENQUEUED, CLAIMED, TRIGGERED), at(45), True, "queued in Jenkins eu for 4s, "
                                                                            "waited 41s"),
    (row("processing", build_number=72), history(ENQUEUED, CLAIMED, TRIGGERED, STARTED), at(170), True,
     "building as eu #72 for 2m00s, waited 41s"),
])
def test_a_jobs_story_in_one_sentence(job, events, now, named, story) -> None:
    assert job_story(job, events, now, named) == story


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0s"), (41.9, "41s"), (119, "119s"), (120, "2m00s"),
                                                (192, "3m12s"), (3599, "59m59s"), (3600, "60m"), (-3, "0s")])
def test_exact_durations(seconds, shown) -> None:
    assert duration_exact(seconds) == shown


@pytest.mark.parametrize(("fields", "where"), [
    ({"status": "pending"}, None),
    ({"status": "processing", "jenkins_queue_id": None, "build_number": None}, "waiting for Jenkins"),
    ({"status": "processing", "jenkins_queue_id": 201, "build_number": None}, "queued in Jenkins"),
    ({"status": "processing", "jenkins_queue_id": 201, "build_number": 7}, "building"),
    ({"status": "processing", "jenkins_queue_id": None, "build_number": 7}, "building"),  # adopted from its build
    ({"status": "completed", "jenkins_queue_id": 201, "build_number": 7}, None),
])
def test_where_a_row_in_flight_is(fields, where) -> None:
    assert phase(fields) == where


def test_a_moment_relative_to_now_and_for_a_machine() -> None:
    assert ago(at(0), at(75)) == "75s ago" and ago(at(0), at(3 * 3600)) == "3h00m ago" and ago(None, at(0)) == "-"
    assert iso(at(5)) == "2026-12-08T10:00:05+00:00" and iso(None) == ""
