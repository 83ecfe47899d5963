"""`stats` and the page's overview stay cheap however long the history is: the per-controller counts read only
the unfinished rows (counted, not timed: the rows the server's scans returned or filtered out). bench_ui times the
page at 1M finished rows; this catches a plan that walks them."""

from __future__ import annotations

import pytest

from jenkins_dispatch.store.statements import load

from ..engines import numbers, sql_for
from .test_controller_claims import _scanned_rows

pytestmark = pytest.mark.both_engines

FINISHED = 5000


def _rows_read(db, queue) -> tuple[int, list[dict]]:
    if db.dialect == "mysql":
        def handler_reads() -> int:
            return sum(int(r["Value"]) for r in db.run("SHOW SESSION STATUS LIKE 'Handler_read%'"))
        before = handler_reads()
        itself = handler_reads() - before
        before = handler_reads()
        rows = queue.stats_per_controller()
        return handler_reads() - before - itself, rows
    explained = db.run("EXPLAIN (ANALYZE, FORMAT JSON) " + load("postgresql")["stats_per_controller"])
    return _scanned_rows(next(iter(explained[0].values()))[0]["Plan"]), queue.stats_per_controller()


def test_per_controller_counts_read_only_the_unfinished_rows(db, queue):
    db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters, status, finished_at, "
                                  "controller) SELECT 'job-' || (g % 10), '{}', 'completed', now(), "
                                  f"CASE WHEN g % 2 = 0 THEN 'default' ELSE 'eu' END FROM {numbers(db, FINISHED)}",
                   mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters, status, finished_at, controller) "
                         "SELECT CONCAT('job-', g % 10), '{}', 'completed', NOW(6), "
                         f"IF(g % 2 = 0, 'default', 'eu') FROM {numbers(db, FINISHED)}"))
    for controller in ("default", "eu", "eu"):
        queue.enqueue("deploy", controller=controller)
    queue.claim_batch(1, controller="eu")
    db.run(sql_for(db, postgresql="ANALYZE jenkins_jobs_queue", mysql="ANALYZE TABLE jenkins_jobs_queue"))
    _rows_read(db, queue)  # plans and caches settle
    read, rows = _rows_read(db, queue)
    assert [(r["controller"], r["pending"], r["due"], r["in_flight"]) for r in rows] == [
        ("default", 1, 1, 0), ("eu", 1, 1, 1)]
    assert read < 50, read


def test_the_row_estimate_is_never_below_what_a_small_table_holds(db, queue):
    """Issue 33: the overview said "0 rows (estimate)" for a table of 431 rows its server had never analysed."""
    db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters, status, finished_at) "
                                  f"SELECT 'job', '{{}}', 'completed', now() FROM {numbers(db, 431)}",
                   mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters, status, finished_at) "
                         f"SELECT 'job', '{{}}', 'completed', NOW(6) FROM {numbers(db, 431)}"))
    assert queue.stats()["rows_estimate"] >= 431
