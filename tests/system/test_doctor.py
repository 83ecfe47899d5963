"""`jenkins-dispatch doctor` as a user runs it: a subprocess probing `serve` as the webhook, exit codes,
never a secret printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from jenkins_dispatch.operating.doctor import (
    FAIL,
    DoctorOptions,
    run_checks,
)

from ..integration.test_doctor import by_name, env_for
from ..serve_helpers import free_port, serve_env, start_serve


def run_cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("JENKINS_", "WEBHOOK_", "DATABASE_URL", "DB_"))}
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "doctor", *argv], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


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
        # Nine checks, or ten when a cutover window is open on this database (another test's migrate).
        assert re.search(r"all (10|11) checks pass$", proc.stdout.strip()) and proc.stderr == "", proc.stdout

        proc = run_cli({**env, "WEBHOOK_SECRET": "not-the-webhooks-secret"}, "--webhook-url", url, "--json")
        assert proc.returncode == 1
        report = json.loads(proc.stdout)
        webhook = {c["name"]: c for c in report["checks"]}["webhook"]
        assert report["ok"] is False and [c["name"] for c in report["checks"] if c["status"] == FAIL] == ["webhook"]
        assert "HTTP 401" in webhook["detail"] and "WEBHOOK_SECRET" in webhook["fix"]
        assert re.fullmatch(r"jenkins-dispatch: error: 1 of (10|11) checks failed: webhook\n", proc.stderr), proc.stderr

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
