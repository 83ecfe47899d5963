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
from collections import Counter
from pathlib import Path

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database

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
    # Its own database only: another test's demo (--keep) may hold one of the same prefix on the server meanwhile.
    [own] = re.findall(r"database: (jenkins_dispatch_demo_\d+) dropped", proc.stdout)
    assert db.run("SELECT count(*) AS n FROM pg_database WHERE datname = :name", name=own)[0]["n"] == 0


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
        assert "error ×1: Jenkins has no job 'demo/does-not-exist' (404): check the job path  (on purpose" in out
        # Issue 36: one line for the builds that failed alike (it was one per build number), said to be deliberate.
        failed_builds = re.findall(r"^error ×(\d+): Jenkins build #N finished FAILURE  \(on purpose", out, re.M)
        assert len(failed_builds) == 1 and int(failed_builds[0]) > 1, out
        assert not re.search(r"^error ×\d+: Jenkins build #\d", out, re.M)
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


def _builds_per_marker(state: dict) -> Counter:
    """DEMO_MARKER → builds of it, from an emulator's /_emulator/state (its own record of what it built)."""
    builds: Counter = Counter()
    for job in state["jobs"].values():
        for build in job["builds"]:
            parameters = next(a["parameters"] for a in build["actions"] if a.get("_class") == "hudson.model.ParametersAction")
            builds.update(p["value"] for p in parameters if p["name"] == "DEMO_MARKER")
    return builds


def test_demo_two_controllers_one_down_mid_run_each_row_built_once_on_its_own(database_url, db, queue, tmp_path):
    """Issue 23 item 7: --two-controllers runs two emulated controllers, enqueues for both, takes eu down (503)
    mid-run while more jobs arrive for both, and checks each controller on its own. Checked here from the
    demo's kept database and the emulators' own records, not only from what it prints; and beside rows already
    in the database it was given, which it never touches."""
    queue.enqueue("real/prod-release", {"VERSION": "1.2.3"})
    before = db.run("SELECT * FROM jenkins_jobs_queue ORDER BY 1")
    env = {k: v for k, v in os.environ.items() if k not in ("JENKINS_URL",)}
    env["DATABASE_URL"] = database_url
    proc = _demo(env, "--two-controllers", "--keep", "--dir", str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "RESULT: correct" in out and "every job built exactly once: yes" in out
    assert re.search(r"^controller default: .* each built once on default, none on eu: yes$", out, re.M), out
    assert re.search(r"^controller eu: .* each built once on eu, none on default: yes$", out, re.M), out
    assert re.search(r"^outage: eu answered 503 for [4-9]\.\d s .* meanwhile default got [1-9]\d* new builds and finished \d+ jobs; eu got none", out,
                     re.M), out
    assert db.run("SELECT * FROM jenkins_jobs_queue ORDER BY 1") == before

    command = next(line.strip() for line in out.splitlines() if line.strip().startswith("DATABASE_URL="))
    kept_url = shlex.split(command)[0].split("=", 1)[1]
    with Database(parse_database_url(kept_url)) as kept:
        rows = kept.run("SELECT id, job_name, controller, parameters, status FROM jenkins_jobs_queue")
    try:
        records = json.loads((tmp_path / "controllers.json").read_text())
        built = {name: _builds_per_marker(record["state"]) for name, record in records.items()}
        assert set(built) == {"default", "eu"}
        on = Counter(row["controller"] for row in rows)
        assert on["default"] >= 5 and on["eu"] >= 5, on
        for row in rows:
            parameters = row["parameters"] if isinstance(row["parameters"], dict) else json.loads(row["parameters"])
            marker, own = parameters["DEMO_MARKER"], row["controller"]
            other = "eu" if own == "default" else "default"
            if row["job_name"] == "demo/does-not-exist":
                assert row["status"] == "failed" and built[own][marker] == 0
                continue
            assert row["status"] in ("completed", "failed"), row
            assert (built[own][marker], built[other][marker]) == (1, 0), row  # once, on its own controller
        # eu was down (the restart window's 503s are its own count), default never; and default built meanwhile
        assert records["eu"]["state"]["counters"]["unavailable_answers"] > 0
        assert records["default"]["state"]["counters"]["unavailable_answers"] == 0
        during = records["eu"]["outage"]["items_created_during"]  # the emulators' counters, read while eu was down
        assert during["default"] > 0 and during["eu"] == 0, during
    finally:
        settings = parse_database_url(database_url)
        with Database(settings) as admin:
            name = kept_url.split("?")[0].rsplit("/", 1)[-1]
            admin.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n", n=name)
            admin.run(f'DROP DATABASE IF EXISTS "{name}"')
