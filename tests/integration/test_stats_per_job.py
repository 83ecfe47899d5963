"""`stats --per-job` and the dispatcher's gauges, on each engine: the same figures for every kind of job (busy,
capped, paused, idle, names longer than an index prefix), and on MySQL the reads that keep them fast."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.store import statements

from ..engines import ago, numbers

pytestmark = pytest.mark.both_engines

# Two names that differ only after their first 300 characters (MySQL's old job-name index held 255).
LONG_PREFIX = "folder/" + "x" * 300
LONG_A, LONG_B = LONG_PREFIX + "/a", LONG_PREFIX + "/b"


def _fill_every_kind_of_job(queue, db):
    """deploy: busy, with a history; team/app/test: in flight only, capped; two long names; a cap and a pause
    on jobs without rows; everything paused at the end (a pause of '*' is not a job)."""
    for _ in range(5):
        queue.enqueue("deploy")
    for _ in range(2):
        queue.enqueue("team/app/test")
    queue.enqueue("only-history")
    claimed = queue.claim_batch(10)
    running, completed, failed, cancelled, long_ago = [j for j in claimed if j.job_name == "deploy"]
    [history] = [j for j in claimed if j.job_name == "only-history"]
    queue.settle(completed.id, completed.dispatch_id, "completed", result="SUCCESS")
    queue.settle(failed.id, failed.dispatch_id, "failed", result="FAILURE")
    queue.settle(cancelled.id, cancelled.dispatch_id, "cancelled", result="ABORTED")
    queue.settle(long_ago.id, long_ago.dispatch_id, "completed", result="SUCCESS")
    db.run("UPDATE jenkins_jobs_queue SET finished_at = :t WHERE id = :id", t=ago(hours=2), id=long_ago.id)
    for minutes in (10, 5, 1):
        queue.enqueue("deploy", scheduled_at=datetime.now(UTC) - timedelta(minutes=minutes))
    queue.enqueue("deploy", scheduled_at=datetime.now(UTC) + timedelta(hours=1))  # pending, not yet due
    queue.settle(history.id, history.dispatch_id, "completed", result="SUCCESS")
    db.run("UPDATE jenkins_jobs_queue SET finished_at = :t WHERE id = :id", t=ago(days=3), id=history.id)
    for _ in range(2):
        queue.enqueue(LONG_A)
    queue.enqueue(LONG_B, scheduled_at=datetime.now(UTC) - timedelta(minutes=30))
    queue.set_limit("team/app/test", 2)
    queue.set_limit("idle-capped", 5)
    queue.pause(LONG_B, reason="flaky agent")
    queue.pause("idle-paused")
    queue.pause(None)


def test_per_job_figures_for_every_kind_of_job(queue, db):
    _fill_every_kind_of_job(queue, db)
    rows = queue.stats_per_job()
    assert [r["job_name"] for r in rows] == ["deploy", LONG_A, LONG_B, "idle-capped", "idle-paused", "team/app/test"]
    got = {r["job_name"]: (r["pending"], r["in_flight"], r["cap"], r["completed_last_hour"], r["failed_last_hour"],
                           r["paused"], r["pause_reason"]) for r in rows}
    assert got == {
        "deploy": (4, 1, None, 1, 1, False, None),
        LONG_A: (2, 0, None, 0, 0, False, None),
        LONG_B: (1, 0, None, 0, 0, True, "flaky agent"),
        "idle-capped": (0, 0, 5, 0, 0, False, None),
        "idle-paused": (0, 0, None, 0, 0, True, None),
        "team/app/test": (0, 2, 2, 0, 0, False, None),
    }
    counts = ("pending", "in_flight", "completed_last_hour", "failed_last_hour")
    assert {type(r[c]) for r in rows for c in counts} == {int}  # `stats --per-job --json` prints them
    ages = {r["job_name"]: r["oldest_pending_seconds"] for r in rows}
    assert 600 <= ages["deploy"] < 660  # the oldest due row; the one not yet due does not count
    assert 1800 <= ages[LONG_B] < 1860 and 0 <= ages[LONG_A] < 60
    assert ages["team/app/test"] is ages["idle-capped"] is ages["idle-paused"] is None
    paused = {r["job_name"]: r["paused_at"] for r in rows if r["paused"]}
    assert all(abs(at - datetime.now(UTC)) < timedelta(minutes=1) for at in paused.values())


def test_the_oldest_pending_age_leaves_out_paused_jobs_whatever_their_share(queue, db):
    """The gauge the OldestPendingAgeSeconds alarm reads: the oldest due row of a job not paused, even when
    the paused jobs hold every older row."""
    for minutes in range(60, 0, -1):
        queue.enqueue("stuck", scheduled_at=datetime.now(UTC) - timedelta(minutes=minutes, seconds=30))
    queue.enqueue("fine", scheduled_at=datetime.now(UTC) - timedelta(seconds=20))
    queue.enqueue("fine", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    assert queue.gauges()["oldest_pending_seconds"] >= 3600
    queue.pause("stuck")
    assert 20 <= queue.gauges()["oldest_pending_seconds"] < 80
    queue.pause("fine")
    assert queue.gauges()["oldest_pending_seconds"] is None
    queue.resume("fine")
    queue.pause(None)
    assert queue.gauges()["oldest_pending_seconds"] is None


def test_doctor_checks_the_busiest_jobs_first(queue):
    queue.enqueue("done")
    [done] = queue.claim_batch(1)
    queue.settle(done.id, done.dispatch_id, "completed", result="SUCCESS")  # finished: not checked
    for name, rows in (("b-job", 2), ("a-job", 2), (LONG_A, 3), ("rare", 1), (LONG_B, 1)):
        for _ in range(rows):
            queue.enqueue(name)
    queue.claim_batch(2)  # in flight: still Jenkins's to run
    assert [(r["job_name"], r["waiting"], r["job_names"]) for r in queue.waiting_job_names(3)] == [
        (LONG_A, 3, 5), ("a-job", 2, 5), ("b-job", 2, 5)]


def test_a_job_named_in_two_cases_is_one_job_as_its_cap_and_pause_are(queue):
    """Jenkins finds items ignoring case, and caps and pauses key on the name that way on both engines (issue 21
    #4): the per-job figures follow, under the name the cap was given."""
    queue.enqueue("Deploy")
    queue.enqueue("deploy")
    queue.set_limit("DEPLOY", 3)
    rows = {r["job_name"]: (r["pending"], r["cap"]) for r in queue.stats_per_job()}
    assert rows == {"DEPLOY": (2, 3)}


def _queue_rows_looked_up(db, name: str, **params) -> int:
    """How many rows of the queue table the named statement fetched beyond an index ("using_index": false),
    other than by primary key, as MariaDB's ANALYZE counts them (r_rows: what was read, not estimated)."""
    [row] = db.run("ANALYZE FORMAT=JSON " + statements.load("mysql")[name], **params)
    looked_up = 0

    def walk(node):
        nonlocal looked_up
        if isinstance(node, dict):
            if (node.get("table_name") in ("jenkins_jobs_queue", "q", "w") and not node.get("using_index")
                    and node.get("key") != "PRIMARY"):
                looked_up += round((node.get("r_rows") or 0) * (node.get("r_loops") or 0))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(next(iter(row.values()))))
    return looked_up


def test_mysql_per_job_reads_do_not_look_up_every_waiting_row(queue, db, engine):
    """Per-job figures must not fetch each waiting row: they are counted from an index alone (stats_per_job took
    77 ms at 10k pending, 7.6 s at 1M fetching them; doctor's busiest jobs as long). Rows in flight and the last
    hour's finished rows may be fetched: there are few of them."""
    if engine != "mysql" or "mariadb" not in db.run("SELECT VERSION() AS v")[0]["v"].lower():
        pytest.skip("reads MariaDB's ANALYZE FORMAT=JSON row counts")
    db.run("INSERT INTO jenkins_jobs_queue (job_name, status, dispatch_id, finished_at) "
           "SELECT CONCAT('job-', g % 7), 'completed', CONCAT('old-', g), NOW(6) - INTERVAL 2 DAY "
           f"FROM {numbers(engine, 3000)}")
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT CONCAT('job-', g % 7) FROM {numbers(engine, 2000)}")
    queue.claim_batch(20)
    queue.set_limit("job-1", 5)
    queue.pause("job-2")
    db.run("ANALYZE TABLE jenkins_jobs_queue")
    assert _queue_rows_looked_up(db, "stats_per_job") < 100
    assert _queue_rows_looked_up(db, "waiting_job_names", limit=20) < 100
