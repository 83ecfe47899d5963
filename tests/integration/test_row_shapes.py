"""Every row a Queue read returns has exactly the keys its TypedDict in store/rows.py declares, on each engine:
the declarations are what mypy checks the CLI, the page and the doctor against, so they must not drift from
the statements (a column renamed in one dialect's SQL fails here, not in an operator's terminal)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_type_hints

import pytest

from jenkins_dispatch.store import rows
from jenkins_dispatch.store.queue import Settlement

from ..stores import Queue

pytestmark = pytest.mark.both_engines


def _keys(shape: type) -> set[str]:
    return set(get_type_hints(shape))


@pytest.fixture
def queue(db) -> Queue:
    """A queue holding one row of each kind the reads look at: pending, processing, finished after a re-send,
    with a cap, a pause, a dispatcher that found Jenkins down and an open cutover window."""
    queue = Queue(db)
    now = datetime.now(UTC)
    done = queue.enqueue("build", {"N": 1}).id
    queue.enqueue("deploy", {"ENV": "prod"}, scheduled_at=now + timedelta(hours=1))
    queue.enqueue("deploy", {"ENV": "test"})
    [first, second] = queue.claim_batch(2)
    assert first.id == done
    assert queue.mark_triggered(first, 11) and queue.mark_triggered(second, 12)
    db.run("UPDATE jenkins_jobs_queue SET resends = 1 WHERE id = :id", id=done)
    assert queue.settle_many([Settlement(done, first.dispatch_id, "completed", result="SUCCESS")]) == {done}
    queue.set_limit("deploy", 2)
    queue.set_key_limit("deploy:prod", 1)
    queue.set_key_rule("deploy", concurrency_template="deploy:{ENV}", fairness_template="team-{TEAM}")
    queue.pause("build", reason="maintenance", paused_by="ops")
    queue.record_heartbeat(dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=now,
                           stale_after_seconds=300, outcome="ok", detail=None, passes=1, jenkins_ok=False,
                           jenkins_reason="Jenkins answered 503")
    db.run("INSERT INTO jenkins_dispatch_cutover (id, upgraded_at, window_seconds, window_ends_at) "
           "VALUES (1, :at, 600, :ends)", at=now, ends=now + timedelta(minutes=10))
    return queue


def test_every_read_returns_the_keys_its_shape_declares(queue: Queue) -> None:
    [processing] = [r for r in queue.list_jobs() if r["status"] == "processing"]
    dispatch_id = processing["dispatch_id"]
    assert dispatch_id is not None
    matched, _ = queue.jobs_matching(final=True)
    one = {
        rows.Fingerprint: queue.fingerprint(),
        rows.Job: queue.get(processing["id"]),
        rows.FoundJob: queue.find_by_dispatch_id(dispatch_id),
        rows.OldestPending: queue.oldest_pending(),
        rows.Stats: queue.stats(),
        rows.Gauges: queue.gauges(),
        rows.ServerIdentity: queue.server_identity(),
        rows.OldestTransaction: queue.oldest_transaction(),
        rows.JenkinsOutage: queue.jenkins_outage(),
        rows.CutoverWindow: queue.cutover_window(),
    }
    many = {
        rows.WatchedRow: queue.recently_finished_watched(3600),
        rows.JobEvent: queue.events(processing["id"]),
        rows.MatchedJob: matched,
        rows.HourCounts: queue.finished_per_hour(2),
        rows.Limit: queue.limits(),
        rows.KeyLimit: queue.key_limits(),
        rows.KeyRule: queue.key_rules(),
        rows.LimitChange: queue.limit_history(),
        rows.JobStats: queue.stats_per_job(),
        rows.WaitingJobName: queue.waiting_job_names(10),
        rows.Dispatcher: queue.dispatchers(),
    }
    listed = queue.list_jobs()
    assert listed and all(set(r) == _keys(rows.Job) for r in listed)  # ls reads every column show reads
    found = queue.find_by_queue_id("deploy", 12)
    assert found is not None and found["id"] == processing["id"]
    wrong = {shape.__name__: sorted(set(row) ^ _keys(shape)) for shape, row in one.items()
             if row is None or set(row) != _keys(shape)}
    wrong |= {shape.__name__: sorted(set(read[0]) ^ _keys(shape)) if read else "no row" for shape, read in many.items()
              if not read or any(set(r) != _keys(shape) for r in read)}
    assert set(found) == _keys(rows.FoundJob)
    assert wrong == {}


def test_every_shape_of_rows_py_is_read_here() -> None:
    declared = {name for name, value in vars(rows).items()
                if isinstance(value, type) and value.__module__ == rows.__name__}
    assert declared == {"Fingerprint", "WatchedRow", "FoundJob", "Job", "JobEvent", "MatchedJob",
                        "OldestPending", "HourCounts", "Limit", "KeyLimit", "KeyRule", "LimitChange", "Stats", "Gauges", "JobStats", "ServerIdentity",
                        "OldestTransaction", "WaitingJobName", "Dispatcher", "JenkinsOutage", "CutoverWindow"}
