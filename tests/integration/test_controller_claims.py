"""A controller's claim never reads another controller's backlog (issue 23): while one controller is down its
pending rows pile up, and the others' claims must cost what they cost without them (bench_controllers times it).

Counted, not timed: the rows the server examined for the claim. MySQL/MariaDB: the session's Handler_read_*
counters around the claim itself. PostgreSQL: the claim statement executed under EXPLAIN (ANALYZE), rolled back:
the rows each scan of the queue returned or removed by a filter. The backlog's rows come first in claim order
(a higher priority, due earlier): a claim that walked the index ignoring the controller would meet them first.
"""

from __future__ import annotations

import pytest

from jenkins_dispatch.store.statements import load

from ..engines import numbers, sql_for

pytestmark = pytest.mark.both_engines

BACKLOG = 5000
ROWS_OF_B = 10


def _add(db, controller: str, count: int, priority: int) -> None:
    db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, controller, "
                                  "scheduled_at) SELECT 'job-' || (g % 10), '{}', :priority, :controller, "
                                  f"now() - interval '1 hour' FROM {numbers(db, count)}",
                   mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, controller, scheduled_at) "
                         "SELECT CONCAT('job-', g % 10), '{}', :priority, :controller, NOW(6) - INTERVAL 1 HOUR "
                         f"FROM {numbers(db, count)}"),
           priority=priority, controller=controller)
    db.run(sql_for(db, postgresql="ANALYZE jenkins_jobs_queue", mysql="ANALYZE TABLE jenkins_jobs_queue"))


def _put_back(db) -> None:
    db.run("UPDATE jenkins_jobs_queue SET status = 'pending', dispatch_id = NULL, lease_expires_at = NULL "
           "WHERE controller = 'b' AND status = 'processing'")


class _Undo(Exception):
    """Rolls the explained claim back."""


def _scanned_rows(node: dict) -> int:
    """Rows the plan's scans of the queue table returned or filtered out, over the whole tree."""
    found = 0
    if node.get("Relation Name") == "jenkins_jobs_queue" and "Scan" in node["Node Type"]:
        found += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                  + node.get("Rows Removed by Index Recheck", 0)) * node["Actual Loops"]
    return found + sum(_scanned_rows(child) for child in node.get("Plans", ()))


def _rows_read(db, queue, capped: bool) -> int:
    """What one claim of b's rows reads, by the engine's own count; the claimed rows are put back after."""
    params = dict(batch_size=ROWS_OF_B, lease_seconds=60, actor="dispatcher", controller="b")
    if capped:
        params.update(max_in_flight=1000, controller_max_in_flight=None, controllers="default,b")
    if db.dialect == "mysql":
        def handler_reads() -> int:
            return sum(int(r["Value"]) for r in db.run("SHOW SESSION STATUS LIKE 'Handler_read%'"))
        before = handler_reads()
        itself = handler_reads() - before  # SHOW STATUS reads rows of its own
        before = handler_reads()
        claimed = queue.claim_batch(ROWS_OF_B, capped=capped, max_in_flight=1000 if capped else None, controller="b")
        read = handler_reads() - before - itself
    else:
        sql = load("postgresql")
        try:
            with db.transaction():
                if capped:
                    db.run(sql["lock_caps"])
                explained = db.run("EXPLAIN (ANALYZE, FORMAT JSON) "
                                   + sql["claim_batch_capped" if capped else "claim_batch"], **params)
                raise _Undo(explained)
        except _Undo as undone:
            doc = next(iter(undone.args[0][0].values()))
        plan = doc[0]["Plan"]
        read = _scanned_rows(plan)
        claimed = [None] * next(n["Actual Rows"] for n in _walk(plan) if n.get("Subplan Name") == "CTE claimed")
    assert len(claimed) == ROWS_OF_B
    _put_back(db)
    return read


def _walk(node: dict):
    yield node
    for child in node.get("Plans", ()):
        yield from _walk(child)


@pytest.mark.parametrize("capped", [False, True], ids=["uncapped", "capped"])
def test_a_claim_reads_none_of_another_controllers_backlog(db, queue, capped):
    _add(db, "b", ROWS_OF_B, priority=0)
    _rows_read(db, queue, capped)  # plans and caches settle
    alone = _rows_read(db, queue, capped)
    # The other controller's backlog, first in claim order (priority 9).
    _add(db, "default", BACKLOG, priority=9)
    with_backlog = _rows_read(db, queue, capped)
    # The same rows as without the backlog (a few more index pages deep), and far fewer than it holds; each engine
    # counts its own way (MySQL's handler reads include the claim's history row and its other statements).
    assert with_backlog <= alone + 15, (alone, with_backlog)
    assert with_backlog < BACKLOG // 10, (alone, with_backlog)


def test_a_claim_of_another_controller_beside_it_never_makes_a_claim_skip_its_rows(db, database_url):
    """Two lanes at once on a small table (as after a quiet night): one claims controller `default`'s rows in a
    loop, finding none; the other enqueues a row of `b` and claims it, 200 times. Every claim of `b` takes its row.
    (On MariaDB the empty claim's UPDATE scanned the queue instead of looking its ids up, locking every row for
    a moment: `b`'s claim, SKIP LOCKED, then skipped its own row and its pass ended "queue empty".)"""
    import threading

    from jenkins_dispatch.config import parse_database_url
    from jenkins_dispatch.store.db import Database

    from ..stores import Queue

    stop, errors = threading.Event(), []

    def other_lane() -> None:
        try:
            with Database(parse_database_url(database_url), application_name="jd-tests-lane-a") as session:
                while not stop.is_set():
                    Queue(session).claim_batch(10)
        except Exception as exc:  # noqa: BLE001 (reported by the test)
            errors.append(exc)

    queue = Queue(db)
    lane = threading.Thread(target=other_lane)
    lane.start()
    missed = 0
    try:
        for _ in range(200):
            db.run("DELETE FROM jenkins_job_events")
            db.run("DELETE FROM jenkins_jobs_queue")  # a table of one row: where the optimizer would rather scan
            row = queue.enqueue("deploy", controller="b").id
            missed += row not in [job.id for job in queue.claim_batch(10, controller="b")]
    finally:
        stop.set()
        lane.join(timeout=30)
    assert errors == [] and missed == 0, (missed, errors)
