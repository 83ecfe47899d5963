"""`jenkins-dispatch doctor` run in this process: every check passes against a healthy setup, and each one,
made to fail, says so with its fix while the others still run. Real PostgreSQL, the emulator over HTTP."""

from __future__ import annotations

import json
import time

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.operating.doctor import (
    FAIL,
    PASS,
    SKIP,
    Check,
    DoctorOptions,
    failure_line,
    healthy,
    render,
    run_checks,
)
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import WEBHOOK_SECRET
from ..pg_server import postgres_server, scratch_database
from ..serve_helpers import free_port


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


# --------------------------------------------------------------------------- pure decisions, table-driven


# --------------------------------------------------------------------------- against the real parts


def test_every_check_passes_against_a_healthy_setup(database_url, queue, jenkins):
    queue.enqueue("deploy")
    queue.enqueue("team/app/deploy")
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url))
    assert statuses(checks) == {"settings": PASS, "database": PASS, "schema": PASS, "oldest transaction": PASS,
                                "jenkins": PASS, "credentials": PASS, "queued jobs": PASS, "row controllers": PASS,
                                "webhook secret": PASS, "webhook": SKIP}, render(checks)
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
    from jenkins_dispatch.store.migrations import migrate

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
    mysql = db.dialect == "mysql"
    with Database(parse_database_url(database_url), application_name="forgotten") as other:
        other.run("BEGIN")
        other.run("SELECT count(*) AS n FROM jenkins_jobs_queue")  # InnoDB lists a transaction once it reads
        pid = other.run("SELECT CONNECTION_ID() AS pid" if mysql else "SELECT pg_backend_pid() AS pid")[0]["pid"]
        # MySQL knows a session's program name only through performance_schema, off by default on MariaDB.
        named = not mysql or bool(other.run("SELECT @@performance_schema AS named")[0]["named"])
        time.sleep(0.6)
        checks = by_name(run_checks(DoctorOptions(max_transaction_age_seconds=0.5),
                                    env_for(database_url, jenkins.base_url)))
        other.run("ROLLBACK")
    check = checks["oldest transaction"]
    assert check.status == FAIL and f"pid {pid}" in check.detail, check
    assert ("forgotten" if named else "application -") in check.detail, check
    assert (f"KILL {pid}" if mysql else f"pg_terminate_backend({pid})") in check.fix


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


def test_every_scheduled_job_is_checked_in_jenkins(database_url, db, jenkins):
    from jenkins_dispatch.operating.scheduling import add_schedule
    from jenkins_dispatch.store.schedules import Schedules

    schedules = Schedules(db)
    add_schedule(schedules, "nightly", "deploy", cron="0 3 * * *")
    add_schedule(schedules, "hourly", "team/app/deploy", cron="0 * * * *")
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url))
    assert by_name(checks)["scheduled jobs"].status == PASS, render(checks)
    assert "2 scheduled jobs" in by_name(checks)["scheduled jobs"].detail
    assert healthy(checks)

    add_schedule(schedules, "ghost", "no-such-job", cron="0 3 * * *")
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url))
    assert by_name(checks)["scheduled jobs"].status == FAIL
    ghost = by_name(checks)["scheduled job no-such-job"]
    assert ghost.status == FAIL and "no job no-such-job" in ghost.detail and "schedule rm" in ghost.fix
    assert not healthy(checks)


def test_every_controller_is_checked_and_the_failing_one_is_named(database_url, make_jenkins):
    a, b, c = make_jenkins(), make_jenkins(), make_jenkins()
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": "wrong-token"},
                   "c": {"url": c.base_url, "user": "admin", "api_token": "admin-token"}}
    checks = run_checks(DoctorOptions(), env_for(database_url, a.base_url,
                                                 JENKINS_CONTROLLERS=json.dumps(controllers)))
    found = statuses(checks)
    assert (found["jenkins"], found["credentials"]) == (PASS, PASS), render(checks)
    assert (found["jenkins b"], found["credentials b"]) == (PASS, FAIL), render(checks)
    assert (found["jenkins c"], found["credentials c"]) == (PASS, PASS), render(checks)
    assert not healthy(checks)
    assert "credentials b" in failure_line(checks)
    assert b.base_url.rstrip("/").split("//")[1] in by_name(checks)["jenkins b"].detail


def test_a_controller_that_does_not_answer_is_named(database_url, make_jenkins):
    a = make_jenkins()
    controllers = {"down": {"url": f"http://127.0.0.1:{free_port()}/", "user": "admin", "api_token": "t"}}
    checks = run_checks(DoctorOptions(), env_for(database_url, a.base_url, JENKINS_TIMEOUT_SECONDS="2",
                                                 JENKINS_CONTROLLERS=json.dumps(controllers)))
    found = statuses(checks)
    assert (found["jenkins down"], found["credentials down"]) == (FAIL, SKIP), render(checks)
    assert found["jenkins"] == PASS and "jenkins down" in failure_line(checks)


def test_a_bad_controllers_configuration_is_one_failing_row(database_url, jenkins):
    checks = run_checks(DoctorOptions(), env_for(database_url, jenkins.base_url, JENKINS_CONTROLLERS="{not json"))
    assert statuses(checks)["controllers"] == FAIL and "JENKINS_CONTROLLERS" in by_name(checks)["controllers"].detail
