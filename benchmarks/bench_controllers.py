"""Several Jenkins controllers (issue 23): does one controller's outage, with its backlog piling up, cost another
controller's rows anything?

Two measures, on PostgreSQL and on MySQL/MariaDB (when a server answers), each against its own baseline in the
same run, so that the table gives ratios:

1. INSERT -> trigger for controller ``b``'s rows under `serve` (a real subprocess, shipped defaults: every tuning
   variable is removed from its environment) with two emulators, each in its own process: first with controller
   ``default`` (``a``) healthy and no backlog of its own (the baseline), then with ``a`` answering 503 to every
   request (its restart page) and BACKLOG pending rows of its own. The rows of ``b`` are plain-SQL INSERTs from the
   application's own session, 50-500 ms apart; the time is taken at Jenkins (``inQueueSince`` of ``b``'s queue
   item, as bench_latency does). Target (the issue): the same as with ``a`` healthy; on PostgreSQL (LISTEN)
   p50 <= 50 ms. MySQL has no notifications: its dispatcher polls once a second, so its p50 is about half a second
   whatever the controllers do (bench_latency); only the ratio says something there.
2. The claim itself, in-process (``DispatcherStore.claim_batch(10, controller="b")``, uncapped and through the capped path
   that MAX_IN_FLIGHT or any cap selects): its p50 with 10 pending rows of ``b`` and BACKLOG of ``a``, vs the same
   with no row of ``a``, in CLAIM_ROUNDS alternating rounds (the machine's load drifts: each case gets its share
   of every moment). Each sample's claimed rows are put back to pending (untimed) before the next. Rows read
   per claim: MySQL's Handler_read_* counters of the session (index entries and rows the server walked), or on
   PostgreSQL the buffers the claim touched (EXPLAIN (ANALYZE, BUFFERS), rolled back) — the claim must not read
   ``a``'s part of the claim index, so both stay flat whatever ``a``'s backlog.

    python -m benchmarks bench_controllers
    run() -> dict[str, list[dict]]   # title -> rows
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_latency import (
    Emulator,
    MysqlApp,
    Serve,
    _app_connection,
    _healthz,
    _quantile,
    _wait_for,
    logs_kept_on_failure,
)
from benchmarks.engines import add_pending, mysql_admin_url, mysql_scratch_database, server_name
from jenkins_dispatch.config import VARIABLES, default_of, parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from jenkins_dispatch.store.statements import load
from tests.pg_server import postgres_server, scratch_database
from tests.stores import Queue

BACKLOG = 10_000
SAMPLES = 40  # INSERTs of b per case
GAP_SECONDS = (0.05, 0.5)
CLAIM_SAMPLES = 100  # per path and round
CLAIM_ROUNDS = 3
CLAIM_ROWS = 10
SEED = 20261201
TARGET_P50_MS = 50.0  # b's INSERT -> trigger with a down (LISTEN; the issue)
# "The same as with a healthy": the machine is shared and a p50 of a few ms moves by a few ms between runs.
SAME_RATIO, SAME_SLACK_MS = 1.5, 5.0

INSERT_B = {
    "postgresql": "INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
                  "VALUES (:job, CAST(:parameters AS jsonb), 'b')",
    "mysql": "INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) VALUES (%(job)s, %(parameters)s, 'b')",
}
N_OF = {"postgresql": "parameters->>'N'", "mysql": "JSON_UNQUOTE(JSON_EXTRACT(parameters, '$.N'))"}


def _same(value: float, base: float) -> bool:
    return value <= max(base * SAME_RATIO, base + SAME_SLACK_MS)


# --------------------------------------------------------------------------- 1. INSERT -> trigger under serve


def _serve_env(emulator_b: Emulator) -> dict[str, str]:
    """Every setting the package reads is removed (bench_latency's Serve removes its own list; this one adds the
    rest, controllers and the breaker's included), then b is configured beside JENKINS_URL's default."""
    given = ("DATABASE_URL", "JENKINS_URL", "JENKINS_USER", "JENKINS_API_TOKEN", "WEBHOOK_SECRET", "AWS_REGION",
             "AWS_DEFAULT_REGION")
    env = {name: "" for name in VARIABLES if name not in given}  # empty: as if unset
    env["JENKINS_CONTROLLERS"] = json.dumps({"b": {"url": emulator_b.url, "user": "admin", "api_token": "admin-token"}})
    return env


def _insert_b(app, dialect: str, prefix: str, rng: random.Random) -> dict[str, float]:
    """SAMPLES rows of b, one plain INSERT each, a random gap apart; N -> epoch seconds just before its INSERT."""
    sent: dict[str, float] = {}
    for i in range(SAMPLES):
        time.sleep(rng.uniform(*GAP_SECONDS))
        tag = f"{prefix}{i:03d}"
        sent[tag] = time.time()
        app.run(INSERT_B[dialect], job="bench", parameters=json.dumps({"N": tag}))
    return sent


def _triggered(db: Database, prefix: str) -> int:
    return db.run(f"SELECT count(*) AS n FROM jenkins_jobs_queue WHERE {N_OF[db.dialect]} LIKE :p "
                  "AND jenkins_queue_id IS NOT NULL", p=prefix + "%")[0]["n"]


def _latencies(sent: dict[str, float], emulator: Emulator) -> tuple[list[float], int]:
    """(ms from INSERT to the emulator's queue item, per row of ``sent`` that arrived; rows that arrived once)."""
    arrivals = emulator.arrivals()
    return [(arrivals[t][0] - s) * 1000 for t, s in sent.items() if t in arrivals], \
        sum(1 for t in sent if len(arrivals.get(t, ())) == 1)


def _status_of_a(serve: Serve) -> str:
    return ((_healthz(serve.base) or {}).get("controllers") or {}).get("default", {}).get("status", "?")


def _released_of_a(db: Database) -> int:
    return db.run("SELECT count(*) AS n FROM jenkins_job_events e JOIN jenkins_jobs_queue q ON q.id = e.job_id "
                  "WHERE e.event = 'released' AND q.controller = 'default'")[0]["n"]


def insert_to_trigger(engine: str, url: str, workdir: Path, rng: random.Random, app) -> list[dict]:
    """Both cases of measure 1 on one engine, one serve throughout: a healthy, then a down with its backlog."""
    dialect = parse_database_url(url).engine
    a, b = Emulator(workdir), Emulator(workdir)
    rows = []
    try:
        with Database(parse_database_url(url), application_name="jd-bench") as db:
            serve = Serve(url, a.url, workdir / f"serve-{dialect}.log", **_serve_env(b))
            try:
                cases: list[tuple[str, Callable[[], None]]] = [("a healthy, no backlog of a", lambda: None)]

                def a_down() -> None:
                    # Jenkins a answers its restart page (503) to everything from now on; its backlog arrives.
                    a.control("restart", {"window_seconds": 3600})
                    add_pending(db, BACKLOG, "default")
                    if not _wait_for(lambda: _status_of_a(serve) == "unavailable" and _released_of_a(db) > 0,
                                     timeout=60, interval=0.2):
                        raise RuntimeError(f"controller a never went down in serve:\n{serve.log_path.read_text()[-3000:]}")

                cases.append((f"a down (503), {BACKLOG:,} pending rows of a", a_down))
                base = None
                for n, (case, prepare) in enumerate(cases):
                    prepare()
                    prefix = f"{dialect}-{n}-"
                    released = _released_of_a(db)
                    sent = _insert_b(app, dialect, prefix, rng)
                    if not _wait_for(lambda p=prefix: _triggered(db, p) >= SAMPLES, timeout=30, interval=0.1):
                        raise RuntimeError(f"{case}: only {_triggered(db, prefix)} of {SAMPLES} rows of b triggered")
                    waited, once = _latencies(sent, b)
                    p50, worst = statistics.median(waited), max(waited)
                    base = base or p50
                    down = n > 0
                    rows.append({
                        "engine": engine, "case": case, "rows_of_b": len(sent), "triggered_once_on_b": once,
                        "p50_ms": round(p50, 1), "p90_ms": round(_quantile(waited, 0.9), 1), "max_ms": round(worst, 1),
                        "p50_vs_healthy": f"{p50 / base:.2f}x",
                        "a_state_after": _status_of_a(serve),
                        # Each try of a (its breaker's backoff over) claims a batch, meets a 503 and releases it.
                        "a_rows_released_meanwhile": (_released_of_a(db) - released) if down else "",
                        "built_on_a": a.control("counters")["items_created"],
                        "meets_target": "", "target": "",
                    })
                if not all(r["built_on_a"] == 0 for r in rows[1:]):
                    raise RuntimeError("a built something while down")
            finally:
                serve.stop()
    finally:
        a.close()
        b.close()
    listen = dialect == "postgresql"
    down, healthy = rows[-1], rows[0]
    same = _same(down["p50_ms"], healthy["p50_ms"])
    down["meets_target"] = "yes" if same and (not listen or down["p50_ms"] <= TARGET_P50_MS) else "NO"
    down["target"] = (f"p50 as healthy (<= {SAME_RATIO:g}x or +{SAME_SLACK_MS:g} ms)"
                      + (f", <= {TARGET_P50_MS:g} ms" if listen
                         else f"; polling every {default_of('POLL_SECONDS'):g} s (POLL_SECONDS): no absolute target"))
    return rows


# --------------------------------------------------------------------------- 2. the claim


def _put_back(db: Database) -> None:
    """b's claimed rows pending again, as if never claimed (not timed)."""
    db.run("UPDATE jenkins_jobs_queue SET status = 'pending', dispatch_id = NULL, lease_expires_at = NULL, "
           "attempts = 0 WHERE controller = 'b' AND status = 'processing'")


def _handler_reads(db: Database) -> int:
    """MySQL: index entries and rows this session has read so far (Handler_read_*)."""
    return sum(int(r["Value"]) for r in db.run("SHOW SESSION STATUS LIKE 'Handler_read%'"))


class _RolledBack(Exception):
    """Ends the EXPLAIN's transaction: the claim it ran is undone."""


def _pg_buffers(db: Database, capped: bool) -> int:
    """PostgreSQL: the buffers (shared hit + read) one claim of b touches, from EXPLAIN (ANALYZE, BUFFERS) of the
    claim statement itself, rolled back."""
    sql = load("postgresql")
    params = dict(batch_size=CLAIM_ROWS, lease_seconds=300, actor="dispatcher", controller="b")
    if capped:
        params.update(max_in_flight=1000, controller_max_in_flight=None)
    lines: list[str] = []
    with contextlib.suppress(_RolledBack), db.transaction():
        if capped:
            db.run(sql["lock_caps"])
        plan = db.run("EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " + sql["claim_batch_capped" if capped else "claim_batch"],
                      **params)
        lines = [next(iter(r.values())) for r in plan]
        raise _RolledBack
    # The statement's own total: the top node's Buffers line, the first (a node's figure includes its children's,
    # CTEs and InitPlans included).
    first = next(line for line in lines if line.strip().startswith("Buffers:"))
    return sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", first))


def _claim_once(db: Database, queue: Queue, capped: bool) -> float:
    started = time.perf_counter()
    claimed = queue.claim_batch(CLAIM_ROWS, capped=capped, max_in_flight=1000 if capped else None, controller="b")
    took = (time.perf_counter() - started) * 1000
    if len(claimed) != CLAIM_ROWS:
        raise RuntimeError(f"a claim of b took {len(claimed)} rows, not {CLAIM_ROWS}")
    _put_back(db)
    return took


def _reads(db: Database, queue: Queue, capped: bool) -> int:
    """What one claim of b reads: rows and index entries (MySQL), or buffers (PostgreSQL)."""
    if db.dialect != "mysql":
        return _pg_buffers(db, capped)
    before = _handler_reads(db)
    queue.claim_batch(CLAIM_ROWS, capped=capped, max_in_flight=1000 if capped else None, controller="b")
    read = _handler_reads(db) - before
    _put_back(db)
    return read


def _set_backlog(db: Database, backlog: int) -> None:
    """a's pending rows: none, or ``backlog`` (b's rows stay); dead row versions cleared (PostgreSQL)."""
    db.run("DELETE FROM jenkins_jobs_queue WHERE controller = 'default'")
    if backlog:
        add_pending(db, backlog, "default")
    elif db.dialect == "mysql":
        db.run("ANALYZE TABLE jenkins_jobs_queue")
    else:
        db.run("VACUUM ANALYZE jenkins_jobs_queue")


def claim_latency(engine: str, url: str) -> list[dict]:
    """Measure 2 on one engine: b's claim with no row of a and with BACKLOG pending rows of a, in alternate rounds
    (the machine's load drifts: each case gets its share of every moment)."""
    timings: dict[tuple[int, bool], list[float]] = {}
    reads: dict[tuple[int, bool], list[int]] = {}
    with Database(parse_database_url(url), application_name="jd-bench") as db:
        queue = Queue(db, lease_seconds=300)
        db.run("DELETE FROM jenkins_job_events")
        db.run("DELETE FROM jenkins_jobs_queue")
        add_pending(db, CLAIM_ROWS, "b", job_prefix="job-b-")
        for _round in range(CLAIM_ROUNDS):
            for backlog in (0, BACKLOG):
                _set_backlog(db, backlog)
                for capped in (False, True):
                    for _ in range(10):  # the plan cache and the buffers warm
                        _claim_once(db, queue, capped)
                    for n in range(CLAIM_SAMPLES):
                        if n % 50 == 0 and db.dialect != "mysql":
                            db.run("VACUUM jenkins_jobs_queue")  # each sample leaves 20 dead row versions (untimed)
                        timings.setdefault((backlog, capped), []).append(_claim_once(db, queue, capped))
                    reads.setdefault((backlog, capped), []).append(_reads(db, queue, capped))
    unit = "rows read (Handler_read_*)" if db.dialect == "mysql" else "buffers (EXPLAIN ANALYZE)"
    rows = []
    for backlog in (0, BACKLOG):
        row: dict = {"engine": engine, "pending_of_a": backlog, "pending_of_b": CLAIM_ROWS}
        for capped in (False, True):
            key, taken = ("capped_" if capped else ""), sorted(timings[(backlog, capped)])
            base = statistics.median(timings[(0, capped)])
            row[f"{key}p50_ms"] = round(statistics.median(taken), 3)
            row[f"{key}p99_ms"] = round(taken[int(len(taken) * 0.99) - 1], 3)
            row[f"{key}vs_no_backlog"] = f"{statistics.median(taken) / base:.2f}x"
            row[f"{key}reads"] = statistics.median(reads[(backlog, capped)])
        row["reads_are"] = unit
        row["meets_target"] = "" if not backlog else (
            "yes" if all(_same(statistics.median(timings[(backlog, c)]), statistics.median(timings[(0, c)]))
                         for c in (False, True)) else "NO")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- the run


def run() -> dict[str, list[dict]]:
    """Both measures on each engine; serve's logs are kept (and named) only if something fails."""
    return logs_kept_on_failure("bench_controllers", "serve's logs", _run)


def _run(workdir: Path) -> dict[str, list[dict]]:
    rng = random.Random(SEED)
    latency: list[dict] = []
    claims: list[dict] = []
    with contextlib.ExitStack() as stack:
        admin_url, _where = stack.enter_context(postgres_server())
        urls = [stack.enter_context(scratch_database(admin_url, prefix="jd_bench_ctl"))]
        mysql_admin = mysql_admin_url()
        if mysql_admin is not None:
            urls.append(stack.enter_context(mysql_scratch_database(mysql_admin, prefix="jd_bench_ctl")))
        for url in urls:
            with Database(parse_database_url(url)) as db:
                migrate(db)
                engine = server_name(db)
            dialect = parse_database_url(url).engine
            app = _app_connection(url) if dialect == "postgresql" else MysqlApp(url)
            try:
                latency += insert_to_trigger(engine, url, workdir, rng, app)
            finally:
                app.close()
            claims += claim_latency(engine, url)
        if mysql_admin is None:
            latency.append({"engine": "MySQL/MariaDB", "case": "not measured: no server on 127.0.0.1:3306 "
                            "(root, no password) and no MYSQL_TEST_URL"})
    return {
        f"INSERT -> trigger for controller b while a is healthy, then down with {BACKLOG:,} pending rows "
        "(serve, shipped defaults; time at Jenkins b)": latency,
        f"claim of b ({CLAIM_ROWS} pending) with and without {BACKLOG:,} pending rows of a": claims,
    }


if __name__ == "__main__":
    from benchmarks.report import print_tables

    print_tables(run())
