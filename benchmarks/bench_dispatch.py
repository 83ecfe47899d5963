"""Dispatch throughput of one pass against the Jenkins emulator (its own process) with 50 ms per trigger.

Ideal jobs/s = threads / 0.05 s. Also counts database statements per triggered job.
Run with `make bench` or `python -m benchmarks.bench_dispatch`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

from jenkins_dispatch.config import load_settings, parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.observability import logger, metrics
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from tests.pg_server import postgres_server, scratch_database

LATENCY_SECONDS = 0.05
CASES = [(1, 10, 100), (8, 32, 640), (32, 128, 1280)]  # threads, batch size, jobs


def _emulator() -> tuple[subprocess.Popen, str]:
    config = {"executors": 500, "quiet_period_seconds": 0, "users": {"admin": {"api_token": "admin-token"}},
              "jobs": [{"path": "bench", "concurrent": True, "duration_seconds": 30,
                        "parameters": [{"name": "DISPATCH_ID"}, {"name": "N"}]}]}
    path = "/tmp/jd-bench-emulator.json"
    with open(path, "w") as f:
        json.dump(config, f)
    proc = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config", path],
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    return proc, url


def _post(url: str, doc) -> None:
    request = urllib.request.Request(url, data=json.dumps(doc).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()


def run() -> list[dict]:
    logger.setLevel("WARNING")
    rows = []
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_bench") as url:
        with Database(parse_database_url(url)) as db:
            migrate(db)
        proc, jenkins_url = _emulator()
        try:
            _post(jenkins_url + "_emulator/faults", {"path": "buildWithParameters$", "latency_seconds": LATENCY_SECONDS})
            for threads, batch, jobs in CASES:
                with Database(parse_database_url(url)) as db:
                    db.run("TRUNCATE jenkins_job_events, jenkins_jobs_queue, jenkins_job_limits RESTART IDENTITY")
                    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                           "SELECT 'bench', jsonb_build_object('N', g) FROM generate_series(1, :n) g", n=jobs)
                settings = load_settings({
                    "DATABASE_URL": url, "JENKINS_URL": jenkins_url, "JENKINS_USER": "admin",
                    "JENKINS_API_TOKEN": "admin-token", "MAX_PARALLEL_TRIGGERS": str(threads),
                    "BATCH_SIZE": str(batch), "JENKINS_TIMEOUT_SECONDS": "5", "LEASE_SECONDS": "300",
                })
                started = time.perf_counter()
                summary = run_pass(settings)
                elapsed = time.perf_counter() - started
                metrics.clear_metrics()
                ideal = threads / LATENCY_SECONDS
                rate = summary["triggered"] / elapsed
                rows.append({
                    "threads": threads, "batch": batch, "jobs": jobs, "triggered": summary["triggered"],
                    "jobs_per_s": round(rate, 1), "ideal_per_s": round(ideal), "of_ideal": f"{rate / ideal:.0%}",
                    "db_statements_per_job": round(summary["db_statements"] / max(summary["triggered"], 1), 3),
                })
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return rows


if __name__ == "__main__":
    from benchmarks.report import print_table

    print_table("dispatch throughput, one pass, 50 ms per trigger", run())
