"""Webhook throughput in-process: warm handler, one database session, real PostgreSQL.

Each notification goes the whole way a Lambda invocation does (routing, auth, body checks, the fenced
statement, the log line and the EMF metrics), minus the network in front of Lambda. Log and metric
output is written to a null sink so the terminal's speed is not measured.

    python -m benchmarks.bench_webhook            # prints a table
    run() -> list[dict]                           # for `make bench` and other scripts

Target: ≥ 500 notifications/s and p99 < 10 ms.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Iterator

from jenkins_dispatch import runtime
from jenkins_dispatch.callbacks.http_api import handle_http_event, http_api_event
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.observability import logger
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from tests.pg_server import postgres_server, scratch_database
from tests.stores import Queue

SECRET = "bench-webhook-secret"
JOBS = 1000  # each gets STARTED then COMPLETED: 2,000 notifications
WARMUP = 50
TARGET_PER_SECOND = 500
TARGET_P99_MS = 10.0


def _notification(job_id: int, dispatch_id: str, phase: str) -> dict:
    build = {
        "full_url": f"https://ci.example.com/job/team/job/deploy/{job_id}/",
        "number": job_id,
        "queue_id": 100_000 + job_id,
        "phase": phase,
        "url": f"job/team/job/deploy/{job_id}/",
        "scm": {"changes": [], "culprits": []},
        "parameters": {"ENV": "prod", "DISPATCH_ID": dispatch_id},
        "log": "",
        "artifacts": {},
    }
    if phase in ("COMPLETED", "FINALIZED"):
        build["status"] = "SUCCESS" if job_id % 5 else "FAILURE"
    body = json.dumps({"name": "deploy", "url": "job/team/job/deploy/", "build": build}).encode()
    return http_api_event("POST", "/jenkins/notify", f"token={SECRET}", {"Content-Type": "application/json"}, body)


@contextlib.contextmanager
def _environment(database_url: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "WEBHOOK_SECRET")}
    os.environ.update(DATABASE_URL=database_url, WEBHOOK_SECRET=SECRET)
    runtime.reset()
    try:
        yield
    finally:
        runtime.reset()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _quiet_output() -> Iterator[None]:
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        previous = logger.registered_handler.setStream(sink)
        try:
            yield
        finally:
            logger.registered_handler.setStream(previous)


def _measure(name: str, events: list[dict]) -> dict:
    database = runtime.pool()  # the webhook's sessions
    statements_before = database.statements
    latencies = []
    outcomes: dict[str, int] = {}
    with _quiet_output():
        started = time.perf_counter()
        for event in events:
            t0 = time.perf_counter()
            response = handle_http_event(event)
            latencies.append((time.perf_counter() - t0) * 1000)
            outcome = json.loads(response["body"])["outcome"]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        elapsed = time.perf_counter() - started
    latencies.sort()
    per_second = len(events) / elapsed
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return {
        "benchmark": name,
        "notifications": len(events),
        "per_second": round(per_second, 1),
        "p50_ms": round(statistics.median(latencies), 3),
        "p99_ms": round(p99, 3),
        "max_ms": round(latencies[-1], 3),
        "statements_per_notification": round((database.statements - statements_before) / len(events), 2),
        "outcomes": outcomes,
        "meets_target": per_second >= TARGET_PER_SECOND and p99 < TARGET_P99_MS,
    }


def run(jobs: int = JOBS) -> list[dict]:
    with contextlib.ExitStack() as stack:
        admin_url, _where = stack.enter_context(postgres_server())
        url = stack.enter_context(scratch_database(admin_url, prefix="jd_bench"))
        setup_db = stack.enter_context(Database(parse_database_url(url)))
        stack.enter_context(_environment(url))
        migrate(setup_db)
        queue = Queue(setup_db, lease_seconds=600)
        # A plain INSERT is a valid enqueue (contract); one statement keeps the setup quick.
        setup_db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                     "SELECT 'team/deploy', jsonb_build_object('N', n) FROM generate_series(1, :n) AS n",
                     n=jobs + WARMUP)
        claimed = queue.claim_batch(jobs + WARMUP)
        for job in claimed:
            queue.mark_triggered(job, 100_000 + job.id)
        warmup, measured = claimed[:WARMUP], claimed[WARMUP:]

        # Warm: settings read, session open, statements planned once, Powertools imported.
        with _quiet_output():
            for job in warmup:
                handle_http_event(_notification(job.id, job.dispatch_id, "STARTED"))

        # Builds overlap: each job's COMPLETED arrives a few other jobs' STARTED after its own STARTED.
        lag = 10
        mixed = []
        for i, job in enumerate(measured):
            mixed.append(_notification(job.id, job.dispatch_id, "STARTED"))
            if i >= lag:
                earlier = measured[i - lag]
                mixed.append(_notification(earlier.id, earlier.dispatch_id, "COMPLETED"))
        mixed += [_notification(job.id, job.dispatch_id, "COMPLETED") for job in measured[-lag:]]
        results = [_measure("STARTED + COMPLETED on processing rows", mixed)]
        duplicates = [_notification(job.id, job.dispatch_id, "FINALIZED") for job in measured]
        results.append(_measure("FINALIZED repeats on settled rows", duplicates))
        return results


def main() -> None:
    results = run()
    columns = ["benchmark", "notifications", "per_second", "p50_ms", "p99_ms", "max_ms",
               "statements_per_notification", "meets_target"]
    widths = {c: max(len(c), *(len(str(r[c])) for r in results)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in results:
        print("  ".join(str(row[c]).ljust(widths[c]) for c in columns))
    print(f"target: >= {TARGET_PER_SECOND}/s and p99 < {TARGET_P99_MS:g} ms (in-process, warm, one connection)")


if __name__ == "__main__":
    main()
