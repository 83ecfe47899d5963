"""Operator paths against the real database and the emulator: history across every actor, cancel in Jenkins."""

import json

import pytest

from jenkins_dispatch.callbacks.webhook import Callback, process
from jenkins_dispatch.cli import main
from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import WEBHOOK_SECRET, dispatch_settings, expire_leases, wait_for

pytestmark = pytest.mark.both_engines


def cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def notify(queue, phase, row, number, status=None):
    build = {"number": number, "queue_id": row["jenkins_queue_id"], "phase": phase, "url": f"job/deploy/{number}/",
             "parameters": {"DISPATCH_ID": row["dispatch_id"]}}
    if status:
        build["status"] = status
    body = json.dumps({"name": "deploy", "url": "job/deploy/", "build": build}).encode()
    callback = Callback.of("POST", "/jenkins/notify", f"token={WEBHOOK_SECRET}", {}, body)
    return process(callback, secret=WEBHOOK_SECRET, queue=queue)


def use_jenkins(monkeypatch, jenkins):
    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin",
                       "JENKINS_API_TOKEN": "admin-token"}.items():
        monkeypatch.setenv(key, value)


def test_show_lists_each_transition_once_in_order_across_every_actor(jenkins, queue, db, capsys, monkeypatch):
    use_jenkins(monkeypatch, jenkins)
    job_id = cli_json(capsys, "enqueue", "deploy", "-p", "EMULATOR_DURATION=0.2")["id"]
    settings = dispatch_settings(jenkins.base_url)
    run_pass(settings)                                            # dispatcher: claimed, triggered
    row = queue.get(job_id)
    assert wait_for(lambda: jenkins.builds("deploy"))
    assert notify(queue, "STARTED", row, 1).status_code == 200         # webhook: started
    assert notify(queue, "STARTED", row, 1).status_code == 200         # a duplicate leaves no trace
    jenkins.wait_idle()
    expire_leases(db)
    run_pass(settings)                                            # reconciler: settled (the callback was lost)
    assert notify(queue, "COMPLETED", row, 1, "SUCCESS").status_code == 200   # late callback: already final
    assert main(["retry", str(job_id)]) == 0                      # operator: retried
    capsys.readouterr()

    details = cli_json(capsys, "show", str(job_id))
    history = [(e["event"], e["from_status"], e["to_status"], e["actor"]) for e in details["history"]]
    assert history == [
        ("enqueued", None, "pending", "operator"),
        ("claimed", "pending", "processing", "dispatcher"),
        ("triggered", "processing", "processing", "dispatcher"),
        ("started", "processing", "processing", "webhook"),
        ("settled", "processing", "completed", "reconciler"),
        ("retried", "completed", "pending", "operator"),
    ]
    assert details["links"]["job"] == f"{jenkins.base_url}job/deploy/"
    assert main(["show", str(job_id)]) == 0
    text = capsys.readouterr().out
    assert "dispatch_id" in text and "reconciler" in text


def test_cancel_a_running_job_stops_the_build_then_settles_cancelled(jenkins, queue, capsys, monkeypatch):
    use_jenkins(monkeypatch, jenkins)
    job_id = queue.enqueue("deploy", {"EMULATOR_DURATION": "30"}).id
    run_pass(dispatch_settings(jenkins.base_url))
    assert wait_for(lambda: jenkins.builds("deploy"))
    outcome = cli_json(capsys, "cancel", str(job_id))
    assert outcome["status"] == "cancelled" and "stop" in outcome["jenkins"]
    assert wait_for(lambda: jenkins.builds("deploy")[0].result == "ABORTED")
    row = queue.get(job_id)
    assert row["status"] == "cancelled" and "cancelled by operator" in row["last_error"]


def test_cancel_a_queued_job_cancels_the_jenkins_queue_item(jenkins, queue, capsys, monkeypatch):
    use_jenkins(monkeypatch, jenkins)
    job_id = queue.enqueue("waiting").id  # a 30 s quiet period: it stays in Jenkins's queue
    run_pass(dispatch_settings(jenkins.base_url))
    queue_id = queue.get(job_id)["jenkins_queue_id"]
    outcome = cli_json(capsys, "cancel", str(job_id))
    assert outcome["jenkins"] == f"cancelled Jenkins queue item {queue_id}"
    assert queue.get(job_id)["status"] == "cancelled"
    assert jenkins.builds("waiting") == []


def test_cancel_while_the_trigger_is_in_flight_cancels_the_item_once_jenkins_has_it(jenkins, queue, capsys,
                                                                                     monkeypatch):
    """Issue 11 #4: `cancel` found nothing to stop, settled `cancelled` — then Jenkins queued and ran the
    build, which the row's history never mentioned (46 of 148 cancels in an operator-chaos run)."""
    import threading

    use_jenkins(monkeypatch, jenkins)
    job_id = queue.enqueue("waiting").id  # 30 s quiet period: stays queued in Jenkins
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=3.0, times=1)  # acted on late, in time
    settings = dispatch_settings(jenkins.base_url, JENKINS_TIMEOUT_SECONDS="5", LEASE_SECONDS="8")
    dispatching = threading.Thread(target=run_pass, args=(settings,))
    dispatching.start()
    assert wait_for(lambda: queue.get(job_id)["status"] == "processing", timeout=5)
    outcome = cli_json(capsys, "cancel", str(job_id))  # Jenkins acts on the trigger only 3 s after it came
    assert jenkins.counters()["items_created"] == 0
    assert outcome["status"] == "processing" and "cancel requested" in outcome["message"]
    dispatching.join(10)
    row = queue.get(job_id)
    assert row["status"] == "cancelled", row
    assert f"cancelled Jenkins queue item {row['jenkins_queue_id']}" in row["last_error"]
    assert jenkins.counters()["items_created"] == 1 and jenkins.builds("waiting") == []
    events = [e["event"] for e in queue.events(job_id)]
    assert events == ["enqueued", "claimed", "cancel_requested", "triggered", "settled"]


def test_a_requested_cancel_whose_trigger_answer_was_lost_is_carried_out_by_the_reconciler(jenkins, queue, db):
    """The cancel was recorded while the trigger was in flight, and that trigger's answer never came back
    (Jenkins queued it): after the lease, the reconciler finds the item, cancels it, settles the row."""
    job_id = queue.enqueue("waiting").id
    jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=1)  # queued, answer lost
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(job_id)
    assert row["jenkins_queue_id"] is None  # outcome unknown: the row keeps its lease
    assert queue.request_cancel(job_id, row["dispatch_id"], "cancelled by operator")
    expire_leases(db)
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(job_id)
    assert row["status"] == "cancelled" and "cancelled Jenkins queue item" in row["last_error"]
    assert jenkins.builds("waiting") == [] and jenkins.triggers_for(row["dispatch_id"]) == 1


def test_cancelling_a_build_that_already_finished_keeps_its_real_result(jenkins, queue, capsys, monkeypatch):
    """Issue 11 #4: it marked the row `cancelled` and dropped its build number and result."""
    use_jenkins(monkeypatch, jenkins)
    jenkins.set_job("deploy", notify=False)
    job_id = queue.enqueue("deploy").id
    run_pass(dispatch_settings(jenkins.base_url))
    assert wait_for(lambda: jenkins.builds("deploy") and jenkins.builds("deploy")[0].result == "SUCCESS")
    outcome = cli_json(capsys, "cancel", str(job_id))
    assert outcome["status"] == "completed" and "already finished" in outcome["message"]
    row = queue.get(job_id)
    assert (row["status"], row["jenkins_result"], row["build_number"]) == ("completed", "SUCCESS", 1)
    assert "cancelled by operator, but Jenkins build #1 had already finished (SUCCESS)" in row["last_error"]
