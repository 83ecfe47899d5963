"""Issue #11, end to end: a dispatched job starts a downstream job with its current build parameters, so
the child's Notification-plugin callbacks carry the parent's DISPATCH_ID. Only the parent's own callbacks
may settle the row.

Real PostgreSQL, the dispatcher against the emulator over real HTTP, the webhook over real HTTP
(``serve``'s WebhookServer), the emulator's Notification plugin posting to it.
"""

import io
import json

import pytest
import requests

from jenkins_dispatch import runtime
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.observability import logger
from jenkins_dispatch.serve import WebhookServer

from ..dispatch_helpers import WEBHOOK_SECRET, dispatch_settings, wait_for
from ..emulator_fixtures import ADMIN_TOKEN

PARENT, CHILD = "release/parent", "release/checks/child"


@pytest.fixture
def webhook(database_url):  # dispatch_settings reads the DATABASE_URL this exports
    settings = dispatch_settings("http://unused/")
    runtime.install(settings)
    server = WebhookServer(settings).start()
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        yield server, log_stream
    finally:
        logger.registered_handler.setStream(previous)
        server.stop()
        runtime.reset()


@pytest.mark.parametrize("when", ["started", "completed"])
def test_a_failing_downstream_build_with_the_parents_dispatch_id_leaves_the_parents_row_alone(
        webhook, make_jenkins, queue, when):
    server, log_stream = webhook
    jenkins = make_jenkins(
        jobs=[
            {"path": PARENT, "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.6,
             "downstream": [{"job": CHILD, "when": when, "pass_parameters": True}]},
            {"path": CHILD, "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.05,
             "result": "FAILURE"},
        ],
        notification={"url": f"{server.url}jenkins/notify?token={WEBHOOK_SECRET}"},
    )
    # Two earlier child builds, so the child's build numbers differ from the parent's.
    for n in range(2):
        answer = requests.post(f"{jenkins.base_url}job/release/job/checks/job/child/buildWithParameters",
                               data={"DISPATCH_ID": f"manual-{n}", "EMULATOR_NO_NOTIFY": "true"},
                               auth=("admin", ADMIN_TOKEN), timeout=5)
        assert answer.status_code == 201
        assert jenkins.wait_idle()

    job_id = queue.enqueue(PARENT, {"VERSION": "1.2.3"}).id
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["triggered"] == 1, summary
    row = queue.get(job_id)

    def everything_ran_and_was_answered():
        return (len(jenkins.builds(CHILD)) == 3 and jenkins.wait_idle(0)
                and queue.get(job_id)["status"] != "processing")

    assert wait_for(everything_ran_and_was_answered, timeout=15), (queue.get(job_id), jenkins.counters())
    [parent] = jenkins.builds(PARENT)
    child = jenkins.builds(CHILD)[-1]
    assert {d.name: v for d, v in child.parameters} == {"DISPATCH_ID": row["dispatch_id"], "VERSION": "1.2.3"}
    assert (parent.result, child.result) == ("SUCCESS", "FAILURE")
    if when == "started":  # the child failed while the parent was still running
        assert child.started + child.duration_ms / 1000 < parent.started + parent.duration_ms / 1000

    row = queue.get(job_id)
    assert (row["status"], row["jenkins_result"], row["last_error"], row["build_number"], row["build_url"]) == (
        "completed", "SUCCESS", None, 1, f"{jenkins.base_url}job/release/job/parent/1/")
    assert [e["event"] for e in queue.events(job_id)].count("settled") == 1

    # Every callback was delivered and answered: the parent's applied, the child's 200 ignored.
    delivered = jenkins.notifications
    assert [n["url"] for n in delivered].count("job/release/job/checks/job/child/") == 4
    logs = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    answers = [entry for entry in logs if entry.get("message") == "jenkins notification"]
    assert len(answers) == 8, answers
    ignored = [entry for entry in answers if entry["outcome"] == "ignored"]
    assert [(e["status_code"], e["phase"], e["build_number"], e["dispatch_id"]) for e in ignored] == [
        (200, phase, 3, row["dispatch_id"]) for phase in ("QUEUED", "STARTED", "COMPLETED", "FINALIZED")]
    assert all(e["job"] == CHILD for e in ignored)
    assert {e["outcome"] for e in answers if e not in ignored} <= {"applied", "duplicate", "already_final"}
