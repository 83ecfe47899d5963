"""The reconciler against the ways real Jenkins installations misbehave (issue 11): requests Jenkins acts
on long after the client gave up, queue items a person cancelled and Jenkins then forgot, re-sends that
meet their late original. Real PostgreSQL (and MySQL for the tests marked both_engines), the emulator over real
HTTP, a continuous dispatcher loop."""

from __future__ import annotations

import time

import pytest

from jenkins_dispatch.jenkins.client import CancelResult, JenkinsClient

from ..dispatch_helpers import dispatch_settings, dispatching, expire_leases, wait_for
from ..stores import Queue


def builds_per_dispatch(jenkins, rows) -> dict[str, int]:
    return {r["dispatch_id"]: jenkins.triggers_for(r["dispatch_id"]) for r in rows}


def test_triggers_jenkins_acts_on_one_to_three_leases_late_are_built_once(make_jenkins, db):
    """Issue 11 #1: Jenkins queued each request 1–3 leases after the client gave up; the reconciler found
    nothing and re-sent — then the original landed too: 3 of 7 built twice. Re-sends now wait in Jenkins's
    queue (RESEND_QUIET_SECONDS, 3 leases by default) and the late original merges into them."""
    jenkins = make_jenkins(executors=10, notification=None)
    queue = Queue(db)
    # LEASE 3 s, timeout 1 s: each request is held, then acted on 4, 7 and 10 s after it arrived.
    for late in (4.0, 7.0, 10.0):
        jenkins.add_fault(path="buildWithParameters$", latency_seconds=late, times=1)
    ids = [queue.enqueue("deploy", {"ENV": f"late-{n}"}).id for n in range(3)]
    settings = dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="3")
    with dispatching(settings):
        # Every late original has landed 10 s after its send; the re-sends leave the queue 9 s after theirs.
        assert wait_for(lambda: len(jenkins.builds("deploy")) >= 3 and all(
            queue.get(i)["build_number"] is not None for i in ids), timeout=30)
        import time

        time.sleep(2)  # a build that would run twice shows up here
    rows = [queue.get(i) for i in ids]
    # One re-send each as a rule; a loaded machine can let a lease run out once more before the late original
    # lands (a second re-send under the same DISPATCH_ID, merged too), or reach a row's expired lease only after
    # its 4 s-late original landed (adopted, nothing re-sent: seen once in CI). Never a second attempt.
    assert all(r["attempts"] == 1 for r in rows), [(r["attempts"], r["resends"]) for r in rows]
    resent = sum(1 for r in rows if r["resends"] >= 1)
    assert resent >= 2, [(r["attempts"], r["resends"]) for r in rows]  # the re-send path ran
    counters = jenkins.counters()
    assert len(jenkins.builds("deploy")) == 3, counters  # one build per job, none twice
    # Each late original merged into its waiting re-send — or, on a slow pass, landed after the re-send had
    # started and was cancelled while queued (the next test covers that path on purpose).
    cancelled = {r["dispatch_id"]: sum(e["event"] == "duplicate_cancelled" for e in queue.events(r["id"]))
                 for r in rows}
    assert counters["merged_requests"] + sum(cancelled.values()) >= resent, (counters, cancelled)
    # Queue items per dispatch, less the copies cancelled while queued: one went on to build.
    items = builds_per_dispatch(jenkins, rows)
    assert {d: items[d] - cancelled[d] for d in items} == dict.fromkeys(items, 1), (items, cancelled)


def test_a_late_original_that_misses_the_re_send_is_cancelled_while_queued(make_jenkins, db):
    """When the original lands after the re-send left the queue, it is a second queue item with the same
    DISPATCH_ID: the reconciler, following the re-sent row, cancels it and writes that in the history."""
    jenkins = make_jenkins(executors=10, notification=None)
    jenkins.add_job({"path": "quiet", "quiet_period_seconds": 6, "duration_seconds": 8, "notify": False,
                     "parameters": [{"name": "DISPATCH_ID"}]})
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=6.0, times=1)
    queue = Queue(db)
    job_id = queue.enqueue("quiet").id
    settings = dispatch_settings(jenkins.base_url, RESEND_QUIET_SECONDS="1")
    with dispatching(settings):
        assert wait_for(lambda: any(e["event"] == "duplicate_cancelled" for e in queue.events(job_id)), timeout=25)
    row = queue.get(job_id)
    assert jenkins.counters()["items_created"] == 2  # the re-send and the late original
    assert len(jenkins.builds("quiet")) == 1  # only one ever ran
    detail = next(e["detail"] for e in queue.events(job_id) if e["event"] == "duplicate_cancelled")
    assert "a copy of build #1" in detail and row["status"] == "processing"


def test_a_queue_item_a_person_cancelled_is_not_sent_again_once_jenkins_forgets_it(make_jenkins, db):
    """Issue 11 #3: Jenkins keeps a left item ~5 minutes; after that its URL answers 404 and the reconciler
    used to search, find nothing and re-send: 5 of 5 cancelled jobs were built anyway."""
    jenkins = make_jenkins(left_item_retention_seconds=0.2, notification=None)
    queue = Queue(db)
    ids = [queue.enqueue("waiting").id for _ in range(5)]  # "waiting": a 30 s quiet period
    settings = dispatch_settings(jenkins.base_url)
    from jenkins_dispatch.dispatching.dispatcher import run_pass

    run_pass(settings)
    rows = [queue.get(i) for i in ids]
    with JenkinsClient(jenkins.base_url, "admin", "admin-token", 5) as person:
        for row in rows:
            assert person.cancel_queue_item(row["jenkins_queue_id"]) is CancelResult.CANCELLED
    import time

    time.sleep(0.5)  # Jenkins has forgotten the left items: their URLs answer 404
    expire_leases(db)
    run_pass(settings)
    for row in rows:
        final = queue.get(row["id"])
        assert final["status"] == "failed", final
        assert "left the queue without a build" in final["last_error"] and "retry" in final["last_error"]
        assert jenkins.triggers_for(row["dispatch_id"]) == 1  # never sent again
    assert jenkins.counters()["items_created"] == 5


def test_a_re_send_that_lands_after_its_original_settled_the_row_is_cancelled(make_jenkins, db):
    """Case A of the real-world chaos run: the original is acted on 4 s late and builds, the row settles;
    the re-send (its own answer lost too) lands later and waited its quiet period — then built a second
    time, because nothing watched a final row."""
    jenkins = make_jenkins(notification=None)
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=4.0, times=1)  # the original
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=6.0, times=1)  # the re-send
    queue = Queue(db)
    job_id = queue.enqueue("deploy", {"ENV": "case-a"}).id
    with dispatching(dispatch_settings(jenkins.base_url)):
        assert wait_for(lambda: queue.get(job_id)["status"] == "completed", timeout=20)
        # The re-send reaches Jenkins ~6 s after it was sent, then would wait 9 s: it must be cancelled.
        assert wait_for(lambda: any(e["event"] == "duplicate_cancelled" for e in queue.events(job_id)), timeout=20)
        time.sleep(1)
    assert len(jenkins.builds("deploy")) == 1, [(b.number, b.queue_id) for b in jenkins.builds("deploy")]
    assert jenkins.counters()["items_created"] == 2
    detail = next(e["detail"] for e in queue.events(job_id) if e["event"] == "duplicate_cancelled")
    assert "landed after its job had finished" in detail


def test_an_original_that_builds_just_before_its_re_send_lands_keeps_the_re_send_from_building(make_jenkins, db):
    """Case B: the original is acted on between the reconciler's last search and the re-send, and builds at
    once; the re-send waits in the queue — it is cancelled and the row follows the original's build."""
    from jenkins_dispatch.dispatching.dispatcher import run_pass

    jenkins = make_jenkins(notification=None)
    # Both requests are held, and let go in the order of case B: the original until the re-send has gone (it was a
    # 1.9 s latency: on a loaded machine the reconciler's search came after it had landed, found it, and sent nothing
    # again), the re-send until the original has built (it was a 0.8 s latency: on a loaded machine the re-send was
    # queued first and the original merged into it, as Jenkins merges a late original: one item, nothing to cancel).
    original = jenkins.add_fault(path="buildWithParameters$", hold=True, times=1)
    resend = jenkins.add_fault(path="buildWithParameters$", hold=True, times=1)
    queue = Queue(db)
    job_id = queue.enqueue("deploy", {"ENV": "case-b"}).id
    # The re-send is held far longer than this test runs (it used to be 3 s, and a loaded machine let the watch
    # come after the re-send had left the queue: 2 builds): whether it is cancelled is decided by the watch, not by
    # how fast the machine is.
    settings = dispatch_settings(jenkins.base_url, RESEND_QUIET_SECONDS="60")
    run_pass(settings)  # +0 s: no answer within 1 s, the lease is kept
    expire_leases(db)
    run_pass(settings)  # nothing found twice: re-sent (queued, held 60 s)
    assert original.waiting == 1
    original.release()  # Jenkins acts on the original now, between the search and the re-send's landing
    assert wait_for(lambda: len(jenkins.builds("deploy")) == 1, timeout=10)  # the original built
    assert resend.waiting == 1
    resend.release()  # the re-send lands now, below a build that carries its DISPATCH_ID
    assert wait_for(lambda: jenkins.counters()["items_created"] == 2, timeout=10)
    expire_leases(db)
    run_pass(settings)  # the re-sent row is watched: the original's build exists, its copy is cancelled

    # Nothing of this dispatch is left queued to build later (the copy is held 60 s): Jenkins goes idle once the
    # original's own 0.15 s build is over. The re-send's answer came after the pass's 1 s timeout (it was held), so
    # the row knew no queue item of it; should the pass above have found the original's build still running, the
    # watch of the row cancels the copy in a later pass, as a dispatcher runs them.
    def idle_after_another_pass() -> bool:
        if jenkins.wait_idle(timeout=0.5):
            return True
        expire_leases(db)
        run_pass(settings)
        return False

    assert wait_for(idle_after_another_pass, timeout=20, interval=0), jenkins.counters()
    row = queue.get(job_id)
    assert len(jenkins.builds("deploy")) == 1, [(b.number, b.queue_id) for b in jenkins.builds("deploy")]
    assert row["build_number"] == 1 and row["status"] in ("processing", "completed")
    events = queue.events(job_id)
    detail = next((e["detail"] for e in events if e["event"] == "duplicate_cancelled"), None)
    assert detail is not None, [(e["event"], e["actor"], e["detail"]) for e in events]
    assert "a copy of build #1" in detail or "landed after its job had finished" in detail, detail


def _claimed_row_whose_trigger_outcome_is_unknown(queue, db, job_name: str = "deploy") -> dict:
    """A row claimed (attempt 1 spent) whose trigger may or may not have reached Jenkins, lease over."""
    queue.enqueue(job_name, {"ENV": "prod"})
    [job] = queue.claim_batch(1)
    expire_leases(db)
    return queue.get(job.id)


@pytest.mark.both_engines  # the one test here whose re-send is not taken (resend_not_taken): on MySQL too
def test_a_re_send_that_meets_a_jenkins_wide_failure_keeps_its_dispatch_id(make_jenkins, db):
    """A re-send answered 503 was released to pending: its next claim drew a NEW dispatch id, so a late
    original (sent under the old one) could no longer merge with it — the job could run twice. The row
    stays processing under the same DISPATCH_ID; the reconciler tries again after the lease, and the
    re-send that was never taken is not counted against MAX_RESENDS."""
    from jenkins_dispatch.dispatching.dispatcher import run_pass

    jenkins = make_jenkins(notification=None)
    queue = Queue(db)
    before = _claimed_row_whose_trigger_outcome_is_unknown(queue, db)
    refused = jenkins.add_fault(path="buildWithParameters$", status=503)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert refused.hits == 1 and summary["jenkins_unavailable"]
    row = queue.get(before["id"])
    assert (row["status"], row["dispatch_id"], row["attempts"], row["resends"]) == (
        "processing", before["dispatch_id"], 1, 0)
    assert "503" in row["last_error"] and queue.events(before["id"])[-1]["event"] == "resend_not_sent"

    jenkins.clear_faults()
    expire_leases(db)
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(before["id"])
    assert (row["status"], row["dispatch_id"], row["resends"]) == ("processing", before["dispatch_id"], 1)
    assert row["jenkins_queue_id"] is not None
    assert jenkins.triggers_for(before["dispatch_id"]) == 1


def test_a_re_send_refused_for_its_job_keeps_its_dispatch_id_until_the_re_sends_run_out(make_jenkins, db):
    """A re-send Jenkins refuses for now (a disabled job: 409) went to retry_later — pending, and a new
    dispatch id at the next claim. It keeps the row processing under the same DISPATCH_ID, counted as a
    re-send, with the refusal in last_error and the history."""
    from jenkins_dispatch.dispatching.dispatcher import run_pass

    jenkins = make_jenkins(notification=None)
    queue = Queue(db)
    before = _claimed_row_whose_trigger_outcome_is_unknown(queue, db, "frozen")  # a disabled job
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(before["id"])
    assert (row["status"], row["dispatch_id"], row["resends"]) == ("processing", before["dispatch_id"], 1)
    assert "not buildable" in (row["last_error"] or "") or "disabled" in (row["last_error"] or "")
    assert queue.events(before["id"])[-1]["event"] == "resend_refused"
