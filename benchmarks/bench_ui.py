"""The web page (`jenkins-dispatch ui`): time to first byte of its pages with a long finished history, on both
engines. The target (issue 25, was 100 ms in issue 15): every page under 50 ms with a million finished rows, because each reads the
partial (PostgreSQL) or status-led (MySQL) indexes the command line reads, never the whole history.

The page server runs in this process on 127.0.0.1 (as `jenkins-dispatch ui` does), with one keep-alive HTTP
connection; a sample is the time from sending the request to the status line (the page is rendered whole
before its first byte leaves). Rows come from ``engines.fill``: N completed rows finished a day ago (outside
the overview's 12-hour window) plus 1,000 pending ones, ten job names.

The bulk fill bypasses the trigger that keeps /time's aggregates (0012/0009_job_stats.sql), so ``fill_aggregates``
writes them as a busy install holds them: the N finishes spread evenly over HISTORY_DAYS (a day more than the
page's week, as a daily `prune` leaves them) in five-minute rows of four shards, the queue's depth per five
minutes, and hourly histograms with HISTOGRAM_BINS bins in use per metric and shard. /time then reads full-size
aggregates: about 9,000 five-minute rows, 2,300 depth rows and 25,000 histogram rows.

Run with `make bench`, `python -m benchmarks bench_ui` or `python -m benchmarks.bench_ui`.
"""

from __future__ import annotations

import dataclasses
import http.client
import statistics
import time
from urllib.parse import urlsplit

from benchmarks.engines import _mysql_numbers, fill, scratch_databases, server_name
from jenkins_dispatch.config import Settings, parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.ui.server import UiServer

SIZES = (10_000, 1_000_000)
PENDING = 1_000
SAMPLES = 30
WARMUP = 3
TARGET_MS = 50.0  # issue 25: every page within 50 ms with a million finished rows
HISTORY_DAYS = 8  # the aggregates kept: the page's longest window (a week) and the day a daily prune leaves
HISTOGRAM_BINS = 16  # bins in use per hour, metric and shard: durations over 2^8 (a second to about 4 minutes)
SHARDS = 4  # the aggregates' shards (0012_job_stats.sql)


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


def fill_aggregates(db: Database, finished: int) -> None:
    """Write /time's aggregates for ``finished`` rows spread over HISTORY_DAYS (see the module's docstring), in
    each engine's SQL: the five-minute rows of outcomes and starts, the queue's depth, the hourly histograms."""
    five_minutes, hours = HISTORY_DAYS * 288, HISTORY_DAYS * 24
    each = max(1, finished // (five_minutes * SHARDS))
    per_bin = max(1, finished // (hours * SHARDS * HISTOGRAM_BINS))
    counts = dict(completed=each - each // 10, failed=each // 10, each=each, wait=each * 30.0, build=each * 90.0,
                  per_bin=per_bin)
    stats = ("INSERT INTO jenkins_job_stats (bucket_start, shard, completed, failed, cancelled, started, wait_n, "
             "wait_seconds, build_seconds) SELECT {bucket} - {step}, s.s, :completed, :failed, 0, :each, :each, :wait, "
             ":build FROM {numbers} CROSS JOIN {shards}")
    depth = ("INSERT INTO jenkins_queue_depth (bucket_start, pending_max, processing_max) "
             "SELECT {bucket} - {step}, 1000 + g.g % 100, 40 + g.g % 10 FROM {numbers}")
    bins = ("INSERT INTO jenkins_job_stat_bins (metric, bucket_start, bin, shard, n) "
            "SELECT m.metric, {hour} - {hour_step}, m.first + k.k, s.s, :per_bin "
            "FROM {numbers} CROSS JOIN {shards} CROSS JOIN {metrics} CROSS JOIN {bins}")
    if db.dialect == "mysql":
        epoch = "TIMESTAMPDIFF(SECOND, '1970-01-01', NOW(6))"
        parts = dict(bucket=f"'1970-01-01' + INTERVAL ({epoch} DIV 300 * 300) SECOND",
                     hour=f"'1970-01-01' + INTERVAL ({epoch} DIV 3600 * 3600) SECOND",
                     step="INTERVAL (300 * (g.g - 1)) SECOND", hour_step="INTERVAL (3600 * (g.g - 1)) SECOND",
                     shards=f"(SELECT g.g - 1 AS s FROM {_mysql_numbers(SHARDS)}) s",
                     bins=f"(SELECT g.g - 1 AS k FROM {_mysql_numbers(HISTOGRAM_BINS)}) k")
    else:
        parts = dict(bucket="jenkins_dispatch_bucket(now(), 300)", hour="jenkins_dispatch_bucket(now(), 3600)",
                     step="make_interval(secs => 300 * (g.g - 1))", hour_step="make_interval(secs => 3600 * (g.g - 1))",
                     shards=f"generate_series(0, {SHARDS - 1}) s(s)",
                     bins=f"generate_series(0, {HISTOGRAM_BINS - 1}) k(k)")
    metrics = "(SELECT 'wait' AS metric, 2 AS first UNION ALL SELECT 'build', 8) m"

    def numbers(n: int) -> str:
        # engines' numbers end in their own WHERE: wrapped, they join like PostgreSQL's generate_series.
        return f"(SELECT g.g FROM {_mysql_numbers(n)}) g" if db.dialect == "mysql" else f"generate_series(1, {n}) g(g)"

    for table in ("jenkins_job_stats", "jenkins_queue_depth", "jenkins_job_stat_bins"):  # engines.empty leaves them
        db.run(f"DELETE FROM {table}")
    db.run(stats.format(numbers=numbers(five_minutes), **parts), **{k: v for k, v in counts.items() if k != "per_bin"})
    db.run(depth.format(numbers=numbers(five_minutes), **parts))
    db.run(bins.format(numbers=numbers(hours), metrics=metrics, **parts), per_bin=per_bin)
    db.run("ANALYZE TABLE jenkins_job_stats, jenkins_queue_depth, jenkins_job_stat_bins" if db.dialect == "mysql"
           else "ANALYZE jenkins_job_stats, jenkins_queue_depth, jenkins_job_stat_bins")


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
        fill_aggregates(db, finished)
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
