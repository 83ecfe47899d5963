"""Cancels and lost answers (issue 21 #5, #6): an operator's cancel during a trigger Jenkins acts on only after the
lease; a person's cancel in Jenkins after the trigger's answer was lost. The real database (each engine), the
emulator over real HTTP, the dispatcher as `serve` runs it or one pass at a time."""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.jenkins.client import CancelResult, JenkinsClient
from jenkins_dispatch.operating.operator import cancel_job

from ..dispatch_helpers import dispatch_settings, dispatching, expire_leases, wait_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines


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


def test_a_queue_item_a_person_cancelled_after_a_lost_answer_is_not_overruled(make_jenkins, db):
    """The trigger's answer is lost (Jenkins queued it: `waiting` holds items 30 s), then a person cancels the item
    in Jenkins. Jenkins lists only live items, so the search finds nothing and the row is sent again — held in
    Jenkins's queue (RESEND_QUIET_SECONDS) — but the re-send's queue id bounds where the original can be, and a
    cancelled item is readable by its id for five minutes: the reconciler finds the person's cancel there,
    withdraws the re-send before it runs, and the row fails saying so. On main the re-send was built."""
    jenkins = make_jenkins(notification=None)
    jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=1)
    queue = Queue(db)
    job_id = queue.enqueue("waiting").id
    settings = dispatch_settings(jenkins.base_url)
    run_pass(settings)  # the answer is lost: the row keeps its lease, no queue id
    assert queue.get(job_id)["jenkins_queue_id"] is None
    [item] = list(jenkins.jenkins.items)
    with JenkinsClient(jenkins.base_url, "admin", "admin-token", 5) as person:
        assert person.cancel_queue_item(item) is CancelResult.CANCELLED
    expire_leases(db)
    run_pass(settings)
    row = queue.get(job_id)
    assert row["status"] == "failed", row
    assert f"queue item {item}" in row["last_error"] and "cancelled in Jenkins" in row["last_error"], row["last_error"]
    assert "retry" in row["last_error"]
    assert all(i.cancelled for i in jenkins.jenkins.items.values())  # the re-send was withdrawn while it waited
    assert jenkins.builds("waiting") == []
    jenkins.configure(quiet_period_seconds=0)
    expire_leases(db)
    run_pass(settings)
    assert jenkins.builds("waiting") == [] and queue.get(job_id)["status"] == "failed"


def test_without_a_cancel_the_re_send_after_a_lost_answer_still_runs(make_jenkins, db):
    """The look back for a person's cancel finds nothing of the dispatch (Jenkins never queued the original):
    the re-send is the job's one run."""
    jenkins = make_jenkins(notification=None)
    jenkins.add_fault(path="buildWithParameters$", reset=True, times=1)
    for n in range(3):  # other jobs' items around it, some of them cancelled by people
        jenkins.jenkins.schedule(jenkins.jenkins.find("waiting"), {"DISPATCH_ID": f"other-{n}"}, "admin", None, {})
    with JenkinsClient(jenkins.base_url, "admin", "admin-token", 5) as person:
        person.cancel_queue_item(2)
    queue = Queue(db)
    job_id = queue.enqueue("deploy").id
    settings = dispatch_settings(jenkins.base_url, RESEND_QUIET_SECONDS="0")
    run_pass(settings)
    expire_leases(db)
    run_pass(settings)
    assert wait_for(lambda: queue.get(job_id)["status"] == "completed" or jenkins.builds("deploy"), timeout=10)
    assert len(jenkins.builds("deploy")) == 1 and queue.get(job_id)["resends"] == 1


def test_the_look_back_reads_cancelled_items_by_id_passing_over_what_it_may_not_read(make_jenkins):
    """The client's side of it, over real HTTP: a cancelled item is found by its id below the re-send's, however
    the row spells the job; another job's item the user may not read (403, as Queue.Item.getApi answers) is
    passed over rather than taken for a Jenkins-wide refusal; the look stops at items queued before the dispatch
    began, by Jenkins's own clock."""
    jenkins = make_jenkins(notification=None, jobs=[{"path": "hidden", "parameters": ["DISPATCH_ID"],
                                                     "quiet_period_seconds": 30}])
    jenkins.set_user("bot", api_token="bot-token", permissions={"deny_read": ["hidden"]})
    model = jenkins.jenkins

    def queue(job: str, dispatch_id: str, cancel: bool) -> int:
        item, _ = model.schedule(model.find(job), {"DISPATCH_ID": dispatch_id}, "admin", None, {})
        if cancel:
            model.cancel(item)
        return item.id

    older = queue("waiting", "d-1", cancel=True)
    queue("hidden", "d-1", cancel=True)
    mine = queue("waiting", "d-2", cancel=True)
    resend = queue("waiting", "d-2", cancel=False)
    with JenkinsClient(jenkins.base_url, "bot", "bot-token", 5) as client:
        assert client.cancelled_item_with("WAITING", "d-2", below=resend) == mine
        assert client.cancelled_item_with("waiting", "d-1", below=resend) == older
        assert client.cancelled_item_with("waiting", "d-3", below=resend) is None
        model.items[older].in_queue_since_ms -= 3_600_000  # queued an hour before the dispatch began
        assert client.cancelled_item_with("waiting", "d-1", below=resend, began_ms_before=60_000) is None
        assert client.cancelled_item_with("waiting", "d-1", below=resend) == older  # no bound: found
