"""What a flaky Jenkins costs `serve`: the drain time of 300 jobs when 5 % of the triggers are answered HTTP 500,
against the same run without errors (issue 21: the target is at most 1.5x).

Each case is its own `serve` (a subprocess, `python -m jenkins_dispatch.cli serve`, so its breaker starts closed)
on an emptied table of a scratch PostgreSQL database, against the Jenkins emulator in its own process: every
trigger waits LATENCY_SECONDS (so 8 trigger threads send 20 a second, as a busy Jenkins might answer), the seeded
fault answers 500 to 5 % of them without acting, and every build's callbacks reach serve's webhook. The drain is
timed from the one INSERT of the 300 rows to the moment the last of them is final; each row must end completed,
built exactly once (counted by the emulator per DISPATCH_ID).

Every setting is the shipped default but the few that shape the load (threads, batch, lease, timeout). A 500 costs
the row it hit a backoff of its own, on Jenkins's scale (JENKINS_RETRY_BASE_SECONDS, 1 s, 50–100 % of it, doubling
per attempt); nothing else waits for it.

    python -m benchmarks bench_flaky
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jenkins_dispatch.config import ENVIRONMENT, parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from tests.dispatch_helpers import wait_for
from tests.pg_server import postgres_server, scratch_database
from tests.serve_helpers import free_port, http_get, http_post

JOBS = 300
JOB_NAMES = [f"flaky/job-{n}" for n in range(4)]
LATENCY_SECONDS = 0.4
ERROR_SHARE = 0.05
SEED = 21
THREADS = 8
TARGET_RATIO = 1.5
SECRET = "bench-flaky-secret"
CASES = [("no errors", 0.0), ("5 % answered 500", ERROR_SHARE)]  # (case, share of triggers answered 500)


def _get(url: str) -> dict:
    answer = http_get(url, timeout=10)
    if answer is None:
        raise RuntimeError(f"nothing answers at {url}")
    return answer[1]


def _post(url: str, doc) -> None:
    status, answer = http_post(url, doc, timeout=10)
    if status != 200:
        raise RuntimeError(f"{url} answered {status}: {answer}")


class _Process:
    """A child process whose output goes to a file; stopped with SIGTERM, killed if it lingers."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _emulator(workdir: Path) -> tuple[_Process, str]:
    config = {"executors": 10_000, "quiet_period_seconds": 0, "users": {"admin": {"api_token": "admin-token"}},
              "jobs": [{"path": name, "concurrent": True, "duration_seconds": 0.05,
                        "parameters": [{"name": "DISPATCH_ID"}, {"name": "N"}]} for name in JOB_NAMES]}
    (workdir / "emulator.json").write_text(json.dumps(config))
    emulator = _Process([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config",
                         str(workdir / "emulator.json")], workdir / "emulator.log")
    if not wait_for(lambda: emulator.log_path.read_text().startswith("http"), timeout=20):
        raise RuntimeError(f"the emulator did not start:\n{emulator.log_path.read_text()[-2000:]}")
    return emulator, emulator.log_path.read_text().splitlines()[0].strip()


def _serve(workdir: Path, name: str, database_url: str, jenkins_url: str) -> tuple[_Process, str]:
    env = {k: v for k, v in os.environ.items() if k not in {v.name for v in ENVIRONMENT}}
    env.update(DATABASE_URL=database_url, JENKINS_URL=jenkins_url, JENKINS_USER="admin",
               JENKINS_API_TOKEN="admin-token", WEBHOOK_SECRET=SECRET, MAX_PARALLEL_TRIGGERS=str(THREADS),
               BATCH_SIZE="32", LEASE_SECONDS="60", JENKINS_TIMEOUT_SECONDS="5")
    port = free_port()
    served = _Process([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--port", str(port)],
                      workdir / f"serve-{name}.log", env)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        answer = http_get(base + "/healthz", timeout=2)
        return served.proc.poll() is not None or (answer is not None and answer[1].get("passes", 0) >= 1)

    if not wait_for(ready, timeout=30) or served.proc.poll() is not None:
        served.stop()
        raise RuntimeError(f"serve did not start:\n{served.log_path.read_text()[-3000:]}")
    return served, base


def _drain(db: Database, timeout: float) -> float:
    """Insert JOBS rows in one statement; seconds until every one is final."""
    db.run("TRUNCATE jenkins_job_events, jenkins_jobs_queue, jenkins_dispatchers RESTART IDENTITY")
    started = time.monotonic()
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) SELECT (CAST(:names AS text[]))[1 + g % 4], "
           "jsonb_build_object('N', g) FROM generate_series(1, :n) g", names=JOB_NAMES, n=JOBS)

    def final() -> bool:
        return db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status IN ('completed', 'failed', "
                      "'cancelled')")[0]["n"] == JOBS

    if not wait_for(final, timeout=timeout):
        raise RuntimeError(f"{JOBS} jobs were not final after {timeout:.0f} s")
    return time.monotonic() - started


def _check_exactly_once(db: Database, jenkins_url: str) -> None:
    counters = _get(jenkins_url + "_emulator/counters")
    rows = db.run("SELECT status, dispatch_id FROM jenkins_jobs_queue")
    wrong = [r for r in rows if r["status"] != "completed"
             or counters["triggers_by_dispatch_id"].get(r["dispatch_id"]) != 1]
    if wrong or counters["items_created"] != JOBS:
        raise RuntimeError(f"not built exactly once: {counters['items_created']} items, {wrong[:5]}")


def run() -> list[dict]:
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="jd-bench-flaky-"))
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_bench_flaky") as url, \
            Database(parse_database_url(url)) as db:
        migrate(db)
        emulator, jenkins_url = _emulator(workdir)
        try:
            clean = None
            for name, share in CASES:
                _post(jenkins_url + "_emulator/faults/clear", {})
                _post(jenkins_url + "_emulator/counters/reset", {})
                if share:  # the emulator applies the first fault that matches: the 500s, then the latency
                    _post(jenkins_url + "_emulator/faults", {"path": "buildWithParameters$", "status": 500,
                                                             "latency_seconds": LATENCY_SECONDS,
                                                             "probability": share, "seed": SEED})
                _post(jenkins_url + "_emulator/faults", {"path": "buildWithParameters$",
                                                         "latency_seconds": LATENCY_SECONDS})
                served, base = _serve(workdir, str(len(rows)), url, jenkins_url)
                try:
                    _post(jenkins_url + "_emulator/config", {"notification": {"url": f"{base}/jenkins/notify?token={SECRET}"}})
                    seconds = _drain(db, timeout=600)
                    _check_exactly_once(db, jenkins_url)
                finally:
                    served.stop()
                faults = _get(jenkins_url + "_emulator/state")["faults"]
                errors = sum(f["hits"] for f in faults if f.get("status") == 500)
                clean = clean or seconds
                ratio = seconds / clean
                rows.append({"case": name, "jobs": JOBS, "triggers_answered_500": errors,
                             "drain_s": round(seconds, 1),
                             "vs_no_errors": f"{ratio:.2f}x",
                             "target": "-" if not share else ("met" if ratio <= TARGET_RATIO else "missed")})
        finally:
            emulator.stop()
    return rows


if __name__ == "__main__":
    from benchmarks.report import print_table

    print_table(f"drain of {JOBS} jobs, {THREADS} trigger threads, {LATENCY_SECONDS} s per trigger", run())
