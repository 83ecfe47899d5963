"""The time page's aggregates (migrations 0012/0009_job_stats.sql), on each engine: after random finishes through every
path that finishes a row, they hold exactly what a scan of the finished rows counts; pruning leaves them as they
were; an operator's retry does not take back the outcome it undid; the gauges keep the queue's depth."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from jenkins_dispatch.operating.timeline import bin_of, time_on_the_page
from jenkins_dispatch.store.queue import Settlement

pytestmark = pytest.mark.both_engines

WEEK = 7 * 86_400


def scan(queue, db) -> tuple[dict[int, dict[str, int]], dict[str, Counter]]:
    """What a scan of the finished rows counts: per five minutes (seconds since 1970) the outcomes and the builds
    started, and the histogram bins of queue wait and build duration."""
    buckets: dict[int, Counter] = {}
    bins = {"wait": Counter(), "build": Counter()}
    for r in db.run("SELECT id FROM jenkins_jobs_queue WHERE finished_at IS NOT NULL"):
        job = queue.get(r["id"])
        finished = int(job["finished_at"].timestamp()) // 300 * 300
        buckets.setdefault(finished, Counter())[job["status"]] += 1
        if job["started_at"] is not None:
            started = int(job["started_at"].timestamp()) // 300 * 300
            buckets.setdefault(started, Counter())["started"] += 1
            bins["wait"][bin_of(max((job["started_at"] - job["created_at"]).total_seconds(), 0))] += 1
            bins["build"][bin_of(max((job["finished_at"] - job["started_at"]).total_seconds(), 0))] += 1
    return {at: dict(c) for at, c in buckets.items()}, bins


def aggregated(queue) -> tuple[dict[int, dict[str, int]], dict[str, Counter]]:
    buckets = {}
    for r in queue.stats_per_bucket(WEEK, 300):
        counts = {k: int(r[k]) for k in ("started", "completed", "failed", "cancelled") if int(r[k])}
        if counts:
            buckets[int(r["bucket_epoch"])] = counts
    return buckets, {metric: Counter(found) for metric, found in queue.timing_bins(WEEK).items()}


def claim_one(queue, job_name, rng, db, **enqueue):
    """A claimed row of ``job_name``; created up to 3 h ago, maybe started up to 2 h ago (other buckets)."""
    job_id = queue.enqueue(job_name, {}, **enqueue).id
    db.run("UPDATE jenkins_jobs_queue SET created_at = created_at - make_interval(secs => :s) WHERE id = :id"
           if db.dialect == "postgresql" else
           "UPDATE jenkins_jobs_queue SET created_at = created_at - INTERVAL :s SECOND WHERE id = :id",
           id=job_id, s=rng.randint(7300, 10_800))
    claimed = queue.claim_batch(1)
    assert [c.id for c in claimed] == [job_id]
    return claimed[0]


def start(queue, db, claimed, rng):
    queue.record_progress(claimed.id, claimed.dispatch_id, build_number=1, started=True)
    db.run("UPDATE jenkins_jobs_queue SET started_at = started_at - make_interval(secs => :s) WHERE id = :id"
           if db.dialect == "postgresql" else
           "UPDATE jenkins_jobs_queue SET started_at = started_at - INTERVAL :s SECOND WHERE id = :id",
           id=claimed.id, s=rng.uniform(0, 7200))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_aggregates_equal_a_scan_after_random_finishes_by_every_path(queue, db, seed):
    rng = random.Random(seed)
    batch: list[Settlement] = []
    for n in range(40):
        path = rng.choice(["settle", "settle", "settle_many", "settle_many", "cancel_pending", "retry_later",
                           "release_cancelled", "unfinished"])
        job = f"job-{rng.randint(1, 3)}"
        if path == "cancel_pending":
            assert queue.cancel_pending(queue.enqueue(job, {}).id)
            continue
        claimed = claim_one(queue, job, rng, db, max_attempts=1)
        if rng.random() < .8 and path != "release_cancelled":
            start(queue, db, claimed, rng)
        status = rng.choice(["completed", "completed", "failed", "cancelled"])
        if path == "settle":
            assert queue.settle(claimed.id, claimed.dispatch_id, status)
        elif path == "settle_many":
            batch.append(Settlement(claimed.id, claimed.dispatch_id, status))
        elif path == "retry_later":  # its one attempt spent: failed
            assert queue.retry_later(claimed.id, claimed.dispatch_id, 5, "Jenkins said 500") == "failed"
        elif path == "release_cancelled":
            assert queue.request_cancel(claimed.id, claimed.dispatch_id, "not wanted")
            assert queue.release(claimed.id, claimed.dispatch_id, "never sent")
        if len(batch) >= 3 or (batch and n == 39):
            assert len(queue.settle_many(batch)) == len(batch)
            batch = []
    assert aggregated(queue) == scan(queue, db)


def test_pruning_old_rows_leaves_past_buckets_as_they_were(queue, db):
    rng = random.Random(7)
    for status in ("completed", "failed", "completed"):
        claimed = claim_one(queue, "deploy", rng, db)
        start(queue, db, claimed, rng)
        queue.settle(claimed.id, claimed.dispatch_id, status)
    before = aggregated(queue)
    assert before == scan(queue, db)
    db.run("UPDATE jenkins_jobs_queue SET finished_at = finished_at - "
           + ("interval '40 days'" if db.dialect == "postgresql" else "INTERVAL 40 DAY"))
    assert queue.prune(30) == 3
    assert aggregated(queue) == before


AGGREGATES = {"jenkins_job_stats": "shard", "jenkins_job_stat_bins": "metric, bin, shard", "jenkins_queue_depth": ""}


def aggregate_rows(db) -> dict[str, list[tuple]]:
    """Every row of the three aggregate tables, bucket starts as whole days before now (0 = today's buckets)."""
    found = {}
    for table, key in AGGREGATES.items():
        age = ("CAST(floor(extract(epoch FROM now() - bucket_start) / 86400) AS int)" if db.dialect == "postgresql"
               else "TIMESTAMPDIFF(SECOND, bucket_start, NOW(6)) DIV 86400")
        found[table] = sorted(tuple(r.values()) for r in db.run(
            f"SELECT {age} AS age_days{', ' + key if key else ''} FROM {table}"))
    return found


def copy_aggregates_back(db, days: int) -> None:
    """A copy of every aggregate row ``days`` days older (as the write path left them then)."""
    back = f"interval '{days} days'" if db.dialect == "postgresql" else f"INTERVAL {days} DAY"
    recent = "now() - interval '1 day'" if db.dialect == "postgresql" else "NOW(6) - INTERVAL 1 DAY"
    # Each through a derived table: MySQL reads no table it inserts into otherwise.
    db.run(f"INSERT INTO jenkins_job_stats (bucket_start, shard, completed, failed, cancelled, started, wait_n, "
           f"wait_seconds, build_seconds) SELECT * FROM (SELECT bucket_start - {back} AS b, shard, completed, failed, "
           f"cancelled, started, wait_n, wait_seconds, build_seconds FROM jenkins_job_stats "
           f"WHERE bucket_start > {recent}) copied")
    db.run(f"INSERT INTO jenkins_job_stat_bins (metric, bucket_start, bin, shard, n) SELECT * FROM ("
           f"SELECT metric, bucket_start - {back} AS b, bin, shard, n FROM jenkins_job_stat_bins "
           f"WHERE bucket_start > {recent}) copied")
    db.run(f"INSERT INTO jenkins_queue_depth (bucket_start, pending_max, processing_max) SELECT * FROM ("
           f"SELECT bucket_start - {back} AS b, pending_max, processing_max FROM jenkins_queue_depth "
           f"WHERE bucket_start > {recent}) copied")


def test_pruning_the_aggregates_drops_buckets_older_than_the_page_shows_and_keeps_the_rest(queue, db):
    rng = random.Random(10)
    for status in ("completed", "failed", "completed"):
        claimed = claim_one(queue, "deploy", rng, db)
        start(queue, db, claimed, rng)
        queue.settle(claimed.id, claimed.dispatch_id, status)
    queue.gauges()
    copy_aggregates_back(db, 6)  # inside the week the page shows: kept
    copy_aggregates_back(db, 9)  # older than the week: dropped
    before = aggregate_rows(db)
    assert {age for rows in before.values() for (age, *_) in rows} >= {0, 6, 9}
    week_before = time_on_the_page(queue)["charts"][-1].totals  # the week's chart: today's and day 6's

    deleted = queue.prune_aggregates(WEEK)

    after = aggregate_rows(db)
    assert after == {table: [r for r in rows if r[0] < 7] for table, rows in before.items()}
    assert deleted == sum(len(rows) for rows in before.values()) - sum(len(rows) for rows in after.values()) > 0
    assert time_on_the_page(queue)["charts"][-1].totals == week_before
    assert week_before["completed"] == 4 and week_before["failed"] == 2
    assert queue.prune_aggregates(WEEK) == 0


def test_recent_timings_are_the_latest_finished_rows_per_job_spelled_exactly(queue, db):
    rng = random.Random(11)
    for job, started in (("deploy", True), ("deploy", False), ("Deploy", True), ("build", True), ("old", True)):
        claimed = claim_one(queue, job, rng, db)
        if started:
            start(queue, db, claimed, rng)
        queue.settle(claimed.id, claimed.dispatch_id, "completed")
    db.run("UPDATE jenkins_jobs_queue SET finished_at = finished_at - "
           + ("interval '1 hour'" if db.dialect == "postgresql" else "INTERVAL 1 HOUR") + " WHERE job_name = 'old'")
    found = {r["job_name"]: r for r in queue.recent_timings(4)}  # "old" finished first: outside the latest 4
    assert sorted(found) == ["Deploy", "build", "deploy"]
    assert [found[j]["finished"] for j in ("Deploy", "build", "deploy")] == [1, 1, 2]
    for job, r in found.items():
        jobs = [j for j in db.run("SELECT job_name, created_at, started_at FROM jenkins_jobs_queue")
                if j["job_name"] == job]  # exactly: MySQL's = ignores case
        expected = sorted((j["started_at"] - j["created_at"]).total_seconds() if j["started_at"] else None
                          for j in jobs if j["started_at"]) + [None] * sum(1 for j in jobs if not j["started_at"])
        assert sorted(w for w in r["waits"] if w is not None) + [w for w in r["waits"] if w is None] \
            == pytest.approx(expected)
        assert len(r["builds"]) == r["finished"]


def test_a_retried_row_keeps_its_earlier_outcome_and_adds_its_next(queue, db):
    rng = random.Random(8)
    claimed = claim_one(queue, "deploy", rng, db)
    queue.settle(claimed.id, claimed.dispatch_id, "failed")
    queue.retry_final(claimed.id)
    again = queue.claim_batch(1)[0]
    queue.settle(again.id, again.dispatch_id, "completed")
    totals = Counter()
    for counts in aggregated(queue)[0].values():
        totals.update(counts)
    assert totals == Counter(failed=1, completed=1)


def test_the_gauges_keep_the_most_pending_and_processing_per_five_minutes(queue, db):
    for _ in range(3):
        queue.enqueue("deploy", {})
    queue.gauges()
    queue.claim_batch(2)
    queue.gauges()
    rows = queue.depth_per_bucket(3600, 300)
    assert [(int(r["pending"]), int(r["processing"])) for r in rows][-1] == (3, 2)
    assert sum(1 for _ in rows) in (1, 2)  # a pass across a bucket's edge writes two


def test_the_aggregates_do_not_count_a_row_twice_nor_an_update_of_a_final_row(queue, db):
    rng = random.Random(9)
    claimed = claim_one(queue, "deploy", rng, db)
    queue.settle(claimed.id, claimed.dispatch_id, "completed")
    assert not queue.settle(claimed.id, claimed.dispatch_id, "failed")  # fenced out: changes nothing
    db.run("UPDATE jenkins_jobs_queue SET updated_at = updated_at, finished_at = finished_at + "
           + ("interval '1 second'" if db.dialect == "postgresql" else "INTERVAL 1 SECOND"))
    totals = Counter()
    for counts in aggregated(queue)[0].values():
        totals.update(counts)
    assert totals == Counter(completed=1)
