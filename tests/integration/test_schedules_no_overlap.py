"""`schedule add … --no-overlap` (issue 24): a tick that comes while the schedule's previous run is still pending or
processing is consumed without a row (counted as skipped on the schedule and in TicksSkipped), and the first tick
after that run finished enqueues as usual. Exact under races: threads on their own sessions take the same due tick
at the same moment. The real database, on each engine."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.schedules import Schedules

from ..cli_helpers import configure_default_controller, exit_code
from ..ui_helpers import (
    PAYLOAD,
    UiClient,
    make_ui,  # noqa: F401 - a fixture
)
from .test_schedules import make_due, race, rows

pytestmark = pytest.mark.both_engines

YEARLY = "0 0 1 1 *"  # only the test makes it due: a minute turning adds no genuine tick


@pytest.fixture
def schedules(db):
    return Schedules(db)


def finish(db, job_id: int, status: str = "completed") -> None:
    db.run("UPDATE jenkins_jobs_queue SET status = :status, finished_at = updated_at WHERE id = :id",
           id=job_id, status=status)


def test_a_tick_is_skipped_while_the_previous_run_is_pending_or_processing(db, schedules, queue):
    add_schedule(schedules, "nightly", "deploy", cron=YEARLY, no_overlap=True)
    assert schedules.get("nightly")["no_overlap"] is True
    first_tick = make_due(db, "nightly", timedelta(minutes=30))
    assert enqueue_due_ticks(schedules).enqueued == 1
    [first] = rows(queue)

    second_tick = make_due(db, "nightly", timedelta(minutes=20))  # the previous run is pending
    done = enqueue_due_ticks(schedules)
    assert (done.enqueued, done.skipped, done.skipped_in_flight) == (0, 1, 1)
    after = schedules.get("nightly")
    assert after["next_tick"] > second_tick  # consumed: the pass does not take it again
    assert (after["last_tick"], after["last_job_id"]) == (first_tick, first["id"])
    assert (after["skipped_ticks"], after["last_skipped_tick"]) == (1, second_tick)
    assert enqueue_due_ticks(schedules).skipped == 0

    [claimed] = queue.claim_batch(1)  # now processing
    assert claimed.id == first["id"]
    make_due(db, "nightly", timedelta(minutes=10))
    assert enqueue_due_ticks(schedules).skipped_in_flight == 1
    assert len(rows(queue)) == 1 and schedules.get("nightly")["skipped_ticks"] == 2

    finish(db, first["id"])
    tick = make_due(db, "nightly", timedelta(minutes=5))
    done = enqueue_due_ticks(schedules)
    assert (done.enqueued, done.skipped_in_flight) == (1, 0)
    latest = rows(queue)[-1]
    after = schedules.get("nightly")
    assert (after["last_tick"], after["last_job_id"], latest["scheduled_at"]) == (tick, latest["id"], tick)


def test_a_retried_previous_run_is_in_flight_again(db, schedules, queue):
    add_schedule(schedules, "nightly", "deploy", cron=YEARLY, no_overlap=True)
    make_due(db, "nightly", timedelta(minutes=30))
    enqueue_due_ticks(schedules)
    [first] = rows(queue)
    finish(db, first["id"], "failed")
    queue.retry_final(first["id"])
    make_due(db, "nightly", timedelta(minutes=20))
    assert enqueue_due_ticks(schedules).skipped_in_flight == 1 and len(rows(queue)) == 1


def test_without_no_overlap_every_tick_enqueues_whatever_is_in_flight(db, schedules, queue):
    add_schedule(schedules, "nightly", "deploy", cron=YEARLY)
    assert schedules.get("nightly")["no_overlap"] is False
    for ago in (30, 20, 10):
        make_due(db, "nightly", timedelta(minutes=ago))
        done = enqueue_due_ticks(schedules)
        assert (done.enqueued, done.skipped_in_flight) == (1, 0)
    assert [r["status"] for r in rows(queue)] == ["pending"] * 3
    assert schedules.get("nightly")["skipped_ticks"] == 0


@pytest.mark.parametrize("racers", [8])
def test_racing_dispatchers_skip_each_tick_once_while_the_run_is_in_flight(db, schedules, queue, database_url,
                                                                           racers):
    """Many sessions take the same due ticks at the same moment while each schedule's previous run is in flight:
    no row, each tick consumed once (one skip per schedule); once the runs finished, one row per schedule."""
    names = [f"s{n}" for n in range(12)]
    for name in names:
        add_schedule(schedules, name, f"job{name}", cron=YEARLY, no_overlap=True)
        make_due(db, name, timedelta(minutes=60))
    assert enqueue_due_ticks(schedules).enqueued == len(names)
    sessions = [Database(parse_database_url(database_url), application_name=f"racer-{i}") for i in range(racers)]
    try:
        for round_ in range(3):  # pending, then processing, then pending again (claimed, then released)
            if round_ == 1:
                assert len(queue.claim_batch(len(names))) == len(names)
            if round_ == 2:
                db.run("UPDATE jenkins_jobs_queue SET status = 'pending', lease_expires_at = NULL")
            for name in names:
                make_due(db, name, timedelta(minutes=50 - 10 * round_))
            results = race(sessions)
            assert sum(r.enqueued for r in results) == 0, results
            assert sum(r.skipped_in_flight for r in results) == len(names), results
            assert len(rows(queue)) == len(names)
            assert {s["skipped_ticks"] for s in schedules.listed()} == {round_ + 1}
        for r in rows(queue):
            finish(db, r["id"])
        for name in names:
            make_due(db, name, timedelta(minutes=5))
        results = race(sessions)
        assert sum(r.enqueued for r in results) == len(names) and sum(r.skipped_in_flight for r in results) == 0
        assert len(rows(queue)) == 2 * len(names)
        assert {s["last_status"] for s in schedules.listed()} == {"pending"}
    finally:
        for s in sessions:
            s.close()


def test_cli_no_overlap_is_stored_and_listed(db, schedules, capsys, monkeypatch):
    configure_default_controller(monkeypatch)
    assert exit_code(["schedule", "add", "nightly", "deploy", "--cron", "0 3 * * *", "--no-overlap"]) == 0
    assert "no overlap" in capsys.readouterr().out
    assert exit_code(["schedule", "add", "often", "deploy", "--cron", "* * * * *"]) == 0
    capsys.readouterr()
    assert exit_code(["schedule", "ls"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert "NO_OVERLAP" in header and "SKIPPED_TICKS" in header
    assert [line.split()[0] for line in lines] == ["nightly", "often"]
    at = header.index("NO_OVERLAP")  # cron and times hold spaces: read the column where its header is
    assert [line[at:at + 3].strip() for line in lines] == ["yes", "no"]
    assert exit_code(["schedule", "ls", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["no_overlap"], s["skipped_ticks"]) for s in listed] == [("nightly", True, 0),
                                                                                 ("often", False, 0)]


def test_cli_schedule_set_turns_no_overlap_on_and_off_keeping_the_schedules_history(db, schedules, queue, capsys):
    """`schedule set NAME --no-overlap | --overlap`: changed in place (its ticks, skips and last row stay, as `rm`
    and `add` would lose them), from the next tick on; naming what it already is changes nothing."""
    add_schedule(schedules, "nightly", "deploy", cron=YEARLY)
    make_due(db, "nightly", timedelta(minutes=30))
    assert enqueue_due_ticks(schedules).enqueued == 1
    before = schedules.get("nightly")

    assert exit_code(["schedule", "set", "NIGHTLY", "--no-overlap"]) == 0
    assert "no overlap" in capsys.readouterr().out
    after = schedules.get("nightly")
    assert after["no_overlap"] is True
    assert {k: after[k] for k in ("last_tick", "last_job_id", "next_tick", "skipped_ticks")} == \
        {k: before[k] for k in ("last_tick", "last_job_id", "next_tick", "skipped_ticks")}
    make_due(db, "nightly", timedelta(minutes=20))  # the first run is still pending: skipped now
    assert enqueue_due_ticks(schedules).skipped_in_flight == 1 and len(rows(queue)) == 1

    assert exit_code(["schedule", "set", "nightly", "--no-overlap", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["name"], answer["no_overlap"], answer["changed"]) == ("nightly", True, False), answer
    assert exit_code(["schedule", "set", "nightly", "--overlap"]) == 0
    assert "overlap allowed" in capsys.readouterr().out
    make_due(db, "nightly", timedelta(minutes=10))
    assert enqueue_due_ticks(schedules).enqueued == 1 and len(rows(queue)) == 2
    assert schedules.get("nightly")["skipped_ticks"] == 1

    assert exit_code(["schedule", "set", "weekly", "--overlap"]) == 2
    assert "no schedule named 'weekly'" in capsys.readouterr().err
    assert exit_code(["schedule", "set", "nightly"]) == 2  # one of the two, always
    assert exit_code(["schedule", "set", "nightly", "--overlap", "--no-overlap"]) == 2


def test_the_pages_schedule_list_shows_no_overlap_and_its_skips(db, schedules, queue, make_ui):  # noqa: F811
    add_schedule(schedules, "nightly", "deploy", cron=YEARLY, no_overlap=True)
    add_schedule(schedules, "often", PAYLOAD, cron=YEARLY)
    make_due(db, "nightly", timedelta(minutes=30))
    enqueue_due_ticks(schedules)
    skipped = make_due(db, "nightly", timedelta(minutes=20))
    enqueue_due_ticks(schedules)
    page = UiClient(make_ui().url).get("/").text
    table = page.split('id="schedules"')[1].split("</table>")[0]
    nightly, often = [r for r in table.split("<tr")[2:]]
    assert "no overlap: 1 tick skipped" in nightly and f"{skipped:%Y-%m-%d %H:%M}" in nightly
    assert "no overlap" not in often and "<img" not in page
