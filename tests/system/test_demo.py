"""`make demo`'s entry point, end to end, with a smaller mix: embedded PostgreSQL, emulator, serve."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
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


def test_demo_with_database_url_never_touches_the_rows_already_there(database_url, db, queue, tmp_path):
    """Issue 12 #1: with DATABASE_URL exported, the demo dispatched a real pending job and left 102 rows and a
    cap behind. It now works in a database of its own on that server, and drops it."""
    queue.enqueue("real/prod-release", {"VERSION": "1.2.3"})
    queue.set_limit("team/app/deploy", 7)
    tables = ("jenkins_jobs_queue", "jenkins_job_events", "jenkins_job_limits")
    before = {t: db.run(f"SELECT * FROM {t} ORDER BY 1") for t in tables}
    env = {k: v for k, v in os.environ.items() if k not in ("JENKINS_URL",)}
    env["DATABASE_URL"] = database_url
    proc = subprocess.run([sys.executable, "-m", "demo", "--jobs", "20", "--timeout", "60", "--dir", str(tmp_path)],
                          cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "a database of its own" in proc.stdout and "dropped" in proc.stdout
    assert {t: db.run(f"SELECT * FROM {t} ORDER BY 1") for t in tables} == before  # byte for byte
    left = db.run("SELECT count(*) AS n FROM pg_database WHERE datname LIKE 'jenkins_dispatch_demo_%'")[0]["n"]
    assert left == 0


def _demo(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "demo", "--jobs", "20", "--timeout", "60", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=150)


def _ui_pages(command: str, env: dict) -> dict[str, str]:
    """Run the `ui` command the demo printed (its DATABASE_URL=… prefix as the environment) on a free port;
    the overview and the job list it serves."""
    words = shlex.split(command)
    assert words[0].startswith("DATABASE_URL=") and words[-1] == "ui", command
    ui_env = dict(env, DATABASE_URL=words[0].split("=", 1)[1])
    proc = subprocess.Popen([*words[1:], "--port", "0"], env=ui_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        url = json.loads(proc.stdout.readline())["url"]
        pages = {}
        for path in ("", "jobs?limit=200"):
            with urllib.request.urlopen(url + path, timeout=10) as answer:
                pages[path] = answer.read().decode()
        return pages
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_demo_keep_leaves_its_embedded_database_for_ui_then_stop_removes_it():
    """Issue 25 item 6: --keep leaves the database running and prints the exact `ui` command that opens it;
    the summary is short (no per-job table unless --table) and quotes errors in full; the logs are in the
    run's own folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JENKINS_URL")}
    proc = _demo(env, "--keep")  # its own folder (as root, one the embedded server's own user may enter)
    out = proc.stdout
    run_dir = Path(re.search(r"^run folder: (\S+)", out, re.M).group(1))
    try:
        assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
        assert "RESULT: correct" in out
        # the summary: counts, the cap, the verdict, the errors in full; no table of every job
        assert re.search(r"^jobs: 22  completed \d+  failed \d+", out, re.M)
        assert "cap team/app/deploy ≤ 2: peak in flight" in out and "(held)" in out
        assert "every job built exactly once: yes" in out
        assert "error ×1: Jenkins has no job 'demo/does-not-exist' (404): check the job path" in out
        assert not re.search(r"^ID +JOB +PRIO", out, re.M)
        assert (run_dir / "serve.log").stat().st_size > 0 and (run_dir / "emulator.json").exists()
        command = next(line.strip() for line in out.splitlines() if line.strip().startswith("DATABASE_URL="))
        pages = _ui_pages(command, env)
        assert "team/app/deploy" in pages[""]
        assert "demo/does-not-exist" in pages["jobs?limit=200"]
    finally:
        stopped = subprocess.run([sys.executable, "-m", "demo", "--stop", str(run_dir)], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not (run_dir / "postgres").exists()
    shutil.rmtree(run_dir)


def test_demo_table_on_request_and_a_folder_per_run():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JENKINS_URL")}
    proc = _demo(env, "--table")
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^ID +JOB +PRIO +STATUS", out, re.M)
    row = next(line for line in out.splitlines() if "demo/does-not-exist" in line and "failed" in line)
    assert row.endswith("Jenkins has no job 'demo/does-not-exist' (404): check the job path")  # not cut
    folder = re.search(r"^run folder: (\S+)", out, re.M).group(1)
    assert Path(folder, "serve.log").exists() and not Path(folder, "postgres").exists()
    assert folder != tempfile.gettempdir()
    shutil.rmtree(folder)
