"""The web page (`jenkins-dispatch ui`): time to first byte of its pages with a long finished history, on both
engines. The target (issue 25, was 100 ms in issue 15): every page under 50 ms with a million finished rows, because each reads the
partial (PostgreSQL) or status-led (MySQL) indexes the command line reads, never the whole history.

The page server runs in this process on 127.0.0.1 (as `jenkins-dispatch ui` does), with one keep-alive HTTP
connection; a sample is the time from sending the request to the status line (the page is rendered whole
before its first byte leaves). Rows come from ``engines.fill``: N completed rows finished a day ago (outside
the overview's 12-hour window) plus 1,000 pending ones, ten job names.

Run with `make bench`, `python -m benchmarks bench_ui` or `python -m benchmarks.bench_ui`.
"""

from __future__ import annotations

import dataclasses
import http.client
import statistics
import time
from urllib.parse import urlsplit

from benchmarks.engines import fill, scratch_databases, server_name
from jenkins_dispatch.config import Settings, parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.ui.server import UiServer

SIZES = (10_000, 1_000_000)
PENDING = 1_000
SAMPLES = 30
WARMUP = 3
TARGET_MS = 50.0  # issue 25: every page within 50 ms with a million finished rows


def _pages(db: Database) -> dict[str, str]:
    """The pages timed: the three of the issue, then filtered lists (an operator's usual questions). Ids are
    read back (MySQL leaves gaps between the ids of one bulk INSERT ... SELECT and the next)."""
    ids = db.run("SELECT (SELECT max(id) FROM jenkins_jobs_queue WHERE status = 'completed') AS finished, "
                 "(SELECT max(id) FROM jenkins_jobs_queue WHERE status = 'pending') AS pending")[0]
    middle = ids["finished"] // 2
    return {
        "/": "/",
        "/jobs": "/jobs",
        "/time": "/time",
        "/jobs/ID (finished)": f"/jobs/{middle}",
        "/jobs/ID (pending)": f"/jobs/{ids['pending']}",
        "/jobs?status=pending": "/jobs?status=pending",
        "/jobs?job=job-3&since=1h": "/jobs?job=job-3&since=1h",
        "/jobs?before=ID (older page)": f"/jobs?before={middle}",
    }


def _ttfb(connection: http.client.HTTPConnection, path: str) -> float:
    started = time.perf_counter()
    connection.request("GET", path, headers={"Host": "127.0.0.1"})
    answer = connection.getresponse()
    elapsed = time.perf_counter() - started
    body = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"GET {path} answered {answer.status}: {body[:200]!r}")
    return elapsed


def measure(engine: str, url: str, finished: int) -> list[dict]:
    """Fill, start the page, time each page SAMPLES times."""
    bulk = dataclasses.replace(parse_database_url(url), statement_timeout_ms=900_000)
    with Database(bulk, application_name="jd-bench-fill") as db:
        fill(db, PENDING, finished)
        pages = _pages(db)
    server = UiServer(Settings(database=parse_database_url(url)), "127.0.0.1", 0, refresh_seconds=0).start()
    rows = []
    try:
        connection = http.client.HTTPConnection("127.0.0.1", urlsplit(server.url).port, timeout=30)
        for label, path in pages.items():
            for _ in range(WARMUP):
                _ttfb(connection, path)
            samples = sorted(_ttfb(connection, path) * 1000 for _ in range(SAMPLES))
            p50, p95 = statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]
            rows.append({"engine": engine, "finished_rows": f"{finished:,}", "page": label,
                         "ttfb_p50_ms": f"{p50:.1f}", "ttfb_p95_ms": f"{p95:.1f}",
                         "target": f"< {TARGET_MS:g} ms: {'met' if p95 < TARGET_MS else 'MISSED'}"})
        connection.close()
    finally:
        server.stop()
    return rows


def run(sizes=SIZES) -> dict[str, list[dict]]:
    """Every page at every size on every engine that answers."""
    rows: list[dict] = []
    notes: list[dict] = []
    with scratch_databases("jd_bench_ui") as (urls, missing):
        for url in urls.values():
            with Database(parse_database_url(url)) as db:
                engine = server_name(db)
            for finished in sizes:
                rows += measure(engine, url, finished)
        notes += [{"engine": engine, "note": why} for engine, why in missing.items()]
    title = f"web page: time to first byte ({SAMPLES} samples per page, {PENDING:,} pending rows beside the finished)"
    return {title: rows, **({"web page: engines left out": notes} if notes else {})}


if __name__ == "__main__":
    from benchmarks.report import print_tables

    print_tables(run())
