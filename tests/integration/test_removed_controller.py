"""Issue 33: a controller removed from the configuration while its rows run strands nothing and stalls no one. Its
rows in flight stop counting against MAX_IN_FLIGHT, are never settled as if someone knew how they ended, say why
wherever they are shown, and are settled by `cancel` — or from their Jenkins once the controller is back. Real
database (both engines), two emulators over real HTTP.
"""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.operating.doctor import row_controllers_check
from jenkins_dispatch.operating.operator import Caps, cancel_job, job_details, list_jobs_waiting
from jenkins_dispatch.operating.overview import controllers_of

from ..dispatch_helpers import dispatch_settings, expire_leases, wait_for
from ..emulator_fixtures import ADMIN_TOKEN

pytestmark = pytest.mark.both_engines


def configurations(home, b):
    """The settings with controller b, and the same without it; MAX_IN_FLIGHT 3 in both."""
    with_b = json.dumps({"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}})
    return (dispatch_settings(home.base_url, JENKINS_CONTROLLERS=with_b, MAX_IN_FLIGHT="3"),
            dispatch_settings(home.base_url, MAX_IN_FLIGHT="3"))


def history(queue, job_id):
    return [(e["event"], e["to_status"], e["detail"]) for e in queue.events(job_id)]


def test_a_removed_controllers_rows_strand_nothing_and_stall_no_one(make_jenkins, queue, db):
    home, b = make_jenkins(), make_jenkins()
    with_b, without_b = configurations(home, b)
    stranded = [queue.enqueue("deploy", {"N": str(n)}, controller="b").id for n in range(3)]
    assert wait_for(lambda: run_pass(with_b)["triggered"] == 0 and all(
        queue.get(i)["jenkins_queue_id"] is not None for i in stranded), timeout=20, interval=0.1)
    assert b.wait_idle(timeout=10)  # built there; no notification ever comes (none configured)

    # b is removed from the configuration; the leases of its rows run out.
    expire_leases(db)
    fresh = queue.enqueue("deploy").id
    summary = run_pass(without_b)
    # The default controller's row reaches its Jenkins in that very pass: b's 3 rows fill no cap.
    assert queue.get(fresh)["jenkins_queue_id"] is not None, summary
    assert home.counters()["items_created"] == 1
    # b's rows: untouched — no one knows how they ended.
    for job_id in stranded:
        row = queue.get(job_id)
        assert (row["status"], row["finished_at"], row["jenkins_result"]) == ("processing", None, None), row
        assert [e for e, _, _ in history(queue, job_id)][-1] == "triggered"

    # ...and they say why, wherever they are shown.
    details = job_details(queue, stranded[0], without_b)
    assert details["stranded"].startswith("controller b is not configured: this row is stranded"), details
    assert f"jenkins-dispatch cancel {stranded[0]}" in details["stranded"]
    line = {c["controller"]: c for c in controllers_of(queue, without_b, queue.pauses(), queue.dispatchers())}["b"]
    assert line["state"] == "not configured" and line["in_flight"] == 3
    assert line["note"].startswith("controller b is not configured: 3 in flight, stranded"), line
    check = row_controllers_check([(c["controller"], c["pending"], c["in_flight"])
                                   for c in queue.stats_per_controller()], {"default"})
    assert check.status == "fail" and "controller b is not configured: 3 in flight" in check.detail, check

    # A cancel settles one, saying why nothing was stopped in Jenkins.
    outcome = cancel_job(queue, stranded[0], without_b)
    assert outcome["status"] == "cancelled" and "controller 'b' is not configured" in outcome["message"]
    assert history(queue, stranded[0])[-1][:2] == ("settled", "cancelled")
    assert "controller 'b' is not configured" in history(queue, stranded[0])[-1][2]

    # b is configured again: the reconciler settles the rest from its Jenkins, as it would have.
    expire_leases(db)
    assert wait_for(lambda: run_pass(with_b) is not None and all(
        queue.get(i)["status"] == "completed" for i in stranded[1:]), timeout=20, interval=0.2)
    assert queue.get(stranded[0])["status"] == "cancelled"
    assert all(n == 1 for n in b.counters()["triggers_by_dispatch_id"].values())


def test_a_pending_row_waiting_behind_stranded_rows_is_not_said_to_be_held_by_the_cap(make_jenkins, queue):
    home, b = make_jenkins(), make_jenkins()
    with_b, without_b = configurations(home, b)
    for n in range(3):
        queue.enqueue("waiting", {"N": str(n)}, controller="b")  # queued 30 s in b's Jenkins
    assert wait_for(lambda: run_pass(with_b)["triggered"] == 0 and queue.stats()["processing"] == 3, timeout=20)
    queue.enqueue("deploy")
    [row] = [r for r in list_jobs_waiting(queue, Caps.of(without_b), status="pending")]
    assert row["waiting"]["code"] != "global_cap", row["waiting"]
    # With b configured the same three rows do fill MAX_IN_FLIGHT.
    [row] = [r for r in list_jobs_waiting(queue, Caps.of(with_b), status="pending")]
    assert row["waiting"]["code"] == "global_cap", row["waiting"]
