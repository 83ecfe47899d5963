"""`jenkins-dispatch doctor`: every check passes against a healthy setup, and each one, made to fail, says so with its
fix while the others still run. Real PostgreSQL, the emulator over HTTP, `serve` as the webhook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.db import Database
from jenkins_dispatch.doctor import (
    FAIL,
    PASS,
    SKIP,
    Check,
    DoctorOptions,
    database_unreachable_check,
    display_url,
    healthy,
    jenkins_checks,
    job_check,
    queued_jobs_summary,
    render,
    run_checks,
    schema_check,
    transaction_check,
    webhook_check,
)
from jenkins_dispatch.jenkins import WhoAmIAnswer
from jenkins_dispatch.jenkins_answers import Identity, JobForbidden, JobInfo
from jenkins_dispatch.queue import migration_files

from ..dispatch_helpers import WEBHOOK_SECRET
from ..pg_server import postgres_server, scratch_database
from ..serve_helpers import free_port, serve_env, start_serve

KNOWN = [(version, name) for version, name, _ in migration_files()]


def env_for(database_url: str | None, jenkins_url: str | None, **overrides: str) -> dict[str, str]:
    """Only what doctor reads: nothing leaks in from the test's own environment."""
    env = {"WEBHOOK_SECRET": WEBHOOK_SECRET}
    if database_url:
        env["DATABASE_URL"] = database_url
    if jenkins_url:
        env.update(JENKINS_URL=jenkins_url, JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token",
                   JENKINS_TIMEOUT_SECONDS="5")
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def statuses(checks: list[Check]) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def run_cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("JENKINS_", "WEBHOOK_", "DATABASE_URL", "DB_"))}
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "doctor", *argv], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------- pure decisions, table-driven


@pytest.mark.parametrize("message, fix", [
    ("cannot connect to PostgreSQL at 127.0.0.1:9 (database q): Connection refused", "start PostgreSQL"),
    ('cannot connect to PostgreSQL at h:5432 (database q): password authentication failed for user "ops" '
     "(SQLSTATE 28P01)", "user or password"),
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


NO_TRANSACTION = {"pid": None, "user_name": None, "application_name": None, "state": None, "seconds": None,
                  "hidden_sessions": 0}
OLD = {"pid": 4242, "user_name": "app", "application_name": "report", "state": "idle in transaction",
       "seconds": 901.0, "hidden_sessions": 0}


@pytest.mark.parametrize("row, limit, status, words", [
    (NO_TRANSACTION, 300, PASS, "no other transaction"),
    ({**OLD, "seconds": 12.0}, 300, PASS, "12s"),
    (OLD, 300, FAIL, "open for 15m, over 5m"),
    (OLD, 1000, PASS, "15m"),
    ({**NO_TRANSACTION, "hidden_sessions": 3}, 300, PASS, "3 sessions of other users are hidden"),
])
def test_transaction_check(row, limit, status, words):
    check = transaction_check(row, limit)
    assert check.status == status and words in check.detail, check
    if status == FAIL:
        assert "pg_terminate_backend(4242)" in check.fix and "pg_stat_activity" in check.fix


ADMIN = Identity(name="admin", authenticated=True, anonymous=False)
ANONYMOUS = Identity(name="anonymous", authenticated=True, anonymous=True)


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
    (JobInfo(exists=True, buildable=True, parameterized=True, declares_dispatch_id=True,
             parameter_names=("DISPATCH_ID",)), None, None),
    (JobInfo(exists=False), "no job x/y (HTTP 404; 2 rows waiting)", "jenkins-dispatch cancel"),
    (JobInfo(exists=True, forbidden=JobForbidden("x/y", "bot", "Job/Read")), "lacks Job/Read on x/y",
     "grant user bot Job/Read and Job/Build"),
    (JobInfo(exists=True, buildable=False, declares_dispatch_id=True), "disabled, or a folder", "enable x/y"),
    (JobInfo(exists=True, buildable=True, parameterized=True, parameter_names=("ENV",)), "parameters are ENV",
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
    assert lines[-1] == "1 failed: schema"


# --------------------------------------------------------------------------- against the real parts


def test_every_check_passes_against_a_healthy_setup(database_url, queue, jenkins):
    queue.enqueue("deploy")
    queue.enqueue("team/app/deploy")
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url))
    assert statuses(checks) == {"settings": PASS, "database": PASS, "schema": PASS, "oldest transaction": PASS,
                                "jenkins": PASS, "credentials": PASS, "queued jobs": PASS, "webhook secret": PASS,
                                "webhook": SKIP}, render(checks)
    assert "2 job names waiting" in by_name(checks)["queued jobs"].detail
    assert healthy(checks)


def test_a_bad_tuning_setting_fails_its_row_and_everything_else_is_still_checked(database_url, jenkins):
    checks = by_name(run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url, LEASE_SECONDS="1")))
    assert checks["settings"].status == FAIL and "LEASE_SECONDS" in checks["settings"].detail
    assert checks["database"].status == PASS and checks["credentials"].status == PASS


def test_credentials_taken_as_anonymous(database_url, make_jenkins):
    sso = make_jenkins(bad_credentials="anonymous")  # a realm that ignores credentials it does not know
    checks = by_name(run_checks(DoctorOptions(), env_for(database_url, sso.base_url, JENKINS_API_TOKEN="wrong")))
    assert checks["jenkins"].status == PASS
    assert checks["credentials"].status == FAIL and "as anonymous" in checks["credentials"].detail


def test_database_not_configured_names_the_variable_and_jenkins_is_still_checked(jenkins):
    checks = by_name(run_checks(DoctorOptions(), env_for(None, jenkins.base_url)))
    assert checks["database"].status == FAIL and "DATABASE_URL" in checks["database"].detail
    assert checks["schema"].status == SKIP and checks["oldest transaction"].status == SKIP
    assert checks["queued jobs"].status == SKIP and "no database configured" in checks["queued jobs"].detail
    assert checks["jenkins"].status == PASS and checks["credentials"].status == PASS


def test_database_that_does_not_exist(database_url, jenkins):
    url = database_url.rsplit("/", 1)[0] + "/jd_doctor_no_such_database"
    checks = by_name(run_checks(DoctorOptions(), env_for(url, jenkins.base_url)))
    assert checks["database"].status == FAIL and "create the database" in checks["database"].fix
    assert checks["schema"].status == SKIP and "database unreachable" in checks["schema"].detail


def test_queue_table_gone_is_a_failure_not_a_skip(database_url, jenkins):
    from jenkins_dispatch.queue import migrate

    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_doctor") as url:
        with Database(parse_database_url(url)) as db:
            migrate(db)
            db.run("DROP TABLE jenkins_jobs_queue CASCADE")
        checks = run_checks(DoctorOptions(), env_for(url, jenkins.base_url))
    queued = by_name(checks)["queued jobs"]
    assert queued.status == FAIL and "jenkins-dispatch migrate" in queued.detail, queued
    assert not healthy(checks)


def test_schema_not_applied(database_url, jenkins):
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_doctor") as url:
        checks = by_name(run_checks(DoctorOptions(), env_for(url, jenkins.base_url)))
    assert checks["database"].status == PASS
    assert checks["schema"].status == FAIL and "jenkins-dispatch migrate" in checks["schema"].fix
    assert checks["oldest transaction"].status == PASS
    assert checks["queued jobs"].status == SKIP and "schema is not applied" in checks["queued jobs"].detail


def test_a_transaction_open_too_long(database_url, db, jenkins):
    with Database(parse_database_url(database_url), application_name="forgotten") as other:
        other.run("BEGIN")
        other.run("SELECT 1")
        pid = other.run("SELECT pg_backend_pid() AS pid")[0]["pid"]
        time.sleep(0.6)
        checks = by_name(run_checks(DoctorOptions(max_transaction_age_seconds=0.5),
                                    env_for(database_url, jenkins.base_url)))
        other.run("ROLLBACK")
    check = checks["oldest transaction"]
    assert check.status == FAIL and f"pid {pid}" in check.detail and "forgotten" in check.detail, check
    assert f"pg_terminate_backend({pid})" in check.fix


def test_jenkins_unreachable_or_not_configured(database_url, queue):
    queue.enqueue("deploy")
    checks = by_name(run_checks(DoctorOptions(), env_for(database_url, f"http://127.0.0.1:{free_port()}/")))
    assert checks["jenkins"].status == FAIL and "cannot connect" in checks["jenkins"].detail
    assert "start Jenkins" in checks["jenkins"].fix
    assert checks["credentials"].status == SKIP and checks["queued jobs"].status == SKIP
    assert checks["database"].status == PASS and checks["schema"].status == PASS

    checks = by_name(run_checks(DoctorOptions(), env_for(database_url, None)))
    assert checks["jenkins"].status == FAIL and "JENKINS_URL" in checks["jenkins"].detail


def test_jenkins_restarting_is_a_503(database_url, jenkins):
    jenkins.restart(window_seconds=30)
    checks = by_name(run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url)))
    assert checks["jenkins"].status == FAIL and "HTTP 503" in checks["jenkins"].detail
    assert checks["credentials"].status == SKIP


def test_queued_jobs_jenkins_cannot_dispatch(database_url, db, queue, jenkins):
    for job in ("deploy", "missing-job", "no-dispatch-id", "frozen", "nightly", "team/app/deploy"):
        queue.enqueue(job)
    db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('a//b')")  # plain SQL checks no path
    jenkins.set_user("admin", permissions={"deny_read": ["team/app/deploy"]})
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url))
    named = by_name(checks)
    assert named["queued jobs"].status == FAIL and "6 of 7 job names" in named["queued jobs"].detail
    assert "folders are separated" in named["job a//b"].detail
    assert "HTTP 404" in named["job missing-job"].detail
    assert "no DISPATCH_ID parameter" in named["job no-dispatch-id"].detail
    assert "no DISPATCH_ID parameter" in named["job nightly"].detail
    assert "disabled" in named["job frozen"].detail
    assert "lacks Job/Read on team/app/deploy" in named["job team/app/deploy"].detail
    assert "job deploy" not in named
    assert all(c.fix for c in checks if c.status == FAIL)


def test_at_most_max_jobs_names_are_checked(database_url, queue, jenkins):
    for job in ("deploy", "deploy", "Test Job", "missing-job"):
        queue.enqueue(job)
    checks = by_name(run_checks(DoctorOptions(max_jobs_checked=2), env_for(database_url, jenkins.base_url)))
    assert checks["queued jobs"].status == PASS, checks["queued jobs"]
    assert "the 2 job names with the most rows waiting, of 3" in checks["queued jobs"].detail


def test_webhook_secret_missing_or_webhook_not_answering(database_url, jenkins):
    checks = by_name(run_checks(DoctorOptions(webhook_url="http://127.0.0.1:9/jenkins/notify"),
                                env_for(database_url, jenkins.base_url, WEBHOOK_SECRET=None)))
    assert checks["webhook secret"].status == FAIL and "WEBHOOK_SECRET" in checks["webhook secret"].fix
    assert checks["webhook"].status == SKIP

    checks = by_name(run_checks(DoctorOptions(webhook_url=f"http://127.0.0.1:{free_port()}/jenkins/notify"),
                                env_for(database_url, jenkins.base_url)))
    assert checks["webhook"].status == FAIL and "connection refused" in checks["webhook"].detail
    assert "jenkins-dispatch serve" in checks["webhook"].fix


# --------------------------------------------------------------------------- the command, as operators run it


def test_doctor_command_against_serve_exits_0_and_the_probe_changes_nothing(database_url, db, queue, jenkins,
                                                                            tmp_path):
    queue.enqueue("deploy")
    queue.set_limit("deploy", 0)  # paused: serve must not dispatch it while the doctor looks
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log")
    try:
        before = db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id"), db.run("SELECT * FROM jenkins_job_events")
        env = env_for(database_url, jenkins.base_url)
        url = served.base + "/jenkins/notify"

        proc = run_cli(env, "--webhook-url", url)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.splitlines()[0].split() == ["CHECK", "RESULT", "DETAIL"]
        assert proc.stdout.strip().endswith("all 9 checks pass") and proc.stderr == ""

        proc = run_cli({**env, "WEBHOOK_SECRET": "not-the-webhooks-secret"}, "--webhook-url", url, "--json")
        assert proc.returncode == 1
        report = json.loads(proc.stdout)
        webhook = {c["name"]: c for c in report["checks"]}["webhook"]
        assert report["ok"] is False and [c["name"] for c in report["checks"] if c["status"] == FAIL] == ["webhook"]
        assert "HTTP 401" in webhook["detail"] and "WEBHOOK_SECRET" in webhook["fix"]
        assert proc.stderr == "jenkins-dispatch: error: 1 of 9 checks failed: webhook\n"

        checks = by_name(run_checks(DoctorOptions(webhook_url=served.base + "/wrong/path"), env))
        assert checks["webhook"].status == FAIL and "/jenkins/notify" in checks["webhook"].fix

        after = db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id"), db.run("SELECT * FROM jenkins_job_events")
        assert after == before
    finally:
        served.stop()


def test_doctor_command_never_prints_a_secret(jenkins):
    planted = {"DATABASE_URL": "postgresql://ops:db-pass-PLANTED@127.0.0.1:9/queue",
               "JENKINS_API_TOKEN": "api-token-PLANTED", "WEBHOOK_SECRET": "webhook-secret-PLANTED"}
    env = env_for(None, jenkins.base_url, **planted)
    proc = run_cli(env, "--webhook-url", f"http://127.0.0.1:{free_port()}/jenkins/notify?token=webhook-secret-PLANTED")
    assert proc.returncode == 1
    assert "PLANTED" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    rows = {line.split()[0] for line in proc.stdout.splitlines()[1:] if line and not line.startswith(" ")}
    assert {"database", "jenkins", "credentials", "webhook"} <= rows
    assert "127.0.0.1:9" in proc.stdout and "HTTP 401" in proc.stdout  # unreachable database; wrong Jenkins token


def test_bad_webhook_url_is_bad_input():
    proc = run_cli({}, "--webhook-url", "localhost:8080/jenkins/notify")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "http://" in proc.stderr
