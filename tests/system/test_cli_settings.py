"""Settings as the CLI's user meets them (a subprocess): a bad numeric value or a malformed JENKINS_URL is one line
naming the variable, exit 2, nothing changed; `migrate` needs only the database settings.

Issue 21 #7, on the code before it: RETRY_BASE_SECONDS=inf was accepted, `migrate` exited 2 with
"JENKINS_URL is not set" when JENKINS_USER and a token were set, and JENKINS_URL='http://[::1' printed a
traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..pg_server import postgres_server, scratch_database


def _cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=60)


def _one_line_naming(proc: subprocess.CompletedProcess, name: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and name in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("name", "value", "argv"), [
    ("RETRY_BASE_SECONDS", "inf", ("enqueue", "deploy")),
    ("RETRY_MAX_SECONDS", "1e400", ("dispatch",)),
    ("RETRY_BASE_SECONDS", "60", ("enqueue", "deploy")),  # above RETRY_MAX_SECONDS=30 below
    ("LEASE_SECONDS", "nan", ("enqueue", "deploy")),
    ("JENKINS_RETRY_MAX_SECONDS", "0.5", ("dispatch",)),  # below JENKINS_RETRY_BASE_SECONDS' default, 1
    ("BATCH_SIZE", "100000000", ("dispatch",)),
    ("RESEND_QUIET_SECONDS", "-inf", ("enqueue", "deploy")),
])
def test_a_bad_numeric_setting_is_one_line_and_changes_nothing(queue, database_url, jenkins, name, value, argv):
    queue.enqueue("deploy")
    env = {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
           "RETRY_MAX_SECONDS": "30", name: value}
    _one_line_naming(_cli(*argv, **env), name)
    rows = queue.list_jobs()
    assert [(r["status"], r["attempts"]) for r in rows] == [("pending", 0)]
    assert jenkins.counters()["items_created"] == 0


def test_a_malformed_jenkins_url_is_one_line(queue, database_url):
    queue.enqueue("deploy")
    proc = _cli("dispatch", JENKINS_URL="http://[::1", JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token")
    _one_line_naming(proc, "JENKINS_URL")
    assert [r["attempts"] for r in queue.list_jobs()] == [0]


def test_migrate_needs_only_the_database():
    """Incomplete Jenkins settings (a user and a token, no URL) and a bad dispatcher setting do not stop
    `migrate`, which never talks to Jenkins nor dispatches."""
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_migonly") as url:
        proc = _cli("migrate", DATABASE_URL=url, JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token",
                    JENKINS_URL="", BATCH_SIZE="lots")
        assert proc.returncode == 0, proc.stderr
        assert "applied" in proc.stdout
        again = _cli("migrate", DATABASE_URL=url, JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token")
        assert again.returncode == 0 and "up to date" in again.stdout, again.stderr
        # Its own settings still count: a bad database timeout is refused the same way.
        bad = _cli("migrate", DATABASE_URL=url, DB_STATEMENT_TIMEOUT_MS="inf")
        _one_line_naming(bad, "DB_STATEMENT_TIMEOUT_MS")
