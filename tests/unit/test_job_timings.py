"""Queue wait and build duration from a row's history (callbacks/timings.py), and the per-job label's bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.callbacks.timings import job_timings
from jenkins_dispatch.observability import JOB_LABEL_LIMIT, OTHER_JOBS, PrometheusSink

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _history(*steps: tuple[float, str, str | None]) -> list[dict]:
    return [{"at": T0 + timedelta(seconds=s), "event": e, "dispatch_id": d} for s, e, d in steps]


@pytest.mark.parametrize(("steps", "expected"), [
    # inserted, claimed, triggered 2 s later, started at 5 s, settled at 65 s
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (3, "queued", "a"), (5, "started", "a"),
      (65, "settled", "a")], (2.0, 60.0)),
    # a backoff after a failed trigger counts as waiting; the build of the settling dispatch is the one timed
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "retry_scheduled", "a"), (40, "claimed", "b"),
      (41, "triggered", "b"), (50, "started", "b"), (53, "settled", "b")], (41.0, 3.0)),
    # an operator's retry starts the wait again
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (9, "settled", "a"),
      (100, "retried", "a"), (101, "claimed", "b"), (104, "triggered", "b"), (110, "started", "b"),
      (111, "settled", "b")], (4.0, 1.0)),
    # adopted by the reconciler after a lost answer: that is when Jenkins had it
    ([(0, "enqueued", None), (1, "claimed", "a"), (30, "adopted", "a"), (31, "started", "a"),
      (32, "settled", "a")], (30.0, 1.0)),
    # no STARTED notification: no build duration
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (9, "settled", "a")], (2.0, None)),
    # a history cut by prune (no insert): no queue wait
    ([(2, "triggered", "a"), (3, "started", "a"), (9, "settled", "a")], (None, 6.0)),
    # a STARTED of an earlier dispatch does not time this one
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (3, "started", "a"),
      (4, "claimed", "b"), (5, "triggered", "b"), (9, "settled", "b")], (2.0, None)),
])
def test_job_timings(steps, expected):
    assert job_timings(_history(*steps), steps[-1][2]) == expected


def test_the_job_label_is_bounded_and_stable():
    sink = PrometheusSink()
    names = [f"team/job-{n}" for n in range(JOB_LABEL_LIMIT + 20)]
    labels = [sink.job_label(name) for name in names]
    assert labels[:JOB_LABEL_LIMIT] == names[:JOB_LABEL_LIMIT]
    assert set(labels[JOB_LABEL_LIMIT:]) == {OTHER_JOBS}
    assert sink.job_label(names[3]) == names[3]  # a name that has a label keeps it
    assert sink.job_label(OTHER_JOBS) == OTHER_JOBS
    for name in names:
        sink.observe_job("QueueWait", name, 1.5)
    from prometheus_client.exposition import generate_latest

    text = generate_latest(sink.registry).decode()
    counts = [line for line in text.splitlines() if line.startswith("jenkins_dispatch_queue_wait_seconds_count")]
    assert len(counts) == JOB_LABEL_LIMIT + 1
    assert 'jenkins_dispatch_queue_wait_seconds_count{job="other"} 20.0' in counts
