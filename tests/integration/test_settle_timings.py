"""The queue wait and build duration a settle answers with (Queue.settle → Settled), read from the row's history
in the settle's own round trip, on each engine. `serve`'s histograms take them from there, whoever settled the
row (the webhook, the reconciler, a cancel), with no second read of the history."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.both_engines

HISTORIES = [
    # inserted, claimed, triggered 2 s later, started at 5 s, settled later: the build is timed to the settle
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (3, "queued", "a"), (5, "started", "this")],
     2.0, 5),
    # a backoff after a failed trigger counts as waiting; the build of the settling dispatch is the one timed
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "retry_scheduled", "a"), (40, "claimed", "this"),
      (41, "triggered", "this"), (50, "started", "this")], 41.0, 50),
    # an operator's retry starts the wait again
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (9, "settled", "a"),
      (100, "retried", "a"), (101, "claimed", "this"), (104, "triggered", "this"), (110, "started", "this")], 4.0, 110),
    # adopted by the reconciler after a lost answer: that is when Jenkins had it
    ([(0, "enqueued", None), (1, "claimed", "this"), (30, "adopted", "this"), (31, "started", "this")], 30.0, 31),
    # no STARTED notification: no build duration
    ([(0, "enqueued", None), (1, "claimed", "this"), (2, "triggered", "this")], 2.0, None),
    # a history cut by prune (no insert): no queue wait
    ([(2, "triggered", "this"), (3, "started", "this")], None, 3),
    # a STARTED of an earlier dispatch does not time this one
    ([(0, "enqueued", None), (1, "claimed", "a"), (2, "triggered", "a"), (3, "started", "a"),
      (4, "claimed", "this"), (5, "triggered", "this")], 2.0, None),
]


@pytest.mark.parametrize(("steps", "wait", "started_at"), HISTORIES)
def test_settle_answers_the_queue_wait_and_build_duration_of_its_history(queue, db, steps, wait, started_at):
    job = queue.enqueue("deploy", {}).id
    claimed = queue.claim_batch(1)[0]
    anchor = queue.get(job)["created_at"] - timedelta(seconds=600)
    db.run("DELETE FROM jenkins_job_events WHERE job_id = :id", id=job)
    for seconds, event, dispatch_id in steps:
        db.run("INSERT INTO jenkins_job_events (job_id, event, dispatch_id, actor, at) "
               "VALUES (:id, :event, :dispatch_id, 'dispatcher', :at)", id=job, event=event,
               dispatch_id=claimed.dispatch_id if dispatch_id == "this" else dispatch_id,
               at=anchor + timedelta(seconds=seconds))

    settled = queue.settle(claimed.id, claimed.dispatch_id, "completed", result="SUCCESS")

    assert settled and settled.job_id == job
    assert settled.queue_wait_seconds == (None if wait is None else pytest.approx(wait, abs=1e-3))
    if started_at is None:
        assert settled.build_seconds is None
    else:
        finished = queue.get(job)["finished_at"]
        assert settled.build_seconds == pytest.approx(
            (finished - (anchor + timedelta(seconds=started_at))).total_seconds(), abs=0.01)


def test_a_settle_that_changes_nothing_answers_none(queue):
    queue.enqueue("deploy", {})
    claimed = queue.claim_batch(1)[0]
    assert queue.settle(claimed.id, "another-dispatch", "completed") is None
    assert queue.settle(claimed.id, claimed.dispatch_id, "completed")
    assert queue.settle(claimed.id, claimed.dispatch_id, "failed") is None
