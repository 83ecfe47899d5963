"""The migrations custom resource, invoked in-process with each events/migrate-*.json request.

The pre-signed ResponseURL is pointed at a local HTTP listener that records the PUT, so the test sees the
exact document CloudFormation would receive.
"""

from __future__ import annotations

import importlib.util
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jenkins_dispatch import custom_resource, runtime
from jenkins_dispatch.observability import logger

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


def _load_handler():
    spec = importlib.util.spec_from_file_location("migrate_app", ROOT / "functions" / "migrate" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lambda_handler


class FakeContext:
    function_name = "jenkins-dispatch-MigrateFunction"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-MigrateFunction"
    aws_request_id = "c0ffee00-0000-4000-8000-000000000001"
    log_stream_name = "2025/01/15/[$LATEST]abc"

    def __init__(self, remaining_ms: int = 120_000):
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class Listener:
    """A stand-in for the S3 pre-signed URL: records each PUT (path, headers, JSON body)."""

    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}
                )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    @property
    def document(self) -> dict:
        assert len(self.requests) == 1, f"expected exactly one response, got {len(self.requests)}"
        return self.requests[0]["body"]


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def handler():
    runtime.reset()
    yield _load_handler()
    runtime.reset()


def _event(name: str, listener: Listener) -> dict:
    event = json.loads((EVENTS / f"{name}.json").read_text())
    event["ResponseURL"] = f"{listener.url}/cfn-response/{event['RequestId']}?X-Amz-Signature=example"
    return event


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_document(doc: dict, event: dict, status: str) -> None:
    assert doc["Status"] == status, doc
    assert doc["StackId"] == event["StackId"]
    assert doc["RequestId"] == event["RequestId"]
    assert doc["LogicalResourceId"] == event["LogicalResourceId"]
    assert doc["PhysicalResourceId"] == "jenkins-dispatch-schema"
    assert isinstance(doc["Data"], dict)
    assert doc["Reason"] and "\n" not in doc["Reason"]


def _tables(db) -> set[str]:
    rows = db.run("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    return {r["tablename"] for r in rows}


def test_create_applies_schema_and_answers_success(database_url, db, listener, handler):
    # A fresh database (the session one is already migrated): Create must apply every migration.
    from jenkins_dispatch.config import parse_database_url
    from jenkins_dispatch.store.db import Database
    from tests.pg_server import scratch_database

    with scratch_database(database_url, prefix="jd_cr") as fresh_url:
        if fresh_url == database_url:
            pytest.skip("cannot create a scratch database on this server")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DATABASE_URL", fresh_url)
            event = _event("migrate-create", listener)
            result = handler(event, FakeContext())
            runtime.reset()
        doc = listener.document
        _assert_document(doc, event, "SUCCESS")
        assert result["Status"] == "SUCCESS"
        assert doc["Reason"].startswith("Create: applied 0001_")
        assert doc["Data"]["AppliedCount"] != "0"
        assert "0001_" in doc["Data"]["Applied"]
        with Database(parse_database_url(fresh_url)) as fresh:
            assert {"jenkins_jobs_queue", "jenkins_dispatch_migrations"} <= _tables(fresh)
    # The listener saw a PUT with an empty Content-Type (what a pre-signed S3 URL is signed for).
    headers = {k.lower(): v for k, v in listener.requests[0]["headers"].items()}
    assert headers.get("content-type", "") == ""
    assert listener.requests[0]["path"].startswith(f"/cfn-response/{event['RequestId']}")


def test_update_is_idempotent_and_answers_success(database_url, db, listener, handler):
    event = _event("migrate-update", listener)
    result = handler(event, FakeContext())
    doc = listener.document
    _assert_document(doc, event, "SUCCESS")
    assert result == {"Status": "SUCCESS", "Reason": doc["Reason"], "PhysicalResourceId": "jenkins-dispatch-schema"}
    assert doc["Reason"] == "Update: schema up to date: no migration to apply"
    assert doc["Data"] == {"Applied": "", "AppliedCount": "0"}
    assert "jenkins_jobs_queue" in _tables(db)


def test_delete_is_a_noop_success(database_url, db, listener, handler):
    db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('kept')")
    event = _event("migrate-delete", listener)
    handler(event, FakeContext())
    doc = listener.document
    _assert_document(doc, event, "SUCCESS")
    assert "nothing to do" in doc["Reason"]
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"] == 1


def test_every_log_line_names_the_cloudformation_request(listener, handler):
    """The handler's decorator: CloudFormation's RequestId as correlation id, the Lambda context's fields."""
    event = _event("migrate-delete", listener)
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        handler(event, FakeContext())
    finally:
        logger.registered_handler.setStream(previous)
    logged = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert logged and {entry.get("correlation_id") for entry in logged} == {event["RequestId"]}
    assert {entry.get("function_request_id") for entry in logged} == {FakeContext.aws_request_id}


def test_delete_answers_even_without_a_database(listener, handler, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", f"postgresql://u:pw@127.0.0.1:{_closed_port()}/nope")
    event = _event("migrate-delete", listener)
    handler(event, FakeContext())
    assert listener.document["Status"] == "SUCCESS"


@pytest.mark.parametrize("name", ["migrate-create", "migrate-update"])
def test_unreachable_database_answers_failed_without_password(name, listener, handler, monkeypatch):
    password = "s3cr3t-Pa55word"
    port = _closed_port()
    monkeypatch.setenv("DATABASE_URL", f"postgresql://dispatch:{password}@127.0.0.1:{port}/jobs")
    monkeypatch.setenv("DB_CONNECT_TIMEOUT_SECONDS", "2")
    event = _event(name, listener)
    result = handler(event, FakeContext())
    doc = listener.document
    _assert_document(doc, event, "FAILED")
    assert result["Status"] == "FAILED"
    reason = doc["Reason"]
    assert "DatabaseUnavailable" in reason and f"127.0.0.1:{port}" in reason, reason
    assert password not in json.dumps(doc)


def test_bad_configuration_answers_failed_naming_the_variable(listener, handler, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "oracle://root:hunter2@db/jobs")
    event = _event("migrate-create", listener)
    handler(event, FakeContext())
    doc = listener.document
    assert doc["Status"] == "FAILED"
    assert "DATABASE_URL" in doc["Reason"]
    assert "hunter2" not in json.dumps(doc)


def test_answers_failed_before_the_function_times_out(database_url, listener, handler, monkeypatch):
    release, finished = threading.Event(), threading.Event()

    def stuck(_db, *_settings):
        release.wait(30)
        finished.set()
        return []

    monkeypatch.setattr(custom_resource, "migrate", stuck)
    event = _event("migrate-update", listener)
    try:
        result = handler(event, FakeContext(remaining_ms=2_000))
        assert not finished.is_set()  # it answered on its own budget, not once the migration ended
    finally:
        release.set()
    doc = listener.document
    assert result["Status"] == doc["Status"] == "FAILED"
    assert "about to time out" in doc["Reason"]


def test_unknown_request_type_answers_failed(listener, handler):
    event = _event("migrate-create", listener)
    event["RequestType"] = "Rollback"
    handler(event, FakeContext())
    assert listener.document["Status"] == "FAILED"
    assert "RequestType" in listener.document["Reason"]


def test_unreachable_response_url_does_not_raise(handler, monkeypatch):
    monkeypatch.setattr(custom_resource, "RESPONSE_TIMEOUT_SECONDS", 1.0)
    monkeypatch.setattr(custom_resource, "RESPONSE_ATTEMPTS", 2)
    event = json.loads((EVENTS / "migrate-delete.json").read_text())
    event["ResponseURL"] = f"http://127.0.0.1:{_closed_port()}/nowhere"
    assert handler(event, FakeContext())["Status"] == "SUCCESS"


def test_redaction_of_credentials_in_reasons():
    text = "cannot connect to postgresql://bob:pa55@db:5432/x\nsecond line"
    assert custom_resource._one_line(text) == "cannot connect to postgresql://bob:***@db:5432/x second line"
    assert custom_resource._one_line("token=abc123 here", ("abc123",)) == "token=*** here"
    assert len(custom_resource._one_line("x" * 5000)) == custom_resource.MAX_REASON_CHARS


def test_a_stack_update_brings_a_mysql_schema_up_to_date(listener, handler, monkeypatch):
    """`sam deploy` of a new version on MySQL: the Update request runs the migrations 0001 did not have (here
    0003 and those after it, on a database left as 0001 and 0002 made it), keeping the rows."""
    from jenkins_dispatch.config import parse_database_url
    from jenkins_dispatch.store.db import Database
    from jenkins_dispatch.store.migrations import migrate, migration_files
    from tests.mysql_server import NO_SERVER, mysql_admin_url, scratch_database

    admin_url = mysql_admin_url()
    if admin_url is None:
        pytest.skip(NO_SERVER)
    with scratch_database(admin_url, prefix="jd_cr") as url:
        with Database(parse_database_url(url)) as db:
            migrate(db)
            db.run("ALTER TABLE jenkins_jobs_queue DROP INDEX jenkins_jobs_queue_open_job_idx, DROP COLUMN open_job_key")
            db.run("DELETE FROM jenkins_dispatch_migrations WHERE version >= 3")
            db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('kept')")
        monkeypatch.setenv("DATABASE_URL", url)
        event = _event("migrate-update", listener)
        result = handler(event, FakeContext())
        runtime.reset()
        doc = listener.document
        _assert_document(doc, event, "SUCCESS")
        assert result["Status"] == "SUCCESS"
        later = [n for n, _, _ in migration_files("mysql") if n >= 3]  # 0003 and every file after it
        assert doc["Reason"].startswith("Update: applied 0003_") and doc["Data"]["AppliedCount"] == str(len(later))
        with Database(parse_database_url(url)) as db:
            assert db.run("SELECT job_name, open_job_key IS NOT NULL AS keyed FROM jenkins_jobs_queue") == [
                {"job_name": "kept", "keyed": 1}]


class Blackhole:
    """A response URL whose host takes the connection and never answers: what a VPC without a route to S3
    looks like from inside (or an S3 that hangs). Nothing ever accepts, so the request waits for its timeout."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/cfn-response?X-Amz-Signature=example"

    def close(self):
        self.socket.close()


@pytest.fixture
def blackhole():
    hole = Blackhole()
    yield hole
    hole.close()


@pytest.mark.parametrize("stuck", [False, True], ids=["quick-migration", "migration-stuck-until-the-deadline"])
def test_an_unreachable_response_url_never_outlives_the_function(handler, blackhole, monkeypatch, caplog, stuck):
    """Whatever the migration and the response URL do, the function returns before its own timeout (here
    6 s), having tried to answer with what time was left, and says what route is missing. Before, three
    10-second attempts outlived a Lambda whose work had used its time, and the function was killed silently."""
    release = threading.Event()

    def migration(_db, _cutover_window_seconds=None):
        if stuck:
            release.wait(30)
        return []

    monkeypatch.setattr(custom_resource, "migrate", migration)
    monkeypatch.setattr(runtime, "database", lambda: None)
    event = json.loads((EVENTS / "migrate-update.json").read_text())
    event["ResponseURL"] = blackhole.url
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    context = FakeContext(remaining_ms=6_000)
    started = time.monotonic()
    try:
        result = handler(event, context)
    finally:
        release.set()
        logger.registered_handler.setStream(previous)
    # Lambda's timeout is the one clock this contract is about: the context's own count of the 6 s, which the
    # function keeps RETURN_RESERVE_SECONDS of.
    assert context.get_remaining_time_in_millis() > 0, f"took {time.monotonic() - started:.1f} s of 6"
    assert result["Status"] == ("FAILED" if stuck else "SUCCESS")
    logged = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    [unanswered] = [entry for entry in logged if entry["message"].startswith("could not answer CloudFormation")]
    assert unanswered["level"] == "ERROR"
    assert "CreateS3GatewayEndpoint" in unanswered["fix"] and "NAT" in unanswered["fix"]
    assert "X-Amz-Signature" not in log_stream.getvalue()  # the pre-signed URL is a credential

