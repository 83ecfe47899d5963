"""The webhook end to end: Lambda handler → routing → auth → parsing → fenced SQL on the real database, on
each engine."""

import base64
import importlib.util
import io
import json
import random
import string
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jenkins_dispatch import runtime
from jenkins_dispatch.callbacks.http_api import callback_from_event, handle_http_event, http_api_event
from jenkins_dispatch.callbacks.notifications import is_authorised
from jenkins_dispatch.callbacks.webhook import process
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.observability import logger
from jenkins_dispatch.serve import WebhookServer
from jenkins_dispatch.store.db import Database

from ..engines import numbers, scratch_database, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines
ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SECRET = "example-webhook-secret"  # the token the sample events carry
JOB = "team/deploy"  # the job path the sample events' url names
QUEUE_ID = 17  # the sample events' build.queue_id
THREADS = 8  # concurrent webhook sessions in the ordering test


def _load_handler():
    spec = importlib.util.spec_from_file_location("webhook_lambda_app", ROOT / "functions" / "webhook" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lambda_handler


lambda_handler = _load_handler()


class LambdaContext:
    """The parts of Lambda's context that Powertools' inject_lambda_context reads."""

    function_name = "jenkins-dispatch-webhook"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-webhook"
    aws_request_id = "c0ffee00-0000-4000-8000-00000000000a"


@pytest.fixture
def webhook_env(monkeypatch, database_url):
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "jd-webhook")  # the Lambda's way: metrics as EMF lines
    monkeypatch.delenv("WEBHOOK_SECRET_ARN", raising=False)
    monkeypatch.delenv("UNSTABLE_IS_FAILURE", raising=False)
    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture
def env(webhook_env, queue):
    return queue


def body_of(event) -> dict:
    raw = event["body"]
    if event.get("isBase64Encoded"):
        raw = base64.b64decode(raw).decode()
    return json.loads(raw)


def with_body(event, payload) -> dict:
    text = json.dumps(payload)
    if event.get("isBase64Encoded"):
        return {**event, "body": base64.b64encode(text.encode()).decode()}
    return {**event, "body": text}


def load_event(name, dispatch_id=None, **build_changes) -> dict:
    event = json.loads((EVENTS / f"webhook-{name}.json").read_text())
    if dispatch_id is None and not build_changes:
        return event
    payload = body_of(event)
    if dispatch_id is not None:
        payload["build"]["parameters"]["DISPATCH_ID"] = dispatch_id
    payload["build"].update(build_changes)
    return with_body(event, payload)


def invoke(event) -> tuple[int, dict]:
    response = lambda_handler(event, LambdaContext())
    assert response["statusCode"] != 500, response
    return response["statusCode"], json.loads(response["body"])


def processing_job(queue, job_name=JOB, queue_id=QUEUE_ID):
    queue.enqueue(job_name, {"ENV": "prod"})
    (job,) = queue.claim_batch(1)
    queue.mark_triggered(job, queue_id)
    return job


def snapshot(db, job_id):
    row = db.run("SELECT * FROM jenkins_jobs_queue WHERE id = :id", id=job_id)[0]
    events = db.run("SELECT count(*) AS n FROM jenkins_job_events WHERE job_id = :id", id=job_id)[0]["n"]
    return row, events


def handler_statements() -> int:
    return runtime.pool().statements


# --------------------------------------------------------------------------- each sample event


def test_queued_records_the_build(env, db):
    job = processing_job(env)
    status, body = invoke(load_event("queued", job.dispatch_id))
    assert (status, body["outcome"], body["job_id"]) == (200, "applied", job.id)
    row = env.get(job.id)
    assert (row["status"], row["build_number"]) == ("processing", 42)
    assert row["build_url"] == "https://ci.example.com/job/team/job/deploy/42/"
    assert row["started_at"] is None
    assert env.events(job.id)[-1]["event"] == "queued"


def test_started_records_the_start(env):
    job = processing_job(env)
    status, body = invoke(load_event("started", job.dispatch_id))
    assert (status, body["outcome"]) == (200, "applied")
    row = env.get(job.id)
    assert row["started_at"] is not None and row["build_number"] == 42


@pytest.mark.parametrize("name", ["completed", "finalized"])
def test_a_final_phase_settles_the_row(env, name):
    job = processing_job(env)
    status, body = invoke(load_event(name, job.dispatch_id))
    assert (status, body["outcome"]) == (200, "applied")
    row = env.get(job.id)
    assert (row["status"], row["jenkins_result"], row["build_number"], row["last_error"]) == (
        "completed", "SUCCESS", 42, None)
    assert row["finished_at"] is not None


def test_a_failed_build_fails_the_row_with_a_readable_reason(env):
    job = processing_job(env)
    assert invoke(load_event("completed-failure", job.dispatch_id))[0] == 200
    row = env.get(job.id)
    assert (row["status"], row["jenkins_result"]) == ("failed", "FAILURE")
    assert row["last_error"] == "Jenkins build #42 finished FAILURE"


def test_duplicates_and_late_phases_change_nothing(env, db):
    job = processing_job(env)
    assert invoke(load_event("started", job.dispatch_id))[1]["outcome"] == "applied"
    assert invoke(load_event("started", job.dispatch_id)) == (
        200, {"outcome": "duplicate", "message": f"job {job.id}: Jenkins build #42 started was already recorded",
              "job_id": job.id, "dispatch_id": job.dispatch_id, "phase": "STARTED"})
    assert invoke(load_event("completed", job.dispatch_id))[1]["outcome"] == "applied"
    settled = snapshot(db, job.id)
    for late in ("duplicate", "finalized", "queued", "started", "completed-failure"):
        status, body = invoke(load_event(late, job.dispatch_id))
        assert (status, body["outcome"]) == (200, "already_final"), late
    assert snapshot(db, job.id) == settled
    assert [e["event"] for e in env.events(job.id)].count("settled") == 1


def test_a_notification_of_an_earlier_attempt_is_stale(env, db):
    env.enqueue(JOB, {})
    (first,) = env.claim_batch(1)
    env.retry_later(first.id, first.dispatch_id, 0, "Jenkins answered 500")
    (second,) = env.claim_batch(1)
    assert second.id == first.id and second.dispatch_id != first.dispatch_id
    before = snapshot(db, first.id)
    status, body = invoke(load_event("stale", first.dispatch_id))
    assert (status, body["outcome"]) == (409, "stale")
    assert snapshot(db, first.id) == before


def test_a_row_put_back_to_pending_is_stale_for_its_attempt(env, db):
    env.enqueue(JOB, {})
    (job,) = env.claim_batch(1)
    env.retry_later(job.id, job.dispatch_id, 60, "Jenkins answered 500")
    status, body = invoke(load_event("completed", job.dispatch_id))
    assert (status, body["outcome"], body["job_id"]) == (409, "stale", job.id)
    assert env.get(job.id)["status"] == "pending"


@pytest.mark.parametrize("dispatch_id", ["jd-999999-0a1b2c3d4e", "not-ours", "legacy-5"])
def test_an_unknown_dispatch_id_is_404(env, dispatch_id):
    processing_job(env)
    status, body = invoke(load_event("completed", dispatch_id))
    assert (status, body["outcome"]) == (404, "unknown")


def test_a_dispatch_id_whose_number_is_not_its_row_still_finds_the_row(env, db):
    other = processing_job(env, queue_id=1)
    job = processing_job(env, queue_id=2)
    # A dispatch id of our shape that names another row: the fence refuses, the lookup finds the real row.
    forged = f"jd-{other.id}-{job.dispatch_id.rsplit('-', 1)[1]}"
    db.run("UPDATE jenkins_jobs_queue SET dispatch_id = :d WHERE id = :id", d=forged, id=job.id)
    status, body = invoke(load_event("completed", forged))
    assert (status, body["outcome"], body["job_id"]) == (200, "applied", job.id)
    assert env.get(other.id)["status"] == "processing"


def test_bad_token_is_401_and_never_reaches_the_database(env, db):
    job = processing_job(env)
    before, statements = snapshot(db, job.id), handler_statements()
    status, body = invoke(load_event("bad-token", job.dispatch_id))
    assert (status, body["outcome"]) == (401, "unauthorised")
    assert "not-the-secret" not in json.dumps(body)
    assert handler_statements() == statements
    assert snapshot(db, job.id) == before


@pytest.mark.parametrize("event", ["bad-token", "malformed", "xml"])
def test_refusals_are_answered_without_borrowing_a_session(env, monkeypatch, event):
    # Every session of the webhook's pool is taken (Lambda keeps one): a refusal must not wait for one.
    monkeypatch.setattr(runtime.pool(), "acquire_timeout", 30.0)
    with runtime.pool().session():
        status, body = invoke(load_event(event, processing_job(env).dispatch_id if event == "bad-token" else None))
    assert status in (400, 401) and body["outcome"] in ("unauthorised", "malformed"), body


@pytest.mark.parametrize(
    "query, headers",
    [("", {}), ("token=", {}), ("secret=example-webhook-secret", {}), ("", {"authorization": "Bearer "}),
     ("", {"authorization": "Basic " + base64.b64encode(b"example-webhook-secret:").decode()}),
     ("", {"x-jenkins-dispatch-token": ""})],
)
def test_no_usable_token_is_401(env, query, headers):
    event = load_event("queued")
    event["rawQueryString"] = query
    event.pop("queryStringParameters", None)
    event["headers"] = {**event["headers"], **headers}
    statements = handler_statements()
    assert invoke(event)[0] == 401
    assert handler_statements() == statements


def test_each_token_place_authenticates(env):
    job = processing_job(env)
    payload = body_of(load_event("started", job.dispatch_id))
    body = json.dumps(payload).encode()
    basic = "Basic " + base64.b64encode(f"jenkins:{SECRET}".encode()).decode()
    places = [
        http_api_event("POST", "/jenkins/notify", f"token={SECRET}", {}, body),
        http_api_event("POST", "/jenkins/notify", "", {"Authorization": basic}, body),
        http_api_event("POST", "/jenkins/notify", "", {"Authorization": f"Bearer {SECRET}"}, body),
        http_api_event("POST", "/jenkins/notify", "", {"X-Jenkins-Dispatch-Token": SECRET}, body),
    ]
    outcomes = [invoke(event)[1]["outcome"] for event in places]
    assert outcomes == ["applied", "duplicate", "duplicate", "duplicate"]


def test_malformed_body_is_400_with_one_line(env, db):
    job = processing_job(env)
    before = snapshot(db, job.id)
    status, body = invoke(load_event("malformed"))
    assert (status, body["outcome"]) == (400, "malformed")
    assert "not valid JSON" in body["message"] and "\n" not in body["message"]
    assert snapshot(db, job.id) == before


def test_xml_format_is_400_saying_which_format_to_use(env):
    status, body = invoke(load_event("xml"))
    assert status == 400 and "must use Format: JSON" in body["message"]


def test_too_large_is_413(env):
    event = load_event("queued")
    event["body"] = "x" * (256 * 1024 + 1)
    status, body = invoke(event)
    assert (status, body["outcome"]) == (413, "too_large")


def test_base64_body_is_decoded(env):
    job = processing_job(env)
    event = load_event("base64", job.dispatch_id)
    assert event["isBase64Encoded"] is True
    assert invoke(event)[1]["outcome"] == "applied"
    assert env.get(job.id)["started_at"] is not None


def test_named_stage_routes(env):
    job = processing_job(env)
    status, body = invoke(load_event("named-stage", job.dispatch_id))
    assert (status, body["outcome"]) == (200, "applied")
    assert env.get(job.id)["build_url"] == "job/team/job/deploy/42/"  # no Jenkins root URL: the relative one


@pytest.mark.parametrize("unstable_is_failure, expected", [(None, "completed"), ("true", "failed")])
def test_function_url_event_with_unstable(env, monkeypatch, unstable_is_failure, expected):
    if unstable_is_failure:
        monkeypatch.setenv("UNSTABLE_IS_FAILURE", unstable_is_failure)
        runtime.reset()
    job = processing_job(env)
    assert invoke(load_event("function-url", job.dispatch_id))[0] == 200
    row = env.get(job.id)
    assert (row["status"], row["jenkins_result"]) == (expected, "UNSTABLE")


def test_fallback_by_job_path_and_queue_id(env):
    job = processing_job(env, queue_id=555)
    event = load_event("completed", parameters={"ENV": "prod"}, queue_id=555)
    status, body = invoke(event)
    assert (status, body["outcome"], body["job_id"]) == (200, "applied", job.id)
    assert env.get(job.id)["status"] == "completed"
    status, body = invoke(load_event("completed", parameters={}, queue_id=556))
    assert (status, body["outcome"]) == (404, "unknown")


def test_without_dispatch_id_or_queue_id_is_400(env):
    event = load_event("completed", parameters={})
    payload = body_of(event)
    del payload["build"]["queue_id"]
    status, body = invoke(with_body(event, payload))
    assert status == 400 and "DISPATCH_ID" in body["message"]


def test_happy_path_is_one_statement(env):
    job = processing_job(env)
    for name in ("queued", "started", "completed"):
        before = handler_statements()
        assert invoke(load_event(name, job.dispatch_id))[1]["outcome"] == "applied"
        assert handler_statements() - before == 1, name


@pytest.mark.parametrize(
    "method, path, status",
    [("GET", "/jenkins/notify", 405), ("PUT", "/prod/jenkins/notify", 405), ("POST", "/jenkins/other", 404),
     ("POST", "/", 404), ("GET", "/favicon.ico", 404), ("POST", "/jenkins/notify/", 200)],
)
def test_routing(env, method, path, status):
    job = processing_job(env)
    event = load_event("started", job.dispatch_id)
    event["rawPath"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["stage"] = "prod" if path.startswith("/prod/") else "$default"
    code, body = invoke(event)
    assert code == status and body["outcome"] in ("no_route", "applied")


def test_get_sample_event_is_405(env):
    response = lambda_handler(load_event("get"), LambdaContext())
    assert response["statusCode"] == 405 and response["headers"]["Allow"] == "POST"


@pytest.mark.parametrize(
    "event",
    [None, [], "text", {}, {"requestContext": 5}, {"rawPath": 3, "requestContext": {"http": None}},
     {"rawPath": "/jenkins/notify", "requestContext": {"http": {"method": "POST"}}, "headers": {"x": 1}}],
)
def test_odd_events_never_500(env, event):
    response = handle_http_event(event)
    assert response["statusCode"] in (400, 401, 404)
    json.loads(response["body"])


def test_database_down_is_503_naming_the_host_not_the_password(webhook_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:hunter2@127.0.0.1:1/jobs")
    runtime.reset()
    status, body = invoke(load_event("completed"))
    assert (status, body["outcome"]) == (503, "unavailable")
    assert "127.0.0.1:1" in body["message"] and "hunter2" not in body["message"]


def test_missing_secret_configuration_is_503_and_the_log_names_the_variable(webhook_env, monkeypatch):
    monkeypatch.delenv("WEBHOOK_SECRET")
    runtime.reset()
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        status, body = invoke(load_event("completed"))
    finally:
        logger.registered_handler.setStream(previous)
    logged = log_stream.getvalue()
    assert status == 503 and "misconfigured" in body["message"]
    assert "WEBHOOK_SECRET" in logged


def test_one_log_line_per_notification_without_secrets(env, capsys):
    job = processing_job(env)
    capsys.readouterr()
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        invoke(load_event("queued", job.dispatch_id))
        invoke(load_event("bad-token", job.dispatch_id))
    finally:
        logger.registered_handler.setStream(previous)
    logs = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [(entry["outcome"], entry.get("job_id")) for entry in logs] == [("applied", job.id), ("unauthorised", None)]
    assert logs[0]["dispatch_id"] == job.dispatch_id and logs[0]["phase"] == "QUEUED"
    assert logs[0]["query"] == "token=REDACTED" and isinstance(logs[0]["latency_ms"], float)
    emf = capsys.readouterr().out
    assert "NotificationsAccepted" in emf and "NotificationsRejectedAuth" in emf
    for text in (log_stream.getvalue(), emf):
        assert SECRET not in text and "not-the-secret" not in text


def test_every_log_line_of_an_invocation_names_the_api_request_and_the_function(env):
    """The handler's decorators: the HTTP API's request id as correlation id, the Lambda context's fields."""
    job = processing_job(env)
    event = load_event("queued", job.dispatch_id)
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        invoke(event)
    finally:
        logger.registered_handler.setStream(previous)
    [entry] = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert entry["correlation_id"] == event["requestContext"]["requestId"]
    assert (entry["function_name"], entry["function_request_id"]) == (
        LambdaContext.function_name, LambdaContext.aws_request_id)


# --------------------------------------------------------------------------- only the dispatched job (issue #11)


def downstream_payload(dispatch_id, phase, *, name="child", url="job/team/job/child/", number=7, status=None,
                       build_url=None, full_url=None):
    """A Notification-plugin payload of a build that inherited the parent's DISPATCH_ID ("current build
    parameters" of a parameterized trigger, or a Pipeline's build step passing params on)."""
    job_url = url or "job/team/job/child/"
    build = {"full_url": full_url if full_url is not None else f"https://ci.example.com/{job_url}{number}/",
             "number": number, "queue_id": 900, "phase": phase,
             "url": build_url if build_url is not None else f"{job_url}{number}/",
             "parameters": {"ENV": "prod", "DISPATCH_ID": dispatch_id}}
    if status is not None:
        build["status"] = status
    payload = {"name": name, "url": url, "build": {k: v for k, v in build.items() if v != ""}}
    return {k: v for k, v in payload.items() if v is not None}


CHILDREN = {
    "another job in the same folder": dict(name="child", url="job/team/job/child/"),
    "a job with the same leaf name in another folder": dict(name="deploy", url="job/other/job/deploy/"),
    "a job named like the parent's folder": dict(name="team", url="job/team/"),
    "only build.url names it": dict(name="child", url=None, build_url="job/team/job/child/7/"),
    "only full_url names it": dict(name="child", url=None, build_url="",
                                   full_url="https://ci.example.com/job/team/job/child/7/"),
    "only the leaf name (hand-written payload)": dict(name="child", url=None, build_url="", full_url=""),
}


@pytest.mark.parametrize("child", CHILDREN.values(), ids=CHILDREN.keys())
def test_a_downstream_build_that_inherited_the_dispatch_id_is_ignored(env, db, child, capsys):
    job = processing_job(env)
    assert invoke(load_event("started", job.dispatch_id))[1]["outcome"] == "applied"
    before = snapshot(db, job.id)
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        for phase, status in (("QUEUED", None), ("STARTED", None), ("COMPLETED", "FAILURE"), ("FINALIZED", "FAILURE")):
            event = with_body(load_event("completed"), downstream_payload(job.dispatch_id, phase, status=status, **child))
            code, body = invoke(event)
            assert (code, body["outcome"], body["message"]) == (200, "ignored", "ignored: not the dispatched job"), body
            assert snapshot(db, job.id) == before, phase
    finally:
        logger.registered_handler.setStream(previous)
    logs = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [entry["outcome"] for entry in logs] == ["ignored"] * 4
    assert "NotificationsIgnored" in capsys.readouterr().out
    # The parent's own completion still settles the row, with the parent's build.
    assert invoke(load_event("completed", job.dispatch_id))[1]["outcome"] == "applied"
    row = env.get(job.id)
    assert (row["status"], row["build_number"], row["build_url"]) == (
        "completed", 42, "https://ci.example.com/job/team/job/deploy/42/")


def test_a_downstream_build_is_ignored_after_the_parent_settled_and_on_the_lookup_path(env, db):
    other = processing_job(env, queue_id=1)
    job = processing_job(env, queue_id=2)
    # A dispatch id whose number is another row's: the fenced statement misses, the lookup decides.
    forged = f"jd-{other.id}-{job.dispatch_id.rsplit('-', 1)[1]}"
    db.run("UPDATE jenkins_jobs_queue SET dispatch_id = :d WHERE id = :id", d=forged, id=job.id)
    failed_child = with_body(load_event("completed"), downstream_payload(forged, "COMPLETED", status="FAILURE"))
    assert invoke(failed_child)[1]["outcome"] == "ignored"
    assert env.get(job.id)["status"] == "processing"
    assert invoke(load_event("completed", forged))[1]["outcome"] == "applied"
    settled = snapshot(db, job.id)
    code, body = invoke(failed_child)
    assert (code, body["outcome"], body["job_id"]) == (200, "ignored", job.id)
    assert snapshot(db, job.id) == settled and env.get(other.id)["status"] == "processing"


MATCHING = {
    "folders from the job url": ("team/app/deploy", dict(name="deploy", url="job/team/job/app/job/deploy/")),
    "Jenkins under a context path": ("team/deploy", dict(name="deploy", url="https://ci.example.com/jenkins/job/team/job/deploy/")),
    "a percent-encoded name": ("Test Job", dict(name="Test Job", url="job/Test%20Job/")),
    "a multibranch branch job": ("repo/feature%2Ffoo", dict(name="feature%2Ffoo", url="job/repo/job/feature%252Ffoo/")),
    "another case (Jenkins item names are case-insensitive)": ("Team/Deploy", dict(name="deploy", url="job/team/job/deploy/")),
    "only the leaf name": ("team/deploy", dict(name="deploy", url=None, build_url="", full_url="")),
}


@pytest.mark.parametrize("job_name, identity", MATCHING.values(), ids=MATCHING.keys())
def test_the_dispatched_job_is_recognised_however_jenkins_writes_its_path(env, job_name, identity):
    job = processing_job(env, job_name=job_name)
    event = with_body(load_event("completed"), downstream_payload(job.dispatch_id, "COMPLETED", status="SUCCESS",
                                                                  **identity))
    before = handler_statements()
    code, body = invoke(event)
    assert (code, body["outcome"]) == (200, "applied"), body
    assert handler_statements() - before == 1
    assert env.get(job.id)["status"] == "completed"


def test_a_notification_that_names_no_job_is_400(env, db):
    job = processing_job(env)
    before = snapshot(db, job.id)
    payload = downstream_payload(job.dispatch_id, "COMPLETED", status="FAILURE", name=None, url=None,
                                 build_url="", full_url="")
    code, body = invoke(with_body(load_event("completed"), payload))
    assert (code, body["outcome"]) == (400, "malformed") and "names no job" in body["message"]
    assert snapshot(db, job.id) == before


def test_ignoring_costs_one_lookup_and_the_happy_path_stays_one_statement(env):
    job = processing_job(env)
    before = handler_statements()
    child = with_body(load_event("completed"), downstream_payload(job.dispatch_id, "STARTED"))
    assert invoke(child)[1]["outcome"] == "ignored"
    assert handler_statements() - before == 2  # the fenced statement, then the row's lookup
    before = handler_statements()
    assert invoke(load_event("started", job.dispatch_id))[1]["outcome"] == "applied"
    assert handler_statements() - before == 1


# --------------------------------------------------------------------------- over HTTP: URLs and tokens (issue #11)


@pytest.fixture
def http_webhook(env):
    server = WebhookServer(runtime.settings()).start()
    yield server
    server.stop()


def http_notify(server, payload, query="", headers=None):
    request = urllib.request.Request(f"{server.url}jenkins/notify" + (f"?{query}" if query else ""),
                                     data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


MALFORMED_URLS = {
    "unbalanced bracket": "http://[/job/deploy/",
    "not an IP literal": "http://[zz]/job/team/job/deploy/",
    "host changes under NFKC": "http://ex\u2100ample.com/job/team/job/deploy/",
    "fullwidth number sign in the host": "https://ci\uff03x.example.com/job/team/job/deploy/42/",
    "network-path reference": "//[ci/job/team/job/deploy/",
}


@pytest.mark.parametrize("field", ["url", "build.url", "build.full_url"])
@pytest.mark.parametrize("bad_url", MALFORMED_URLS.values(), ids=MALFORMED_URLS.keys())
def test_a_malformed_url_is_400_with_one_line_never_500(http_webhook, db, env, field, bad_url):
    job = processing_job(env)
    before = snapshot(db, job.id)
    payload = body_of(load_event("started", job.dispatch_id))
    if field == "url":
        payload["url"] = bad_url
    else:
        payload["build"][field.split(".")[1]] = bad_url
    status, body = http_notify(http_webhook, payload, f"token={SECRET}")
    assert (status, body["outcome"]) == (400, "malformed"), body
    assert field in body["message"] and "not a valid URL" in body["message"] and "\n" not in body["message"]
    assert snapshot(db, job.id) == before


SEVERAL_TOKEN_REQUESTS = {
    "two query tokens, the second right": ("token=wrong&token=" + SECRET, {}),
    "a thousand query tokens": ("&".join(f"token=guess{i}" for i in range(999)) + f"&token={SECRET}", {}),
    "right query token, wrong header": (f"token={SECRET}", {"X-Jenkins-Dispatch-Token": "wrong"}),
    "wrong query token, right header": ("token=wrong", {"X-Jenkins-Dispatch-Token": SECRET}),
    "empty query token, right bearer": ("token=", {"Authorization": f"Bearer {SECRET}"}),
    "right Basic password, wrong header": (
        "", {"Authorization": "Basic " + base64.b64encode(f"jenkins:{SECRET}".encode()).decode(),
             "X-Jenkins-Dispatch-Token": "wrong"}),
    "wrong bearer, right query": (f"token={SECRET}", {"Authorization": "Bearer wrong"}),
}


@pytest.mark.parametrize("query, headers", SEVERAL_TOKEN_REQUESTS.values(), ids=SEVERAL_TOKEN_REQUESTS.keys())
def test_several_tokens_in_one_request_are_401_and_nothing_is_read(http_webhook, env, db, query, headers):
    job = processing_job(env)
    before, statements = snapshot(db, job.id), handler_statements()
    status, body = http_notify(http_webhook, body_of(load_event("completed", job.dispatch_id)), query, headers)
    assert (status, body["outcome"]) == (401, "unauthorised"), body
    assert "exactly one" in body["message"]
    assert SECRET not in json.dumps(body)
    assert handler_statements() == statements and snapshot(db, job.id) == before


def test_the_same_token_in_two_places_is_one_token(http_webhook, env):
    job = processing_job(env)
    payload = body_of(load_event("started", job.dispatch_id))
    status, body = http_notify(http_webhook, payload, f"token={SECRET}&token={SECRET}",
                               {"X-Jenkins-Dispatch-Token": SECRET})
    assert (status, body["outcome"]) == (200, "applied"), body


# --------------------------------------------------------------------------- idempotency and ordering


def test_500_jobs_with_repeated_shuffled_concurrent_notifications(queue, db, database_url):
    rng = random.Random(5)
    # A plain INSERT is a valid enqueue (contract); one statement keeps the setup quick.
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, parameters) "
           f"SELECT '{JOB}', {sql_for(db, postgresql='jsonb_build_object', mysql='JSON_OBJECT')}('N', g) "
           f"FROM {numbers(db, 500)}")
    jobs = queue.claim_batch(500)
    results = {}
    notifications = []
    for job in jobs:
        result = rng.choice(["SUCCESS", "UNSTABLE", "FAILURE", "ABORTED", "NOT_BUILT"])
        results[job.id] = result
        by_queue_id = rng.random() < 0.1  # a tenth found through the job path + queue id fallback
        for phase in ("QUEUED", "STARTED", "COMPLETED", "FINALIZED"):
            build = {"number": job.id, "queue_id": 10_000 + job.id, "phase": phase,
                     "url": f"job/team/job/deploy/{job.id}/", "parameters": {"ENV": "prod"}}
            if not by_queue_id:
                build["parameters"]["DISPATCH_ID"] = job.dispatch_id
            if phase in ("COMPLETED", "FINALIZED"):
                build["status"] = result
            event = {"headers": {"x-jenkins-dispatch-token": SECRET},
                     "body": json.dumps({"name": "deploy", "url": "job/team/job/deploy/", "build": build})}
            notifications += [event] * rng.randint(1, 3)
    rng.shuffle(notifications)

    answers, errors = [], []
    all_triggered = threading.Barrier(THREADS)

    def worker(n):
        with Database(parse_database_url(database_url)) as own_db:
            own_queue = Queue(own_db, lease_seconds=60)
            try:
                for job in jobs[n::THREADS]:
                    own_queue.mark_triggered(job, 10_000 + job.id)
                all_triggered.wait()
                for event in notifications[n::THREADS]:
                    answers.append(process(callback_from_event(event), secret=SECRET, queue=own_queue))
            except Exception as exc:  # surfaced below
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(answers) == len(notifications)
    assert {a.status_code for a in answers} == {200}

    rows = db.run("SELECT id, status, jenkins_result, build_number, last_error FROM jenkins_jobs_queue")
    assert len(rows) == 500
    for row in rows:
        result = results[row["id"]]
        expected = "completed" if result in ("SUCCESS", "UNSTABLE") else "failed"
        assert (row["status"], row["jenkins_result"], row["build_number"]) == (expected, result, row["id"])
        assert row["last_error"] == (None if expected == "completed" else f"Jenkins build #{row['id']} finished {result}")
    settled = db.run("SELECT job_id, count(*) AS n FROM jenkins_job_events WHERE event = 'settled' GROUP BY job_id")
    assert len(settled) == 500 and {r["n"] for r in settled} == {1}
    applied = sum(a.outcome == "applied" for a in answers)
    assert 500 <= applied <= 1500  # one settle per job, plus at most one queued and one started each


# --------------------------------------------------------------------------- arbitrary input

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


# URLs urlsplit refuses (an unbalanced or non-IP '[' host, a host NFKC normalisation changes), and good ones.
malformed_urls = st.builds(
    lambda scheme, host, path: f"{scheme}{host}{path}",
    st.sampled_from(["http://", "https://", "//"]),
    st.sampled_from(["[", "[zz]", "[::1", "ex\u2100ample", "ci\uff03x", "a\ufe5fb", "a\uff1fb"]),
    st.sampled_from(["/job/deploy/", "/job/team/job/deploy/42/", ""]),
)
urls = st.one_of(
    st.text(max_size=30), st.none(), st.integers(), malformed_urls,
    st.sampled_from(["job/team/job/deploy/42/", "https://ci.example.com/job/team/job/deploy/42/",
                     "job/other/job/deploy/42/", "http://[::1]/job/team/job/deploy/42/"]),
)


@st.composite
def notification_bodies(draw, dispatch_id):
    build = {
        "phase": draw(st.sampled_from(["QUEUED", "STARTED", "COMPLETED", "FINALIZED", "NONE", "", 5, None])),
        "number": draw(st.one_of(st.integers(-5, 2**33), st.none(), st.text(max_size=3), st.booleans())),
        "queue_id": draw(st.one_of(st.integers(-1, 2**64), st.none())),
        "status": draw(st.sampled_from(["SUCCESS", "UNSTABLE", "FAILURE", "ABORTED", "NOT_BUILT", "FAILED", None, 1])),
        "url": draw(urls),
        "full_url": draw(urls),
        "parameters": draw(st.one_of(
            st.fixed_dictionaries({"DISPATCH_ID": st.one_of(st.just(dispatch_id), st.text(max_size=12), st.integers())}),
            json_values,
        )),
    }
    build = {k: v for k, v in build.items() if v is not None or draw(st.booleans())}
    payload = {"name": draw(st.text(max_size=10)),
               "url": draw(st.one_of(st.just("job/team/job/deploy/"), st.just("job/team/job/child/"), urls, json_values)),
               "build": build if draw(st.integers(0, 9)) else draw(json_values)}
    return json.dumps(payload)


@st.composite
def requests(draw, dispatch_id):
    body = draw(st.one_of(
        notification_bodies(dispatch_id),
        st.text(max_size=200),
        json_values.map(json.dumps),
        st.binary(max_size=200).map(lambda b: base64.b64encode(b).decode()),
    ))
    headers = draw(st.dictionaries(st.text(string.ascii_letters + "-", min_size=1, max_size=20), st.text(max_size=30),
                                   max_size=4))
    where = draw(st.sampled_from(["none", "wrong", "query", "basic", "bearer", "header", "several"]))
    query = draw(st.sampled_from(["", "a=b", "token="]))
    if where == "wrong":
        headers["authorization"] = "Bearer " + draw(st.text(max_size=30).filter(lambda t: t.strip() != SECRET))
    elif where == "query":
        query = f"token={SECRET}"
    elif where == "basic":
        headers["authorization"] = "Basic " + base64.b64encode(f"u:{SECRET}".encode()).decode()
    elif where == "bearer":
        headers["authorization"] = f"Bearer {SECRET}"
    elif where == "header":
        headers["x-jenkins-dispatch-token"] = SECRET
    elif where == "several":  # the secret among other candidates, in one place or several
        guesses = draw(st.lists(st.text(max_size=8), min_size=1, max_size=5))
        query = "&".join([f"token={SECRET}", *(f"token={g}" for g in guesses)])
        if draw(st.booleans()):
            headers["x-jenkins-dispatch-token"] = SECRET
    event = {
        "version": "2.0", "rawPath": "/jenkins/notify", "rawQueryString": query, "headers": headers,
        "requestContext": {"http": {"method": "POST"}, "stage": "$default"},
        "body": body, "isBase64Encoded": draw(st.booleans()),
    }
    return event


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arbitrary_requests_never_500_and_never_change_a_row_unless_valid(env, db, data):
    job = processing_job(env)
    event = data.draw(requests(job.dispatch_id))
    before, statements = snapshot(db, job.id), handler_statements()
    response = lambda_handler(event, LambdaContext())
    assert response["statusCode"] in (200, 400, 401, 404, 409, 413), response
    body = json.loads(response["body"])
    if not is_authorised(event, SECRET):
        assert response["statusCode"] == 401
        assert handler_statements() == statements
    if body["outcome"] != "applied":
        assert snapshot(db, job.id) == before


def _is_malformed_url(value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        urllib.parse.urlsplit(value)
    except ValueError:
        return True
    return False


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_authenticated_notifications_with_any_urls_never_500(env, db, data):
    """Issue #11: urlsplit refusing a URL field (a '[' host, a host NFKC changes) was a 500."""
    job = processing_job(env)
    phase = data.draw(st.sampled_from(["QUEUED", "STARTED", "COMPLETED", "FINALIZED"]))
    build = {"number": 42, "queue_id": QUEUE_ID, "phase": phase, "parameters": {"DISPATCH_ID": job.dispatch_id}}
    if phase in ("COMPLETED", "FINALIZED"):
        build["status"] = data.draw(st.sampled_from(["SUCCESS", "FAILURE"]))
    fields = {"url": data.draw(st.one_of(malformed_urls, urls, st.just("job/team/job/deploy/")))}
    for key in ("url", "full_url"):
        fields[f"build.{key}"] = data.draw(st.one_of(malformed_urls, urls))
    payload = {"name": data.draw(st.sampled_from(["deploy", "child", ""])), "build": build}
    if fields["url"] is not None:
        payload["url"] = fields["url"]
    for key in ("url", "full_url"):
        if fields[f"build.{key}"] is not None:
            build[key] = fields[f"build.{key}"]
    before = snapshot(db, job.id)
    response = lambda_handler(with_body(load_event("completed"), payload), LambdaContext())
    assert response["statusCode"] in (200, 400), response
    body = json.loads(response["body"])
    if any(_is_malformed_url(v) for v in fields.values()):
        assert response["statusCode"] == 400 and body["message"].startswith(("url ", "build.url ", "build.full_url ")), body
    if body["outcome"] != "applied":
        assert snapshot(db, job.id) == before


@pytest.mark.parametrize("bad", ["ab\u0000c", "\ud800"])
def test_text_postgresql_cannot_store_is_400_not_503_or_500(env, db, bad):
    job = processing_job(env)
    before = snapshot(db, job.id)
    for event in (load_event("started", dispatch_id=bad),
                  with_body(load_event("started"), {"name": JOB, "url": f"job/{bad}/",
                                                    "build": {"phase": "STARTED", "number": 1, "queue_id": QUEUE_ID}})):
        status, answer = invoke(event)
        assert status == 400, answer
    assert snapshot(db, job.id) == before


def test_a_configuration_error_is_not_told_to_an_unauthenticated_caller(webhook_env, monkeypatch):
    monkeypatch.setenv("JENKINS_URL", "htps://admin:SECRET-JENKINS-TOKEN@ci.example.com/")
    runtime.reset()
    response = lambda_handler(load_event("bad-token"), LambdaContext())
    assert response["statusCode"] == 503
    assert "SECRET-JENKINS-TOKEN" not in response["body"] and "misconfigured" in response["body"]


def test_a_second_build_of_the_same_dispatch_never_settles_the_row(env, db):
    """A late duplicate (stopped by the README's Pipeline guard, so it ends FAILURE) carries the row's
    DISPATCH_ID and job: once the row knows its build, the other build's callbacks are 200 ignored."""
    job = processing_job(env)
    assert invoke(load_event("started", job.dispatch_id))[0] == 200  # build #42 is the row's
    before = snapshot(db, job.id)
    for phase in ("started", "completed-failure"):
        status, body = invoke(load_event(phase, job.dispatch_id, number=43, url="job/team/job/deploy/43/",
                                         full_url="https://ci.example.com/job/team/job/deploy/43/"))
        assert (status, body["outcome"]) == (200, "ignored"), body
        assert "#43 is not" in body["message"]
    assert snapshot(db, job.id) == before
    status, body = invoke(load_event("completed", job.dispatch_id))  # #42 finishes: it settles the row
    assert (status, body["outcome"]) == (200, "applied")
    assert env.get(job.id)["status"] == "completed" and env.get(job.id)["build_number"] == 42


def test_a_database_without_the_schema_is_503_not_500(webhook_env, monkeypatch, engine):
    """The tables are missing (migrate never ran on this database): the webhook says so, 503, never 500."""
    with scratch_database(engine, prefix="jd_nomig_wh") as url:
        monkeypatch.setenv("DATABASE_URL", url)
        runtime.reset()
        try:
            status, body = invoke(load_event("completed", "jd-1-abcdef0123"))
        finally:
            runtime.reset()
    assert status == 503 and "jenkins-dispatch migrate" in body["message"]
