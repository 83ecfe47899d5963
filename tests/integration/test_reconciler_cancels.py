"""Cancels and lost answers (issue 21 #5): an operator's cancel during a trigger Jenkins acts on only after the
lease. The real database (each engine), the emulator over real HTTP, the dispatcher as `serve` runs it."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.wakeup import work_signal
from jenkins_dispatch.operating.operator import cancel_job
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.queue import Queue

from ..dispatch_helpers import dispatch_settings, wait_for

pytestmark = pytest.mark.both_engines


@contextmanager
def dispatching(settings):
    """A continuous dispatcher (as `serve` runs it) on its own session, for the length of the block."""
    stop = threading.Event()
    session = Database(settings.database, application_name="jd-tests-loop")
    loop = DispatchLoop(settings, session, work_signal(session, stop, 0.5), interval=0.5, shutdown=stop)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        yield
    finally:
        stop.set()
        runner.join(20)
        session.close()


def _late_events(queue, job_id) -> list[dict]:
    return [e for e in queue.events(job_id) if e["event"].startswith("late_")]


@pytest.mark.parametrize("job, what", [("waiting", "queued"), ("deploy", "building")])
def test_a_cancel_during_a_trigger_jenkins_acts_on_after_the_lease_leaves_no_build(make_jenkins, db, job, what):
    """LEASE 3 s, timeout 1 s, Jenkins acts on the trigger 5 s after it arrived. The operator cancels while the
    trigger is on the wire: nothing is in Jenkins yet, so the cancel is recorded and carried out after the lease
    (`cancelled`, nothing found). On main the trigger then landed and its build ran to SUCCESS. Now the
    cancelled row is watched like a re-sent one: the late arrival is cancelled while queued (`waiting`: a 30 s
    quiet period) or its build stopped (`deploy`, a 30 s build), and the row's history says which."""
    jenkins = make_jenkins(notification=None)
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=5.0, times=1)
    queue = Queue(db)
    job_id = queue.enqueue(job, {"EMULATOR_DURATION": "30"}).id
    settings = dispatch_settings(jenkins.base_url)
    with dispatching(settings):
        assert wait_for(lambda: queue.get(job_id)["status"] == "processing", timeout=10)
        answer = cancel_job(queue, job_id, settings)  # the trigger is still on the wire: Jenkins shows nothing
        assert answer["status"] == "processing" and "on its way" in answer["message"]
        assert wait_for(lambda: queue.get(job_id)["status"] == "cancelled", timeout=20)
        assert wait_for(lambda: _late_events(queue, job_id), timeout=30), queue.events(job_id)
        assert jenkins.wait_until(lambda: jenkins.jenkins.in_flight() == 0, timeout=10)
    row = queue.get(job_id)
    assert row["status"] == "cancelled"  # a final row stays as it was; its history tells the rest
    builds = jenkins.builds(job)
    assert all(b.result == "ABORTED" for b in builds), [(b.number, b.result) for b in builds]
    assert len(builds) == (0 if what == "queued" else 1)
    [late] = _late_events(queue, job_id)
    if what == "queued":
        assert late["event"] == "late_trigger_cancelled" and "queue item 1" in late["detail"], late
    else:
        assert late["event"] == "late_build_stopped" and "build #1" in late["detail"], late
    assert late["to_status"] == "cancelled" and late["actor"] == "reconciler"
    assert jenkins.triggers_for(row["dispatch_id"]) == 1  # nothing was sent again
