"""`serve`'s HTTP server under pressure, as a user runs it (a subprocess), on both engines (issue 21):

1. Webhook latency with 50 concurrent callers while one callback waits on a row another session holds
   locked. Each caller posts STARTED then COMPLETED for rows of its own, each POST on a new connection (as the
   Notification plugin does); a sample is the time from connecting to the whole answer. The same run without
   the lock is the baseline. Target: p99 < 100 ms for the others while the locked one waits.
2. Threads and RSS of `serve` (read from /proc) before, with 300 idle connections open, and after the idle
   timeout (HTTP_IDLE_TIMEOUT_SECONDS=5 here) had time to close them.

The callers are threads of five processes of their own (ten each), so that a caller's wait for its own
process's GIL counts as little as it can in a sample; their CPU still competes with `serve` and the database
for the machine's cores. Every caller keeps one request in flight, so latency here is the queue's depth (50)
times the time one request takes; ``load_1m`` is the machine's load average (numbers from a machine busy with
other work are not comparable).

Run with `make bench`, `python -m benchmarks bench_http` or `python -m benchmarks.bench_http`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.engines import scratch_databases, server_name
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_emulator.server import JenkinsEmulator
from tests.engines import row_lock_waiters
from tests.stores import Queue

SECRET = "bench-http-secret"
CALLERS = 50
CALLER_PROCESSES = 5  # the callers' threads are spread over this many processes
WARM_UP_CALLERS = 10  # more than WEBHOOK_DB_POOL_SIZE, so that every session of the pool is opened
ROWS_PER_CALLER = 4  # each row: STARTED, then COMPLETED
IDLE_CONNECTIONS = 300
IDLE_TIMEOUT_SECONDS = 5
TARGET_P99_MS = 100.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def _post(port: int, body: bytes) -> tuple[int, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", f"/jenkins/notify?token={SECRET}", body=body,
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        return answer.status, time.perf_counter() - started
    finally:
        connection.close()


def _notification(row: dict, phase: str) -> bytes:
    build = {"number": row["id"], "queue_id": row["jenkins_queue_id"], "phase": phase,
             "url": f"job/deploy/{row['id']}/", "parameters": {"DISPATCH_ID": row["dispatch_id"]}}
    if phase == "COMPLETED":
        build["status"] = "SUCCESS"
    return json.dumps({"name": "deploy", "url": "job/deploy/", "build": build}).encode()


@contextlib.contextmanager
def _serve(database_url: str, jenkins_url: str, **env: str) -> Iterator[tuple[subprocess.Popen, int]]:
    port = _free_port()
    environment = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL=jenkins_url, JENKINS_USER="admin",
                       JENKINS_API_TOKEN="admin-token", WEBHOOK_SECRET=SECRET, LEASE_SECONDS="600",
                       JENKINS_TIMEOUT_SECONDS="5", **env)
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--port", str(port)],
                                env=environment, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(OSError):
                    if _get(port, "/healthz") == 200:
                        break
                if time.monotonic() > deadline or proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"serve did not start: {log.read()[-2000:]}")
                time.sleep(0.1)
            yield proc, port
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _processing_rows(db: Database, count: int) -> list[dict]:
    db.run("DELETE FROM jenkins_job_events")
    db.run("DELETE FROM jenkins_jobs_queue")
    queue = Queue(db, lease_seconds=600)
    for _ in range(count):
        queue.enqueue("deploy")
    jobs = queue.claim_batch(count)
    for job in jobs:
        queue.mark_triggered(job, 100_000 + job.id)
    return [queue.get(job.id) for job in jobs]


def _caller_process(port: int, rows: list[dict], threads: int, together: Any, answers: Any) -> None:
    """``threads`` callers in one process (their share of ``rows`` each), posting once ``together`` lets them."""
    def caller(n: int) -> tuple[float, list[tuple[int, float]], float]:
        mine = rows[n::threads]
        together.wait(timeout=60)
        began = time.time()
        posted = [_post(port, _notification(row, phase)) for row in mine for phase in ("STARTED", "COMPLETED")]
        return began, posted, time.time()

    with ThreadPoolExecutor(threads) as pool:
        answers.put(list(pool.map(caller, range(threads))))


def _callers(port: int, rows: list[dict]) -> tuple[list[float], Counter, float]:
    """CALLERS callers at once, each posting STARTED then COMPLETED for its share of ``rows``: threads spread
    over CALLER_PROCESSES processes, so that one caller's wait for its own process's GIL is not counted as the
    server's latency (Jenkins has no GIL). Returns the latencies (ms), the answers' statuses and the seconds
    from the first POST to the last answer."""
    context = multiprocessing.get_context("spawn")
    together, answers = context.Barrier(CALLERS), context.Queue()
    per_process = CALLERS // CALLER_PROCESSES
    processes = [context.Process(target=_caller_process,
                                 args=(port, rows[p::CALLER_PROCESSES], per_process, together, answers))
                 for p in range(CALLER_PROCESSES)]
    for process in processes:
        process.start()
    callers = [caller for _ in processes for caller in answers.get(timeout=120)]
    for process in processes:
        process.join(timeout=30)
    results = [answer for _, posted, _ in callers for answer in posted]
    wall = max(ended for _, _, ended in callers) - min(began for began, _, _ in callers)
    return [seconds * 1000 for _, seconds in results], Counter(status for status, _ in results), wall


def _latency_row(engine: str, version: str, scenario: str, latencies: list[float], statuses: Counter,
                 wall: float, locked: str) -> dict:
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return {"engine": version, "scenario": scenario, "callers": CALLERS, "requests": len(latencies),
            "answers": " ".join(f"{status}x{n}" for status, n in sorted(statuses.items())),
            "p50_ms": round(statistics.median(latencies), 1), "p99_ms": round(p99, 1),
            "max_ms": round(latencies[-1], 1), "per_second": round(len(latencies) / wall),
            "locked_callback": locked, "load_1m": round(os.getloadavg()[0], 1), "meets_target": p99 < TARGET_P99_MS}


def webhook_latency(engine: str, url: str, jenkins_url: str) -> list[dict]:
    rows_needed = CALLERS * ROWS_PER_CALLER
    results = []
    with Database(parse_database_url(url), application_name="jd-bench") as db, \
            Database(parse_database_url(url), application_name="jd-bench-locker") as locker:
        version = server_name(db)
        # Every row is processing before serve starts, so its dispatcher has nothing to claim.
        rows = _processing_rows(db, 2 * rows_needed + 1)
        baseline, held, rows = rows[:rows_needed], rows[rows_needed], rows[rows_needed + 1:]
        with _serve(url, jenkins_url) as (_proc, port):
            # Warm every session of the pool (posts one at a time would open only one) and the statements.
            with ThreadPoolExecutor(WARM_UP_CALLERS) as warm:
                list(warm.map(lambda row: _post(port, _notification(row, "QUEUED")), baseline[:CALLERS] + rows[:CALLERS]))
            latencies, statuses, wall = _callers(port, baseline)
            results.append(_latency_row(engine, version, "nothing locked", latencies, statuses, wall, "-"))
            with ThreadPoolExecutor(1) as first:
                with locker.transaction():
                    locker.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=held["id"])
                    waiting = first.submit(_post, port, _notification(held, "COMPLETED"))
                    while row_lock_waiters(db) < 1 and not waiting.done():
                        time.sleep(0.02)
                    latencies, statuses, wall = _callers(port, rows)
                    still_waiting = not waiting.done()
                status, seconds = waiting.result(timeout=60)
        order = "still waiting when the others were done" if still_waiting else "done before the others"
        locked = f"{order}; {status} after {seconds:.1f} s"
        results.append(_latency_row(engine, version, "one callback waits on a locked row", latencies, statuses,
                                    wall, locked))
    return results


def _status(pid: int) -> tuple[int, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["Threads"]), round(int(fields["VmRSS"].split()[0]) / 1024, 1)


def _open(sockets: list[socket.socket]) -> int:
    import select

    still = 0
    for sock in sockets:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            still += 1
            continue
        try:
            if sock.recv(1024) != b"":
                still += 1
        except OSError:
            pass
    return still


def idle_connections(url: str, jenkins_url: str) -> list[dict]:
    rows = []
    with _serve(url, jenkins_url, HTTP_IDLE_TIMEOUT_SECONDS=str(IDLE_TIMEOUT_SECONDS)) as (proc, port):
        time.sleep(1)  # let start-up settle before the first reading
        threads, rss = _status(proc.pid)
        rows.append({"moment": "before", "connections_open": 0, "threads": threads, "rss_mb": rss,
                     "healthz_ms": _healthz_ms(port)})
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(IDLE_CONNECTIONS)]
        try:
            time.sleep(1)
            healthz = _healthz_ms(port)
            threads, rss = _status(proc.pid)
            rows.append({"moment": f"{IDLE_CONNECTIONS} idle connections open", "connections_open": _open(sockets),
                         "threads": threads, "rss_mb": rss, "healthz_ms": healthz})
            deadline = time.monotonic() + IDLE_TIMEOUT_SECONDS + 15
            while _open(sockets) and time.monotonic() < deadline:
                time.sleep(0.5)
            threads, rss = _status(proc.pid)
            rows.append({"moment": f"{IDLE_TIMEOUT_SECONDS + 15} s later at most", "connections_open": _open(sockets),
                         "threads": threads, "rss_mb": rss, "healthz_ms": _healthz_ms(port)})
        finally:
            for sock in sockets:
                sock.close()
    return rows


def _healthz_ms(port: int) -> float:
    started = time.perf_counter()
    _get(port, "/healthz")
    return round((time.perf_counter() - started) * 1000, 1)


def run() -> dict[str, list[dict]]:
    emulator = JenkinsEmulator()
    jenkins_url = emulator.start()
    try:
        with scratch_databases("jd_bench_http") as (urls, missing):
            latency = []
            for engine, url in urls.items():
                latency += webhook_latency(engine, url, jenkins_url)
            latency += [{"engine": engine, "scenario": f"skipped: {why}"} for engine, why in missing.items()]
            threads = idle_connections(urls["postgresql"], jenkins_url)
    finally:
        emulator.stop()
    return {f"webhook under serve: {CALLERS} concurrent callers, p99 target < {TARGET_P99_MS:g} ms": latency,
            f"serve with {IDLE_CONNECTIONS} idle connections (HTTP_IDLE_TIMEOUT_SECONDS={IDLE_TIMEOUT_SECONDS})":
                threads}


def main() -> None:
    from benchmarks.report import print_tables

    print_tables(run())


if __name__ == "__main__":
    main()
