"""Queue benchmarks: claim + settle throughput (seed pattern vs batch claim) and claim latency at depth.

Run with `make bench` (all benchmarks) or `python -m benchmarks.bench_queue`.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections import Counter

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from jenkins_dispatch.store.queue import Queue, Settlement
from tests.pg_server import postgres_server, scratch_database

CONTEXT = multiprocessing.get_context("fork")
JOBS = 20_000
WORKERS = (1, 2, 4, 8)

# The seed's dispatcher, as the issue describes it: one job per transaction.
SEED_CLAIM = """
SELECT id FROM jenkins_jobs_queue WHERE status = 'pending' AND scheduled_at <= now()
ORDER BY priority DESC, scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED
"""
SEED_MARK = "UPDATE jenkins_jobs_queue SET status = 'processing', dispatch_id = :d, lease_expires_at = now() WHERE id = :id"
SEED_DONE = "UPDATE jenkins_jobs_queue SET status = 'completed', finished_at = now() WHERE id = :id"


def _seed_worker(url, out):
    ids = []
    with Database(parse_database_url(url)) as db:
        while True:
            with db.transaction():
                rows = db.run(SEED_CLAIM)
                if not rows:
                    break
                job_id = rows[0]["id"]
                db.run(SEED_MARK, id=job_id, d=f"seed-{job_id}")
            db.run(SEED_DONE, id=job_id)
            ids.append(job_id)
    out.put(ids)


def _batch_worker(url, batch, out, per_row=False):
    """Claim a batch, then settle it: in one statement (as the dispatcher records a batch), or one
    statement per job (as webhook callbacks arrive)."""
    ids = []
    with Database(parse_database_url(url)) as db:
        queue = Queue(db, lease_seconds=300)
        while jobs := queue.claim_batch(batch):
            if per_row:
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
            else:
                queue.settle_many([Settlement(j.id, j.dispatch_id, "completed", "SUCCESS") for j in jobs])
            ids.extend(j.id for j in jobs)
    out.put(ids)


def _fill(db: Database, pending: int, finished: int = 0) -> None:
    db.run("TRUNCATE jenkins_job_events, jenkins_jobs_queue, jenkins_job_limits RESTART IDENTITY")
    if finished:
        db.run(
            "INSERT INTO jenkins_jobs_queue (job_name, parameters, status, attempts, dispatch_id, jenkins_result, "
            "finished_at, scheduled_at) SELECT 'job-' || (g % 10), '{}', 'completed', 1, 'old-' || g, 'SUCCESS', "
            "now() - interval '1 day', now() - interval '1 day' FROM generate_series(1, :n) g", n=finished)
    db.run(
        "INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at) "
        "SELECT 'job-' || (g % 10), jsonb_build_object('n', g), g % 3, now() - make_interval(secs => g % 1000) "
        "FROM generate_series(1, :n) g", n=pending)
    db.run("VACUUM ANALYZE jenkins_jobs_queue")


def throughput(url: str, jobs: int = JOBS) -> list[dict]:
    rows = []
    with Database(parse_database_url(url)) as db:
        for workers in WORKERS:
            patterns = [("seed: 1 job/transaction", _seed_worker, ()),
                        ("batch 10, settle_many", _batch_worker, (10,)),
                        ("batch 100, settle_many", _batch_worker, (100,))]
            if workers == 4:
                patterns.append(("batch 100, settle per job", _batch_worker, (100, True)))
            for label, target, extra in patterns:
                _fill(db, jobs)
                out = CONTEXT.Queue()
                procs = [CONTEXT.Process(target=target, args=(url, *extra[:1], out, *extra[1:])) for _ in range(workers)]
                started = time.perf_counter()
                for p in procs:
                    p.start()
                results = [out.get(timeout=600) for _ in procs]
                elapsed = time.perf_counter() - started
                for p in procs:
                    p.join()
                counts = Counter(i for ids in results for i in ids)
                correct = len(counts) == jobs and set(counts.values()) == {1}
                rows.append({"pattern": label, "workers": workers, "jobs": jobs,
                             "jobs_per_s": round(jobs / elapsed), "seconds": round(elapsed, 2),
                             "exactly_once": "yes" if correct else f"NO ({len(counts)} distinct)"})
    for row in rows:
        seed = next(r for r in rows if r["workers"] == row["workers"] and r["pattern"].startswith("seed"))
        row["vs_seed"] = f"{row['jobs_per_s'] / seed['jobs_per_s']:.1f}x"
    return rows


def claim_latency(url: str, depths=(10_000, 100_000, 1_000_000), samples: int = 300) -> list[dict]:
    rows = []
    with Database(parse_database_url(url)) as db:
        queue = Queue(db, lease_seconds=300)
        for depth in depths:
            _fill(db, pending=depth, finished=depth)
            for _ in range(20):  # warm the plan cache and the buffers
                queue.claim_batch(10)
            timings = []
            for _ in range(samples):
                started = time.perf_counter()
                claimed = queue.claim_batch(10)
                timings.append((time.perf_counter() - started) * 1000)
                assert len(claimed) == 10
            timings.sort()
            # The capped path: a per-job cap in force (lock, then the capped claim; 4 round trips).
            queue.set_limit("job-1", 1_000_000)
            capped = []
            for _ in range(samples // 3):
                started = time.perf_counter()
                queue.claim_batch(10, capped=True)
                capped.append((time.perf_counter() - started) * 1000)
            queue.remove_limit("job-1")
            rows.append({"pending": depth, "finished": depth, "batch": 10,
                         "p50_ms": round(statistics.median(timings), 3),
                         "p99_ms": round(timings[int(len(timings) * 0.99) - 1], 3),
                         "capped_p50_ms": round(statistics.median(capped), 3)})
    base = rows[0]["p50_ms"]
    for row in rows:
        row["p50_vs_10k"] = f"{row['p50_ms'] / base:.2f}x"
    return rows


def stats_latency(url: str, finished: int = 1_000_000, pending: int = 10_000, samples: int = 20) -> list[dict]:
    """`stats` must not read the finished history: time it with a long one."""
    rows = []
    with Database(parse_database_url(url)) as db:
        queue = Queue(db, lease_seconds=300)
        _fill(db, pending=pending, finished=finished)
        queue.claim_batch(100)
        for name, call in (("stats", queue.stats), ("stats_per_job", queue.stats_per_job)):
            call()
            timings = []
            for _ in range(samples):
                started = time.perf_counter()
                call()
                timings.append((time.perf_counter() - started) * 1000)
            rows.append({"query": name, "pending": pending, "finished": finished,
                         "p50_ms": round(statistics.median(timings), 2), "max_ms": round(max(timings), 2)})
    return rows


def run(depths=(10_000, 100_000, 1_000_000), jobs: int = JOBS) -> dict[str, list[dict]]:
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_bench") as url:
        with Database(parse_database_url(url)) as db:
            migrate(db)
        return {
            "claim + settle throughput (no-op work)": throughput(url, jobs),
            "claim latency, batch of 10": claim_latency(url, depths),
            "stats with a long finished history": stats_latency(url),
        }


if __name__ == "__main__":
    from benchmarks.report import print_tables

    print_tables(run())
