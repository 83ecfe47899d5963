"""doctor's checks as pure functions: each answer (database, schema, transactions, Jenkins, jobs, webhook)
judged PASS, FAIL or SKIP with its fix; the report and the verdict. No I/O."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.jenkins.answers import Identity, JobForbidden, JobInfo
from jenkins_dispatch.jenkins.client import WhoAmIAnswer
from jenkins_dispatch.operating.doctor import (
    FAIL,
    PASS,
    SKIP,
    Check,
    cutover_check,
    database_unreachable_check,
    display_url,
    failure_line,
    healthy,
    jenkins_checks,
    job_check,
    queued_jobs_summary,
    render,
    schema_check,
    transaction_check,
    webhook_check,
)
from jenkins_dispatch.store.dialects.mysql import server as mysql_server
from jenkins_dispatch.store.dialects.postgresql import server as postgresql_server
from jenkins_dispatch.store.migrations import migration_files

POSTGRESQL_TOOLS = postgresql_server.TRANSACTION_HELP
MYSQL_TOOLS = mysql_server.TRANSACTION_HELP

KNOWN = [(version, name) for version, name, _ in migration_files("postgresql")]


NO_TRANSACTION = {"pid": None, "user_name": None, "application_name": None, "state": None, "seconds": None,
                  "hidden_sessions": 0}


OLD = {"pid": 4242, "user_name": "app", "application_name": "report", "state": "idle in transaction",
       "seconds": 901.0, "hidden_sessions": 0}


ADMIN = Identity(name="admin", authenticated=True, anonymous=False)


ANONYMOUS = Identity(name="anonymous", authenticated=True, anonymous=True)


@pytest.mark.parametrize("message, fix", [
    ("cannot connect to PostgreSQL at 127.0.0.1:9 (database q): Connection refused", "start the database server"),
    ('cannot connect to PostgreSQL at h:5432 (database q): password authentication failed for user "ops" '
     "(SQLSTATE 28P01)", "user or password"),
    ("cannot connect to MySQL at h:3306 (database q): Access denied for user 'ops'@'10.0.0.7' (using password: YES) "
     "(error 1045)", "user or password"),
    ("cannot connect to MySQL at h:3306 (database q): Unknown database 'q' (error 1049)", "create the database"),
    ('cannot connect to PostgreSQL at h:5432 (database q): database "q" does not exist (SQLSTATE 3D000)',
     "create the database"),
    ("cannot connect to PostgreSQL at h:5432 (database q): the server's TLS certificate could not be verified",
     "DB_CA_BUNDLE"),
    ("DB_CA_BUNDLE: cannot load CA bundle /ca.pem: [Errno 2] No such file", "readable PEM"),
    ('cannot connect to PostgreSQL at h:5432 (database q): no pg_hba.conf entry for host "10.0.0.5", user "ops", '
     'database "q", SSL off (SQLSTATE 28000)', "pg_hba.conf"),
])
def test_database_unreachable_check(message, fix):
    check = database_unreachable_check(message)
    assert check.status == FAIL and check.detail == message and fix in check.fix


@pytest.mark.parametrize("applied, status, words", [
    (None, FAIL, "not applied"),
    ({}, FAIL, "not applied"),
    (dict(KNOWN[:-1]), FAIL, f"{KNOWN[-1][0]:04d}_{KNOWN[-1][1]}"),
    (dict(KNOWN), PASS, f"all {len(KNOWN)} migrations applied"),
    ({**dict(KNOWN), 9999: "future"}, FAIL, "9999_future"),
])
def test_schema_check(applied, status, words):
    check = schema_check(applied, KNOWN)
    assert check.status == status and words in check.detail, check
    if status == FAIL and applied is not None and 9999 not in applied:
        assert "jenkins-dispatch migrate" in check.fix
    if status == FAIL and applied is None:
        assert "jenkins-dispatch migrate" in check.fix


@pytest.mark.parametrize("row, limit, status, words", [
    (NO_TRANSACTION, 300, PASS, "no other transaction"),
    ({**OLD, "seconds": 12.0}, 300, PASS, "12s"),
    (OLD, 300, FAIL, "open for 15m, over 5m"),
    (OLD, 1000, PASS, "15m"),
    ({**NO_TRANSACTION, "hidden_sessions": 3}, 300, PASS, "3 sessions of other users are hidden"),
])
def test_transaction_check(row, limit, status, words):
    check = transaction_check(row, limit, POSTGRESQL_TOOLS)
    assert check.status == status and words in check.detail, check
    if status == FAIL:
        assert "pg_terminate_backend(4242)" in check.fix and "pg_stat_activity" in check.fix


def test_transaction_check_on_mysql_names_its_tools():
    check = transaction_check(OLD, 300, MYSQL_TOOLS)
    assert check.status == FAIL and "purge" in check.detail and "KILL 4242" in check.fix, check
    hidden = transaction_check({**NO_TRANSACTION, "hidden_sessions": 2}, 300, MYSQL_TOOLS)
    assert "grant PROCESS" in hidden.detail


@pytest.mark.parametrize("answer, reach, credentials, words", [
    (WhoAmIAnswer(200, "2.452", ADMIN), PASS, PASS, "Jenkins 2.452 answers"),
    (WhoAmIAnswer(200, "2.452", ANONYMOUS), PASS, FAIL, "as anonymous, not as user admin"),
    (WhoAmIAnswer(401, "2.452", None), PASS, FAIL, "HTTP 401"),
    (WhoAmIAnswer(403, None, None), PASS, FAIL, "HTTP 403"),
    (WhoAmIAnswer(503, "2.452", None, excerpt="Jenkins is getting ready to work"), FAIL, SKIP, "HTTP 503"),
    (WhoAmIAnswer(404, None, None), FAIL, SKIP, "not Jenkins's root URL"),
    (WhoAmIAnswer(302, None, None, location="https://ci.example.com/"), FAIL, SKIP, "https://ci.example.com/"),
    (WhoAmIAnswer(200, None, None, excerpt="Sign in"), FAIL, SKIP, "Sign in"),
])
def test_jenkins_checks(answer, reach, credentials, words):
    reach_check, credentials_check = jenkins_checks(answer, "admin", "http://ci:8080/")
    assert (reach_check.status, credentials_check.status) == (reach, credentials)
    assert words in reach_check.detail + credentials_check.detail
    for check in (reach_check, credentials_check):
        assert (check.fix is not None) == (check.status == FAIL)


@pytest.mark.parametrize("info, words, fix", [
    (JobInfo(exists=True, buildable=True, declares_dispatch_id=True,
             parameter_names=("DISPATCH_ID",)), None, None),
    (JobInfo(exists=False), "no job x/y (HTTP 404; 2 rows waiting)", "jenkins-dispatch cancel"),
    (JobInfo(exists=True, forbidden=JobForbidden("x/y", "bot", "Job/Read")), "lacks Job/Read on x/y",
     "grant user bot Job/Read and Job/Build"),
    (JobInfo(exists=True, buildable=False, declares_dispatch_id=True), "disabled, or a folder", "enable x/y"),
    (JobInfo(exists=True, buildable=True, parameter_names=("ENV",)), "parameters are ENV",
     "String parameter named DISPATCH_ID"),
    (JobInfo(exists=True, buildable=True), "has no parameters", "String parameter named DISPATCH_ID"),
])
def test_job_check(info, words, fix):
    check = job_check("x/y", 2, info, "bot")
    if words is None:
        assert check is None
    else:
        assert check.status == FAIL and check.name == "job x/y" and words in check.detail and fix in check.fix, check


def test_job_check_of_a_name_no_jenkins_item_can_have():
    check = job_check("a//b", 1, None, "bot")
    assert check.status == FAIL and "folders are separated by single '/'" in check.detail
    assert "jenkins-dispatch cancel" in check.fix


@pytest.mark.parametrize("checked, total, failures, status, words", [
    (0, 0, 0, PASS, "no job is waiting"),
    (3, 3, 0, PASS, "3 job names waiting: each exists"),
    (50, 73, 0, PASS, "the 50 job names with the most rows waiting, of 73"),
    (3, 3, 2, FAIL, "2 of 3 job names waiting cannot be dispatched"),
])
def test_queued_jobs_summary(checked, total, failures, status, words):
    check = queued_jobs_summary(checked, total, failures)
    assert check.status == status and words in check.detail


@pytest.mark.parametrize("status, body, error, result, words", [
    (404, {"outcome": "unknown", "message": "no job was ever dispatched"}, None, PASS, "took the secret"),
    (401, {"outcome": "unauthorised"}, None, FAIL, "refused WEBHOOK_SECRET"),
    (404, {"outcome": "no_route", "message": "no such endpoint"}, None, FAIL, "nothing at"),
    (404, None, None, FAIL, "nothing at"),
    (503, {"outcome": "unavailable", "message": "the webhook is misconfigured"}, None, FAIL, "misconfigured"),
    (200, {"outcome": "ignored"}, None, FAIL, "HTTP 200"),
    (None, None, "connection refused", FAIL, "connection refused"),
])
def test_webhook_check(status, body, error, result, words):
    check = webhook_check(status, body, error, "http://h:1/jenkins/notify")
    assert check.status == result and words in check.detail, check
    assert (check.fix is not None) == (result == FAIL)


@pytest.mark.parametrize("status, body, result, words, fix", [
    (404, {"outcome": "unknown"}, PASS, "took controller b's webhook_secret", None),
    (401, {"outcome": "unauthorised", "message": "wrong token for this build: controller 'b' has a webhook secret"},
     FAIL, "refused controller b's webhook_secret for a build of b (HTTP 401: wrong token", "webhook_secret for b"),
    (503, {"outcome": "unavailable"}, FAIL, "HTTP 503", "log"),
])
def test_webhook_check_of_a_controllers_own_secret(status, body, result, words, fix):
    check = webhook_check(status, body, None, "http://h:1/jenkins/notify", "b")
    assert check.name == "webhook b" and check.status == result and words in check.detail, check
    assert (fix is None and check.fix is None) or fix in check.fix


def test_display_url_hides_user_info_and_query():
    assert display_url("https://jenkins:s3cret@hook.example.com:8443/jenkins/notify?token=s3cret") == \
        "https://hook.example.com:8443/jenkins/notify"


def test_healthy_only_when_nothing_fails_and_render_gives_each_failure_its_fix():
    checks = [Check("database", PASS, "ok"), Check("webhook", SKIP, "skipped: no --webhook-url given")]
    assert healthy(checks)
    assert render(checks).splitlines()[-1] == "all 1 checks pass (1 skipped)"
    checks.append(Check("schema", FAIL, "not applied", "run migrate"))
    assert not healthy(checks)
    lines = render(checks).splitlines()
    assert lines[0].split() == ["CHECK", "RESULT", "DETAIL"]
    schema_row = next(i for i, line in enumerate(lines) if line.startswith("schema"))
    assert "FAIL" in lines[schema_row] and lines[schema_row + 1].strip() == "fix: run migrate"
    assert not any("failed" in line for line in lines)  # said once, on stderr: failure_line
    assert failure_line(checks) == "1 of 3 checks failed: schema"


ENDS = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("window, words", [
    (None, None),  # never upgraded while the old worker held jobs
    ({"window_ends_at": ENDS, "window_seconds": 3600.0, "seconds_left": 1800.0, "held": 2},
     ["window open until 2026-12-01 12:00:00 UTC", "30m left", "CUTOVER_WINDOW_SECONDS=3600", "2 jobs held",
      "stop that worker"]),
    ({"window_ends_at": ENDS, "window_seconds": 60.0, "seconds_left": 12.0, "held": 0},
     ["window open until", "0 jobs held"]),  # open: said even once the held jobs are done
    ({"window_ends_at": ENDS, "window_seconds": 60.0, "seconds_left": -5.0, "held": 1},
     ["window closed at 2026-12-01 12:00:00 UTC", "1 job the worker", "reconciler"]),
    ({"window_ends_at": ENDS, "window_seconds": 60.0, "seconds_left": -5.0, "held": 0}, None),  # over
])
def test_cutover_check(window, words):
    check = cutover_check(window)
    if words is None:
        assert check is None
        return
    assert check.name == "cutover" and check.status == PASS, check
    for word in words:
        assert word in check.detail, (word, check.detail)
