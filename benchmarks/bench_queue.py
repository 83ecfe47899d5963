"""Queue benchmarks on both engines (PostgreSQL, and MySQL/MariaDB when a server answers): claim + settle
throughput (the seed's loop vs batch claims), claim latency at depth, and `stats` over a long history.

Each table holds both engines (an ``engine`` column); compare rows of one run, as ratios: the two servers
share this machine with each other (and with whatever else runs on it).

Throughput: every pattern starts from the same JOBS due rows and runs until the queue is empty or
TIME_BOX_SECONDS have passed (the seed's loop on MySQL sorts every pending row for each claim: draining
20,000 rows one at a time would take many minutes); jobs_per_s is what was claimed AND settled per second.
A worker whose claim comes back empty while due rows remain counts an empty claim and tries again at once
(a polling dispatcher would sleep, which only makes it slower). Every claimed id is checked: claimed by
exactly one worker, once, and completed in the table.

Run with `make bench` (all benchmarks), `python -m benchmarks bench_queue` or `python -m benchmarks.bench_queue`.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import statistics
import time
from collections import Counter
from queue import Empty

from benchmarks.engines import SEED, add_pending, fill, scratch_databases, server_name
from benchmarks.engines import empty as empty_queue
from jenkins_dispatch.config import DEFAULT_CONTROLLER, parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.queue import Settlement
from tests.stores import Queue

CONTEXT = multiprocessing.get_context("fork")
JOBS = 20_000
WORKERS = (1, 2, 4, 8)
TIME_BOX_SECONDS = 10.0
DEPTHS = (10_000, 100_000, 1_000_000)
LATENCY_SAMPLES = 300
TARGET_RATIO_AT_4 = 10.0  # batch of 100 vs the seed's loop, 4 workers (the issue)
TARGET_DEPTH_RATIO = 1.5  # claim p50 at 1M pending vs at 10k (the issue)
RATE_DEPTH = 1_000_000  # pending rows for rate_latency (issue 24)
TARGET_KEY_CAP_RATIO = 1.2  # key caps' claim p50 against no limits at RATE_DEPTH (issue 35)
TARGET_FAIR_RATIO = 1.5  # the fair-share claim's p50 against no limits at RATE_DEPTH (issue 35)
FAIRNESS_KEYS = 1_000  # the fair-share case's groups
STARVATION_BACKLOG = 10_000  # one group's waiting rows when another's first row arrives (issue 35)
TARGET_RATE_RATIO = 1.2  # claim p50 with one rate set vs none (issue 24)
RATE_ROUNDS = 20  # turns each rate_latency case takes (short turns: a burst of load lands on all cases)
# (pending, finished) for stats_latency: a long history behind a short queue, then a deep backlog.
STATS_POINTS = ((10_000, 1_000_000), (1_000_000, 0))


def _bulk(url: str) -> Database:
    """A session for filling: INSERT ... SELECT of a million rows outlasts the shipped statement time limit."""
    return Database(dataclasses.replace(parse_database_url(url), statement_timeout_ms=900_000),
                    application_name="jd-bench-fill")


def _pending_left(db: Database) -> bool:
    """Whether due rows remain (a plain read: it waits on no lock and takes none)."""
    return bool(db.run("SELECT 1 AS x FROM jenkins_jobs_queue WHERE status = 'pending' LIMIT 1"))


def _seed_worker(url, stop, out):
    """The seed's dispatcher: lock one row, mark it, commit; then settle it."""
    ids, empty = [], 0
    with Database(parse_database_url(url)) as db:
        seed = SEED[db.dialect]
        while not stop.is_set():
            with db.transaction():
                rows = db.run(seed["claim"])
                if rows:
                    job_id = rows[0]["id"]
                    db.run(seed["mark"], id=job_id, d=f"seed-{job_id}")
            if not rows:
                if not _pending_left(db):
                    break
                empty += 1
                continue
            db.run(seed["done"], id=job_id)
            ids.append(job_id)
    out.put((ids, empty))


def _batch_worker(url, stop, out, batch, per_row=False):
    """Claim a batch, then settle it: in one statement (as the dispatcher records a batch), or one
    statement per job (as webhook callbacks arrive)."""
    ids, empty = [], 0
    with Database(parse_database_url(url)) as db:
        queue = Queue(db, lease_seconds=300)
        while not stop.is_set():
            jobs = queue.claim_batch(batch)
            if not jobs:
                if not _pending_left(db):
                    break
                empty += 1
                continue
            if per_row:
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
            else:
                queue.settle_many([Settlement(j.id, j.dispatch_id, "completed", "SUCCESS") for j in jobs])
            ids.extend(j.id for j in jobs)
    out.put((ids, empty))


def _one_run(url: str, workers: int, target, extra: tuple) -> tuple[list[list[int]], int, float]:
    stop = CONTEXT.Event()
    out = CONTEXT.Queue()
    procs = [CONTEXT.Process(target=target, args=(url, stop, out, *extra)) for _ in range(workers)]
    started = time.perf_counter()
    for p in procs:
        p.start()
    results = []
    deadline = started + TIME_BOX_SECONDS
    while len(results) < workers:
        try:
            results.append(out.get(timeout=max(0.05, deadline - time.perf_counter())))
        except Empty:  # the time box is over: workers finish the job in hand and report
            stop.set()
            results.extend(out.get(timeout=120) for _ in range(workers - len(results)))
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    return [ids for ids, _ in results], sum(e for _, e in results), elapsed


def throughput(engine: str, url: str, jobs: int = JOBS) -> list[dict]:
    """Claim + settle throughput of each pattern at 1, 2, 4 and 8 worker processes."""
    rows = []
    with _bulk(url) as db:
        for workers in WORKERS:
            patterns = [("seed: 1 job/transaction", _seed_worker, ()),
                        ("batch 10, settle_many", _batch_worker, (10,)),
                        ("batch 100, settle_many", _batch_worker, (100,))]
            if workers == 4:
                patterns.append(("batch 100, settle per job", _batch_worker, (100, True)))
            for label, target, extra in patterns:
                fill(db, jobs)
                per_worker, empty, elapsed = _one_run(url, workers, target, extra)
                counts = Counter(i for ids in per_worker for i in ids)
                done = len(counts)
                completed = db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status = 'completed'")[0]["n"]
                correct = set(counts.values()) <= {1} and completed == done
                rows.append({
                    "engine": engine, "pattern": label, "workers": workers, "jobs_done": done,
                    "of_jobs": jobs, "seconds": round(elapsed, 2), "jobs_per_s": round(done / elapsed),
                    "busiest_worker_share": f"{max(len(ids) for ids in per_worker) / max(done, 1):.0%}",
                    "empty_claims": empty,
                    "exactly_once": "yes" if correct else f"NO ({done} distinct, {completed} completed)",
                })
    for row in rows:
        seed = next(r for r in rows if r["workers"] == row["workers"] and r["pattern"].startswith("seed"))
        row["vs_seed"] = f"{row['jobs_per_s'] / max(seed['jobs_per_s'], 1):.1f}x"
    return rows


def seed_probe(url: str, jobs: int = JOBS) -> str:
    """How the seed's claim runs with `jobs` due rows: whether its plan sorts (no index gives ORDER BY
    priority DESC, scheduled_at), how long one claim takes, and (MySQL) how many row locks it holds."""
    with _bulk(url) as db:
        fill(db, jobs)
        claim = SEED[db.dialect]["claim"]
        if db.dialect == "mysql":
            plan = db.run("EXPLAIN " + claim)[0]
            sorts = "filesort" in (plan.get("Extra") or "")
            how = f"plan: index {plan['key']}, {plan['Extra']}"
        else:
            plan = db.run("EXPLAIN (FORMAT TEXT) " + claim)
            text = " / ".join(r["QUERY PLAN"].strip() for r in plan)
            sorts = "Sort" in text
            how = f"plan: {text[:160]}"
        with db.transaction():
            started = time.perf_counter()
            db.run(claim)
            took = (time.perf_counter() - started) * 1000
            locked = ""
            if db.dialect == "mysql":
                held = db.run("SELECT trx_rows_locked AS n FROM information_schema.innodb_trx "
                              "WHERE trx_mysql_thread_id = CONNECTION_ID()")
                locked = f", {held[0]['n']:,} record locks held until COMMIT (secondary index + clustered)" if held else ""
    verdict = "sorts every due row for each claim" if sorts else "walks an index in claim order"
    return f"{verdict} ({how}); one claim at {jobs:,} due: {took:.1f} ms{locked}"


def _timed(call, samples: int) -> list[float]:
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)


def _pool_reads(db: Database) -> int | None:
    """MySQL: pages InnoDB had to read from disk so far (server-wide: other sessions' reads count too)."""
    if db.dialect != "mysql":
        return None
    return int(db.run("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_reads'")[0]["Value"])


def server_memory(db: Database) -> str:
    """What bounds the working set in memory: the buffer pool and how InnoDB reads (O_DIRECT: no OS cache)."""
    if db.dialect == "mysql":
        row = db.run("SELECT @@innodb_buffer_pool_size AS pool, @@innodb_flush_method AS method")[0]
        return f"InnoDB buffer pool {int(row['pool']) // 2**20} MB, flush method {row['method']}"
    return f"shared_buffers {db.run('SHOW shared_buffers')[0]['shared_buffers']} (plus the OS page cache)"


def claim_latency(engine: str, url: str, depths=DEPTHS, samples: int = LATENCY_SAMPLES) -> list[dict]:
    """claim_batch(10) with `depth` due rows and as many finished ones; uncapped, then through the capped
    path with a cap in force; round trips per claim from the session's statement counter."""
    rows = []
    with _bulk(url) as filler, Database(parse_database_url(url), application_name="jd-bench") as db:
        queue = Queue(db, lease_seconds=300)
        for depth in depths:
            started = time.perf_counter()
            fill(filler, pending=depth, finished=depth)
            fill_seconds = time.perf_counter() - started
            for _ in range(20):  # warm the plan cache and the buffers
                queue.claim_batch(10)
            before, reads = db.statements, _pool_reads(db)
            claimed = []
            timings = _timed(lambda: claimed.append(len(queue.claim_batch(10))), samples)  # noqa: B023
            per_claim = (db.statements - before) / samples
            reads = None if reads is None else (_pool_reads(db) - reads) / samples
            assert set(claimed) == {10}, f"a claim took fewer than 10 rows at depth {depth}: {Counter(claimed)}"
            # The capped path: a per-job cap in force, claims through claim_batch_capped.
            queue.set_limit("job-1", 1_000_000)
            before = db.statements
            capped = _timed(lambda: queue.claim_batch(10, capped=True), samples // 3)
            capped_per_claim = (db.statements - before) / (samples // 3)
            queue.remove_limit("job-1")
            rows.append({"engine": engine, "pending": depth, "finished": depth, "batch": 10,
                         "p50_ms": round(statistics.median(timings), 3),
                         "p99_ms": round(timings[int(len(timings) * 0.99) - 1], 3),
                         "round_trips_per_claim": round(per_claim, 2),
                         "disk_reads_per_claim": "n/a" if reads is None else round(reads, 1),
                         "capped_p50_ms": round(statistics.median(capped), 3),
                         "capped_p99_ms": round(capped[int(len(capped) * 0.99) - 1], 3),
                         "capped_round_trips": round(capped_per_claim, 2),
                         "fill_s": round(fill_seconds, 1)})
    base, capped_base = rows[0]["p50_ms"], rows[0]["capped_p50_ms"]
    for row in rows:
        row["p50_vs_10k"] = f"{row['p50_ms'] / base:.2f}x"
        row["capped_vs_10k"] = f"{row['capped_p50_ms'] / capped_base:.2f}x"
    last = rows[-1]
    last["meets_target"] = "yes" if last["p50_ms"] <= TARGET_DEPTH_RATIO * base else "NO"
    return rows


def rate_latency(engine: str, url: str, depth: int = RATE_DEPTH, samples: int = LATENCY_SAMPLES,
                 rounds: int = RATE_ROUNDS) -> list[dict]:
    """claim_batch(10) as the dispatcher calls it (the capped path whenever any limit is set) with `depth` due rows
    of ten jobs, each holding one of 100 concurrency keys: no limits; one cap (the capped path's own cost, for
    reference); one rate; 100 rates (the ten jobs and 90 others); one key cap; 100 key caps (every key); and, with no
    limits, the claim in fair-share order, the rows spread over 1,000 fairness keys with their turns as each key's
    rows would have taken them. The limits never bind (a million): each claim counts the capped keys' rows in flight,
    and the rated jobs' starts, which pile up over the run as they would under a high rate. The cases take turns, `rounds` times (samples / rounds
    claims each turn): whatever else loads the machine meanwhile falls on every case alike, not on whichever one
    ran while it did."""
    fair_case = f"{FAIRNESS_KEYS:,} fairness keys"
    cases = (("no limits", [], [], []), ("one cap", ["job-1"], [], []), ("one rate", [], ["job-1"], []),
             ("100 rates", [], [f"job-{n}" for n in range(100)], []), ("one key cap", [], [], ["key-1"]),
             ("100 key caps", [], [], [f"key-{n}" for n in range(100)]), (fair_case, [], [], []))
    timings: dict[str, list[float]] = {name: [] for name, _, _, _ in cases}
    statements: Counter[str] = Counter()
    with _bulk(url) as filler, Database(parse_database_url(url), application_name="jd-bench") as db:
        queue = Queue(db, lease_seconds=300)
        fill(filler, pending=depth, finished=depth)
        # Every key's rows take consecutive turns, as the INSERT trigger gives them (row n of a key: turn n).
        filler.run("UPDATE jenkins_jobs_queue SET concurrency_key = CONCAT('key-', id % 100), "
                   f"fairness_key = CONCAT('team-', id % {FAIRNESS_KEYS}), fair_round = FLOOR(id / {FAIRNESS_KEYS}) "
                   "WHERE status = 'pending'")
        for _ in range(rounds):
            for name, capped_jobs, rated_jobs, capped_keys in cases:
                for job in capped_jobs:
                    queue.set_limit(job, 1_000_000)
                for job in rated_jobs:
                    queue.set_rate(job, 1_000_000)
                for key in capped_keys:
                    queue.set_key_limit(key, 1_000_000)
                capped, fair = queue.claim_plan(None).caps, name == fair_case
                for _ in range(3):  # warm the plan cache and the buffers
                    queue.claim_batch(10, capped=capped, fair=fair)
                before = db.statements
                timings[name] += _timed(lambda: queue.claim_batch(10, capped=capped, fair=fair),  # noqa: B023
                                        samples // rounds)
                statements[name] += db.statements - before
                for job in capped_jobs:
                    queue.remove_limit(job)
                for job in rated_jobs:
                    queue.remove_rate(job)
                for key in capped_keys:
                    queue.remove_key_limit(key)
    rows, base = [], None
    for name, case in timings.items():
        case.sort()
        p50 = statistics.median(case)
        base = base or p50
        rows.append({"engine": engine, "pending": depth, "limits": name, "p50_ms": round(p50, 3),
                     "p99_ms": round(case[int(len(case) * 0.99) - 1], 3),
                     "round_trips_per_claim": round(statements[name] / len(case), 2),
                     "vs_no_limits": f"{p50 / base:.2f}x"})
    one_rate = next(r for r in rows if r["limits"] == "one rate")
    one_rate["meets_target"] = "yes" if one_rate["p50_ms"] <= TARGET_RATE_RATIO * base else "NO"
    for row in rows:
        if "key cap" in row["limits"]:
            row["meets_target"] = "yes" if row["p50_ms"] <= TARGET_KEY_CAP_RATIO * base else "NO"
        if row["limits"] == fair_case:
            row["meets_target"] = "yes" if row["p50_ms"] <= TARGET_FAIR_RATIO * base else "NO"
    return rows


def starvation(engine: str, url: str, backlog: int = STARVATION_BACKLOG, batch: int = 10) -> list[dict]:
    """Fair share's promise: `backlog` rows of team-a wait (three batches of them already claimed and settled), then
    two rows of team-b arrive; batches of `batch` are claimed as a pass claims them (in fair-share order when the
    pass finds a fairness key) and settled, until both of team-b's are claimed. How many of team-a's were claimed
    after team-b's arrival and before each of its rows: at most one batch before the first is the target."""
    with _bulk(url) as filler, Database(parse_database_url(url), application_name="jd-bench") as db:
        queue = Queue(db, lease_seconds=300)
        empty_queue(filler)
        add_pending(filler, backlog, DEFAULT_CONTROLLER, job_prefix="job-")
        # Inserted without a key, they took the turns of one group; as team-a's they keep them. One priority: fair
        # share is among rows of the same priority (a higher one goes first, whatever its group).
        filler.run("UPDATE jenkins_jobs_queue SET fairness_key = 'team-a', priority = 0")

        def claim_and_settle() -> list[str]:
            plan = queue.claim_plan(None)
            jobs = queue.claim_batch(batch, capped=plan.caps, fair=plan.fair)
            for job in jobs:
                queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
            return [("b" if job.id in team_b else "a") for job in jobs]

        team_b: set[int] = set()
        for _ in range(3):
            claim_and_settle()
        team_b = {queue.enqueue("job-1", fairness_key="team-b").id for _ in range(2)}
        order: list[str] = []
        while order.count("b") < 2:
            taken = claim_and_settle()
            if not taken:
                break
            order += taken
    first = order.index("b") if "b" in order else len(order)
    last = len(order) - 1 - order[::-1].index("b") if "b" in order else len(order)
    return [{"engine": engine, "waiting_a": backlog, "batch": batch, "a_before_first_b": first,
             "a_before_last_b": order[:last].count("a"),
             "meets_target": "yes" if first <= batch else "NO"}]


def stats_latency(engine: str, url: str, points=STATS_POINTS, samples: int = 20) -> list[dict]:
    """The operator's reads and the dispatcher's gauges must not read the finished history, and per-job figures
    must not cost a row lookup per waiting row: time them with a long history, then with a deep backlog."""
    rows = []
    with _bulk(url) as filler, Database(parse_database_url(url), application_name="jd-bench") as db:
        queue = Queue(db, lease_seconds=300)
        for pending, finished in points:
            fill(filler, pending=pending, finished=finished)
            queue.claim_batch(100)
            for name, call in (("stats", queue.stats), ("gauges", queue.gauges),
                               ("stats_per_job", queue.stats_per_job)):
                call()
                timings = _timed(call, samples)
                rows.append({"engine": engine, "query": name, "pending": pending, "finished": finished,
                             "p50_ms": round(statistics.median(timings), 2), "max_ms": round(max(timings), 2)})
    return rows


def _notes(throughput_rows: list[dict], latency_rows: list[dict], probes: dict[str, str], memory: dict[str, str],
           missing: dict[str, str]) -> list[dict]:
    """The issue's targets per engine, and what the seed's loop does on each, in words."""
    notes = [{"engine": e, "note": f"not measured: {why}"} for e, why in missing.items()]
    for engine in dict.fromkeys(r["engine"] for r in throughput_rows):
        at4 = {r["pattern"]: r for r in throughput_rows if r["engine"] == engine and r["workers"] == 4}
        seed, batch = at4["seed: 1 job/transaction"], at4["batch 100, settle_many"]
        ratio = batch["jobs_per_s"] / max(seed["jobs_per_s"], 1)
        notes.append({"engine": engine, "note": f"batch 100 vs seed at 4 workers: {ratio:.1f}x (target >= "
                      f"{TARGET_RATIO_AT_4:g}x: {'met' if ratio >= TARGET_RATIO_AT_4 else 'NOT met'})"})
        seeds = [r for r in throughput_rows if r["engine"] == engine and r["pattern"].startswith("seed")]
        probe = probes.get(engine)
        if probe:
            empties = ", ".join(f"{r['empty_claims']} at {r['workers']}" for r in seeds if r["workers"] > 1)
            notes.append({"engine": engine, "note": f"seed's claim: {probe}; its empty claims while due rows "
                          f"remained (workers): {empties}"})
        depth = [r for r in latency_rows if r["engine"] == engine]
        if depth:
            last = depth[-1]
            notes.append({"engine": engine, "note": (
                f"claim p50 at {last['pending']:,} pending: {last['p50_vs_10k']} of the 10k figure "
                f"(target <= {TARGET_DEPTH_RATIO:g}x: {'met' if last['meets_target'] == 'yes' else 'NOT met'}); "
                f"capped path {last['capped_vs_10k']}; server: {memory.get(engine, '?')}"
                + ("; disk_reads_per_claim is the server-wide Innodb_buffer_pool_reads delta: at depth the rows "
                   "a claim changes sit in index pages the pool no longer holds" if "InnoDB" in memory.get(engine, "")
                   else ""))})
    return notes


def run(depths=DEPTHS, jobs: int = JOBS) -> dict[str, list[dict]]:
    """Every queue measure on every engine that answers; one table per measure."""
    tput, latency, rates, starved, stats, probes, memory = [], [], [], [], [], {}, {}
    with scratch_databases("jd_bench") as (urls, missing):
        for url in urls.values():
            with Database(parse_database_url(url)) as db:
                engine = server_name(db)
                memory[engine] = server_memory(db)
            probes[engine] = seed_probe(url, jobs)
            tput += throughput(engine, url, jobs)
            latency += claim_latency(engine, url, depths)
            rates += rate_latency(engine, url, max(depths))
            starved += starvation(engine, url)
            stats += stats_latency(engine, url)
    return {
        f"claim + settle throughput (no-op work; {jobs:,} due rows, at most {TIME_BOX_SECONDS:g} s per run)": tput,
        "claim latency, batch of 10 (as many finished rows as pending)": latency,
        "claim latency with rate limits, batch of 10 (the dispatcher's path: capped when any limit is set)": rates,
        f"fair share: {STARVATION_BACKLOG:,} rows of team-a waiting, then 2 of team-b (claims of 10)": starved,
        "stats, gauges and stats_per_job: a long finished history, then a deep backlog": stats,
        "queue benchmarks: targets and notes": _notes(tput, latency, probes, memory, missing),
    }


if __name__ == "__main__":
    from benchmarks.report import print_tables

    print_tables(run())
