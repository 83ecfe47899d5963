"""A read about one job that fails is that job's problem: the reconciler's pass goes on with the other rows.

Seen in a loaded chaos run: the read of one job's builds timed out, the pass stopped as if Jenkins were down, and
the watches of other rows' re-sends were starved — a late original then built beside its re-send. Real database
(each engine), the emulator over real HTTP.
"""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import dispatch_settings, expire_leases, wait_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

OTHERS = ["deploy", "team/app/deploy", "Test Job"]


def _dispatched(jenkins, queue, db, names):
    """Rows of ``names`` triggered and built, their callbacks lost (no notification): each lease then expires."""
    ids = [queue.enqueue(name).id for name in names]
    summary = run_pass(dispatch_settings(jenkins.base_url, LEASE_SECONDS="30"))
    assert summary["triggered"] == len(ids), summary
    assert wait_for(lambda: jenkins.counters()["in_flight"] == 0, timeout=10)
    return ids


def test_a_read_that_times_out_about_one_job_leaves_that_row_waiting_and_settles_the_others(make_jenkins, db):
    jenkins = make_jenkins(executors=10, notification=None)
    jenkins.add_job({"path": "slow", "duration_seconds": 0.05, "parameters": [{"name": "DISPATCH_ID"}]})
    queue = Queue(db)
    slow = _dispatched(jenkins, queue, db, ["slow", "slow"])
    others = _dispatched(jenkins, queue, db, OTHERS * 2)
    slow_items = [queue.get(i)["jenkins_queue_id"] for i in slow]
    # Everything Jenkins is asked about the slow job's rows takes longer than the client waits (1 s).
    for item in slow_items:
        jenkins.add_fault(path=f"queue/item/{item}/", latency_seconds=2.5)
    jenkins.add_fault(path="job/slow/", latency_seconds=2.5)
    expire_leases(db)
    db.run("UPDATE jenkins_jobs_queue SET lease_expires_at = lease_expires_at - INTERVAL '1' MINUTE "
           "WHERE job_name = 'slow'")  # reached first

    summary = run_pass(dispatch_settings(jenkins.base_url, LEASE_SECONDS="30"))

    assert summary["jenkins_unavailable"] is False, summary
    assert [queue.get(i)["status"] for i in others] == ["completed"] * len(others), summary
    waiting = [queue.get(i) for i in slow]
    assert [r["status"] for r in waiting] == ["processing", "processing"], waiting
    assert all(r["resends"] == 0 for r in waiting)  # nothing sent again on a read that did not answer
    for row in waiting:
        assert any(e["event"] == "jenkins_read_failed" for e in queue.events(row["id"])), queue.events(row["id"])


def test_reads_failing_about_three_different_jobs_in_a_row_mean_jenkins_is_down(make_jenkins, db):
    jenkins = make_jenkins(executors=10, notification=None)
    queue = Queue(db)
    ids = _dispatched(jenkins, queue, db, OTHERS)
    jenkins.add_fault(path="api/json", status=500)
    expire_leases(db)
    summary = run_pass(dispatch_settings(jenkins.base_url, LEASE_SECONDS="30"))
    assert summary["jenkins_unavailable"] is True, summary
    assert [queue.get(i)["status"] for i in ids] == ["processing"] * 3


def test_a_job_check_that_times_out_backs_off_that_jobs_rows_and_sends_the_others(make_jenkins, db):
    """The same rule before a trigger: the check of one job (its api/json) not answering is about that job."""
    jenkins = make_jenkins(executors=10, notification=None)
    jenkins.add_job({"path": "slow", "duration_seconds": 0.05, "parameters": [{"name": "DISPATCH_ID"}]})
    queue = Queue(db)
    slow = [queue.enqueue("slow").id for _ in range(3)]
    others = [queue.enqueue(name).id for name in OTHERS * 2]
    check = jenkins.add_fault(path="job/slow/api/json", latency_seconds=2.5)
    summary = run_pass(dispatch_settings(jenkins.base_url, LEASE_SECONDS="30", JENKINS_RETRY_BASE_SECONDS="60",
                                         JENKINS_RETRY_MAX_SECONDS="60"))
    assert summary["jenkins_unavailable"] is False, summary
    assert [queue.get(i)["status"] for i in others] == ["processing"] * len(others)  # triggered
    assert jenkins.counters()["items_created"] == len(others)
    backed_off = [queue.get(i) for i in slow]
    assert [r["status"] for r in backed_off] == ["pending"] * 3, backed_off
    assert all("could not check" in r["last_error"] for r in backed_off), backed_off
    assert check.hits == 1  # one check per job and pass: its three rows did not wait a timeout each
