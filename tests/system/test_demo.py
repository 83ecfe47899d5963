"""`make demo`'s entry point, end to end, with a smaller mix: embedded PostgreSQL, emulator, serve."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_on_an_embedded_database_and_exits_0_only_when_correct():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JENKINS_URL")}
    proc = subprocess.run([sys.executable, "-m", "demo", "--jobs", "20", "--timeout", "60"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    assert "embedded PostgreSQL" in out and "Jenkins EMULATOR" in out
    assert "every job built exactly once: yes" in out
    assert "RESULT: correct" in out
    assert "demo/does-not-exist" in out and "removed" in out


def test_demo_with_database_url_never_touches_the_rows_already_there(database_url, db, queue):
    """Issue 12 #1: with DATABASE_URL exported, the demo dispatched a real pending job and left 102 rows and a
    cap behind. It now works in a database of its own on that server, and drops it."""
    queue.enqueue("real/prod-release", {"VERSION": "1.2.3"})
    queue.set_limit("team/app/deploy", 7)
    tables = ("jenkins_jobs_queue", "jenkins_job_events", "jenkins_job_limits")
    before = {t: db.run(f"SELECT * FROM {t} ORDER BY 1") for t in tables}
    env = {k: v for k, v in os.environ.items() if k not in ("JENKINS_URL",)}
    env["DATABASE_URL"] = database_url
    proc = subprocess.run([sys.executable, "-m", "demo", "--jobs", "20", "--timeout", "60"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "a database of its own" in proc.stdout and "dropped" in proc.stdout
    assert {t: db.run(f"SELECT * FROM {t} ORDER BY 1") for t in tables} == before  # byte for byte
    left = db.run("SELECT count(*) AS n FROM pg_database WHERE datname LIKE 'jenkins_dispatch_demo_%'")[0]["n"]
    assert left == 0
