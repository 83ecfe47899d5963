"""Exactly once and caps, proven with several real processes (or sessions on threads) racing on the real database."""

import random
import threading
import time
from collections import Counter

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.queue import EnqueueResult, Settlement

from ..child_processes import CHILDREN, drained, start_together, stop_all
from ..dispatch_helpers import wait_for
from ..engines import numbers, row_lock_waiters, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines


def _claim_until_empty(url, batch, results):
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            claimed = []
            while jobs := queue.claim_batch(batch):
                claimed.extend(j.id for j in jobs)
            results.put(claimed)
    except Exception as exc:  # told to the test at once, not found as a 120 s wait for a result
        results.put(f"{type(exc).__name__}: {exc}")


def _race(db, database_url, rows: int, worker, batch: int, processes: int) -> list[list[int]]:
    """``rows`` pending rows of seven jobs, then ``processes`` spawned processes running ``worker(url, batch,
    results)`` at once; the ids each one reported. A worker's failure fails the test with its one line."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) "
           f"SELECT CONCAT('job-', g % 7), {sql_for(db, postgresql='jsonb_build_object', mysql='JSON_OBJECT')}('n', g) "
           f"FROM {numbers(db, rows)}")
    results = CHILDREN.Queue()
    workers = start_together(worker, [(database_url, batch, results)] * processes)
    per_worker = [results.get(timeout=120) for _ in workers]
    stop_all(workers, timeout=30)
    assert [r for r in per_worker if isinstance(r, str)] == [], "a worker failed"
    return per_worker


def test_eight_processes_claim_twenty_thousand_rows_exactly_once(db, database_url):
    per_worker = _race(db, database_url, 20000, _claim_until_empty, batch=50, processes=8)
    counts = Counter(i for ids in per_worker for i in ids)
    assert len(counts) == 20000 and set(counts.values()) == {1}
    assert sum(1 for ids in per_worker if ids) >= 2, "the race needs at least two workers that got rows"
    # The database agrees: every row processing, one 'claimed' event each.
    claimed_events = db.run("SELECT job_id, count(*) AS n FROM jenkins_job_events WHERE event = 'claimed' GROUP BY job_id")
    assert len(claimed_events) == 20000 and {r["n"] for r in claimed_events} == {1}
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status <> 'processing'")[0]["n"] == 0


CAPS = {"deploy": 3, "migrate": 1, "test": 5}
GLOBAL_CAP = 8


def _record_peaks(peaks: Counter, counts: dict[str, int]) -> None:
    for name, n in counts.items():
        peaks[name] = max(peaks[name], n)
    peaks["*"] = max(peaks["*"], sum(counts.values()))


def _claim_work_settle(url, seed, done, errors, reported_peaks):
    rng = random.Random(seed)
    peaks: Counter = Counter()
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while not done.is_set():
                jobs = queue.claim_batch(4, capped=True, max_in_flight=GLOBAL_CAP)
                if not jobs:
                    time.sleep(0.002)
                    continue
                # Counted right after a claim, while its rows are held: that is when the caps are reached, so the
                # proof of pressure does not hang on one sampler being scheduled at the right millisecond.
                _record_peaks(peaks, queue.in_flight_counts())
                time.sleep(rng.uniform(0.005, 0.02))  # held a while: claims must meet the caps
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    except Exception as exc:  # a claimer that died would only show as lower peaks
        errors.put(f"{type(exc).__name__}: {exc}")
    reported_peaks.put(dict(peaks))


def test_caps_hold_under_eight_concurrent_claimers(db, database_url):
    db.run("INSERT INTO jenkins_jobs_queue (job_name) "
           "SELECT CASE g % 4 WHEN 0 THEN 'deploy' WHEN 1 THEN 'migrate' WHEN 2 THEN 'test' ELSE 'lint' END "
           f"FROM {numbers(db, 600)}")
    queue = Queue(db)
    for name, cap in CAPS.items():
        queue.set_limit(name, cap)

    done = CHILDREN.Event()
    errors = CHILDREN.Queue()
    reported_peaks = CHILDREN.Queue()
    workers = start_together(_claim_work_settle, [(database_url, s, done, errors, reported_peaks) for s in range(8)])
    peaks: Counter = Counter()
    samples = 0
    try:
        with Database(parse_database_url(database_url)) as sampler_db:
            sampler = Queue(sampler_db)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                counts = sampler.in_flight_counts()
                samples += 1
                _record_peaks(peaks, counts)
                if sampler.stats()["pending"] == 0 and not counts:
                    break
        done.set()
        for _ in workers:
            for name, n in reported_peaks.get(timeout=30).items():
                peaks[name] = max(peaks[name], n)
    finally:  # the claimers loop until told: tell them even when sampling failed
        done.set()
        stop_all(workers, timeout=30)
    assert drained(errors) == [], "a claimer failed"
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status = 'completed'")[0]["n"] == 600
    for name, cap in CAPS.items():
        assert peaks[name] <= cap, f"{name} peaked at {peaks[name]} over its cap {cap}"
    assert peaks["*"] <= GLOBAL_CAP
    # The caps were actually under pressure, so the assertions above could have failed.
    assert peaks["*"] == GLOBAL_CAP, (peaks, samples)
    assert any(peaks[name] == cap for name, cap in CAPS.items()), (peaks, samples)


def _claim_and_fail_in_batches(url, batch, results):
    """A dispatcher whose Jenkins refuses every trigger for good: claims a batch, fails it in one statement
    (settle_many, as Dispatcher does with its failures), again until nothing is left."""
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            failed = []
            while jobs := queue.claim_batch(batch):
                failed += sorted(queue.settle_many([Settlement(j.id, j.dispatch_id, "failed", error="HTTP 400")
                                                    for j in jobs]))
            results.put(failed)
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_dispatchers_failing_batches_at_once_never_deadlock(db, database_url):
    """Each settled row counts itself into the page's aggregates (a row per five minutes and shard): batches of
    rows of every shard, settled side by side, must not wait on each other in a cycle (a deadlock victim's
    whole batch used to fail with 'deadlock detected', its rows left processing until their leases ran out)."""
    per_worker = _race(db, database_url, 6000, _claim_and_fail_in_batches, batch=16, processes=6)
    counts = Counter(i for ids in per_worker for i in ids)
    assert len(counts) == 6000 and set(counts.values()) == {1}
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status <> 'failed'")[0]["n"] == 0
    assert db.run("SELECT sum(failed) AS n FROM jenkins_job_stats")[0]["n"] == 6000


def test_an_enqueue_waiting_on_the_same_dedupe_key_answers_with_the_row_that_committed(db, database_url):
    """Two sessions enqueue one dedupe key at once: the second waits on the first's uncommitted row and, once it
    commits, answers with that row (created: False), never a second one. On PostgreSQL the waiting statement's
    snapshot predates that commit, so it reads the row again (find_open_by_dedupe_key); MySQL's block finds it in
    its duplicate-key update."""
    url = parse_database_url(database_url)
    answers: list = []
    with Database(url, application_name="jd-tests-first") as first_db, \
            Database(url, application_name="jd-tests-second") as second_db:

        def enqueue_the_same_key() -> None:
            try:
                answers.append(Queue(second_db).enqueue("deploy", {"n": 2}, dedupe_key="release-7"))
            except Exception as exc:  # noqa: BLE001 (the test reports it)
                answers.append(exc)

        second = threading.Thread(target=enqueue_the_same_key)
        with first_db.transaction():
            first = Queue(first_db).enqueue("deploy", {"n": 1}, dedupe_key="release-7")
            second.start()
            waited = wait_for(lambda: row_lock_waiters(db, application_name="jd-tests-second") == 1, timeout=20)
        second.join(timeout=30)
    assert waited, f"the second enqueue never waited on the first: {answers}"
    assert first.created and answers == [EnqueueResult(id=first.id, created=False)]
    rows = db.run("SELECT id, parameters FROM jenkins_jobs_queue")
    assert [r["id"] for r in rows] == [first.id]
    assert [e["event"] for e in Queue(db).events(first.id)] == ["enqueued"]
