"""Fair share: rows waiting at the same priority are claimed round-robin across fairness keys (rows without one are a
group of their own); priority still comes first; a queue without fairness keys keeps the seed's order exactly."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from jenkins_dispatch.cli.main import main
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.queue import CapsInForce
from jenkins_dispatch.store.schedules import Schedules
from jenkins_dispatch.store.statements import load

from ..child_processes import CHILDREN, drained, start_together, stop_all
from ..dispatch_helpers import dispatch_settings, wait_for
from ..engines import numbers, sql_for
from ..stores import Queue
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client

pytestmark = pytest.mark.both_engines



def _insert(db, rows: int, fairness_key: str | None, job: str = "test", priority: int = 0) -> None:
    key = "NULL" if fairness_key is None else f"'{fairness_key}'"
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, fairness_key, priority) "
           f"SELECT '{job}', {key}, {priority} FROM {numbers(db, rows)}")


def _insert_for(db, controller: str, rows: int, fairness_key: str) -> None:
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, fairness_key, controller) "
           f"SELECT 'test', '{fairness_key}', '{controller}' FROM {numbers(db, rows)}")


def _keys_of(db, ids) -> list[str | None]:
    if not ids:
        return []
    by_id = {r["id"]: r["fairness_key"] for r in db.run(
        f"SELECT id, fairness_key FROM jenkins_jobs_queue WHERE id IN ({', '.join(map(str, ids))})")}
    return [by_id[i] for i in ids]


def _claim_and_settle(queue: Queue, **claim) -> list[int]:
    jobs = queue.claim_batch(fair=queue.claim_plan(None, claim.get("controller", "default")).fair, **claim)
    for job in jobs:
        queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    return [job.id for job in jobs]


def test_another_keys_rows_start_within_one_claim_round_of_a_thousand_waiting(queue, db):
    """1,000 rows of team-a wait, job capped at 2, two of them in flight; two rows of team-b arrive: the next claim
    round takes one of them, the round after the other (the seed's order would build 998 of team-a's first)."""
    queue.set_limit("test", 2)
    _insert(db, 1000, "team-a")
    first = queue.claim_batch(2, capped=True, fair=queue.claim_plan(None).fair)
    assert _keys_of(db, [j.id for j in first]) == ["team-a", "team-a"]
    _insert(db, 2, "team-b")
    for job in first:
        queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    rounds = [_keys_of(db, _claim_and_settle(queue, batch_size=2, capped=CapsInForce.CAPPED)) for _ in range(3)]
    assert rounds == [["team-a", "team-b"], ["team-a", "team-b"], ["team-a", "team-a"]], rounds


def test_rows_without_a_key_are_one_group_served_in_turn(queue, db):
    _insert(db, 50, None)
    _insert(db, 50, "team-a")
    _insert(db, 1, "team-b")
    taken = _keys_of(db, _claim_and_settle(queue, batch_size=6))
    assert taken == [None, "team-a", "team-b", None, "team-a", None], taken


def test_priority_comes_before_fairness(queue, db):
    _insert(db, 20, "team-a", priority=5)
    _insert(db, 3, "team-b", priority=0)
    _insert(db, 1, "team-c", priority=9)
    taken = _keys_of(db, _claim_and_settle(queue, batch_size=22))
    assert taken == ["team-c"] + ["team-a"] * 20 + ["team-b"], taken


@pytest.mark.parametrize("cap", ["job", "key"])
def test_the_capped_and_keyed_claims_serve_keys_in_turn_too(queue, db, cap):
    if cap == "job":
        queue.set_limit("test", 4)
    else:
        queue.set_key_limit("shared", 4)
    _insert(db, 30, "team-a")
    _insert(db, 2, "team-b")
    if cap == "key":
        db.run("UPDATE jenkins_jobs_queue SET concurrency_key = 'shared'")
    capped = CapsInForce.CAPPED if cap == "job" else CapsInForce.KEYED
    assert queue.claim_plan(None).caps is capped
    taken = _keys_of(db, _claim_and_settle(queue, batch_size=10, capped=capped))
    assert taken == ["team-a", "team-b", "team-a", "team-b"], taken


def test_turns_are_counted_per_controller_so_one_controllers_progress_never_starves_another(queue, db):
    """Each controller's lane claims its own rows: a turn is a place in that controller's round. Team-a's 200 rows
    on eu, then 1,000 on default of which 300 are in flight; team-b's first rows on eu start within one round of
    eu's claims, whatever turn default has reached (counted over both, they waited behind all 200)."""
    _insert_for(db, "eu", 200, "team-a")
    _insert_for(db, "default", 1000, "team-a")
    queue.claim_plan(None)  # on MySQL, the pass gives the turns
    assert len(queue.claim_batch(300, controller="default", fair=True)) == 300  # left in flight
    _insert_for(db, "eu", 2, "team-b")
    fair = queue.claim_plan(None, "eu").fair
    rounds = [_keys_of(db, _claim_and_settle(queue, batch_size=2, controller="eu")) for _ in range(3)]
    assert fair and rounds == [["team-a", "team-b"], ["team-a", "team-b"], ["team-a", "team-a"]], rounds
    # And the other way round: a group's turns on one controller do not push its rows back on another.
    _insert_for(db, "default", 3, "team-c")
    queue.claim_plan(None)
    assert _keys_of(db, _claim_and_settle(queue, batch_size=2)) == ["team-a", "team-c"]


def test_a_pending_row_moved_to_another_controller_by_plain_sql_takes_a_turn_there(queue, db):
    """Turns are per controller, so a row moved by hand takes one on the controller it now waits on: left with
    the turn it took on default (about 500, where default's round was), it would wait behind eu's 50 rows."""
    _insert_for(db, "default", 1000, "team-a")
    _insert_for(db, "eu", 50, "team-a")
    queue.claim_plan(None)
    assert len(queue.claim_batch(500, controller="default", fair=True)) == 500  # default serves turn ~500
    _insert_for(db, "default", 1, "team-b")
    queue.claim_plan(None)
    [moved] = db.run("SELECT id, fair_round FROM jenkins_jobs_queue WHERE fairness_key = 'team-b'")
    assert moved["fair_round"] >= 499, moved
    db.run("UPDATE jenkins_jobs_queue SET controller = 'eu' WHERE id = :id", id=moved["id"])
    taken = _claim_and_settle(queue, batch_size=2, controller="eu")
    assert _keys_of(db, taken) == ["team-a", "team-b"]


def test_a_lanes_claim_plan_never_holds_another_controllers_new_rows_from_its_claim(queue, db, database_url):
    """Each lane asks for its claim plan beside the others' claims. On MySQL that question gives the new rows their
    turns, an UPDATE whose row locks last until it commits: for every controller's rows, another lane's claim
    (SKIP LOCKED) passed its new rows by meanwhile (a pass that never sent its controller's one row)."""
    _insert_for(db, "default", 3, "team-a")
    _insert_for(db, "b", 1, "team-a")
    with Database(parse_database_url(database_url)) as other, other.transaction():
        other.run(load(db.dialect)["claim_plan"], controller="default")  # its locks held until the block ends
        assert len(queue.claim_batch(5, controller="b")) == 1


def test_without_fairness_keys_the_claim_keeps_the_seeds_order(queue, db):
    """Rows inserted later with an earlier scheduled_at go first, as the seed's claim order says: the fair order
    (by turn) is taken only while a pending row has a fairness key."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('first'), ('second')")
    past = sql_for(db, postgresql="now() - interval '1 hour'", mysql="UTC_TIMESTAMP(6) - INTERVAL 1 HOUR")
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('backfilled', {past})")
    assert queue.claim_plan(None).fair is False
    jobs = queue.claim_batch(3)
    assert [j.job_name for j in jobs] == ["backfilled", "first", "second"]


def test_a_retried_row_takes_a_new_turn_and_a_released_one_keeps_its_own(queue, db):
    _insert(db, 10, "team-a")
    queue.claim_plan(None)  # a pass's question (on MySQL, the pass gives the rows their turns)
    [done] = queue.claim_batch(1)
    queue.settle(done.id, done.dispatch_id, "failed", error="HTTP 400")
    waiting = db.run("SELECT max(fair_round) AS turn FROM jenkins_jobs_queue WHERE status = 'pending'")[0]["turn"]
    queue.retry_final(done.id)
    queue.claim_plan(None)  # the next pass's question (on MySQL, the pass gives the turns)
    turn_of = lambda job_id: db.run(f"SELECT fair_round FROM jenkins_jobs_queue WHERE id = {job_id}")[0]["fair_round"]  # noqa: E731
    assert turn_of(done.id) == waiting + 1  # behind its group's waiting rows, as a new row would be
    [held] = queue.claim_batch(1)
    before = turn_of(held.id)
    assert queue.release(held.id, held.dispatch_id, "the pass stopped before this trigger")
    assert turn_of(held.id) == before  # it has had its turn: first again once claimed


def test_a_plain_sql_retry_and_a_schedules_tick_take_their_turns(queue, db):
    """The other writers of a pending row: a final row set back to pending by hand takes a new turn behind its group,
    as the operator's retry does; a schedule's tick of a fairness key takes the turn after that key's rows."""
    _insert(db, 10, "team-a")
    queue.claim_plan(None)
    [done] = queue.claim_batch(1)
    queue.settle(done.id, done.dispatch_id, "failed", error="HTTP 400")
    db.run(f"UPDATE jenkins_jobs_queue SET status = 'pending' WHERE id = {done.id}")  # finished_at left: plain SQL
    queue.claim_plan(None)
    turns = {r["id"]: r["fair_round"] for r in db.run(
        "SELECT id, fair_round FROM jenkins_jobs_queue WHERE status = 'pending'")}
    assert turns[done.id] == max(t for i, t in turns.items() if i != done.id) + 1, turns
    schedules = Schedules(db)
    add_schedule(schedules, "nightly", "test", cron="* * * * *", fairness_key="team-a")
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick", tick=schedules.now() - timedelta(minutes=1))
    assert enqueue_due_ticks(schedules).enqueued == 1
    queue.claim_plan(None)
    [tick] = db.run("SELECT fairness_key, fair_round FROM jenkins_jobs_queue ORDER BY id DESC LIMIT 1")
    assert tick == {"fairness_key": "team-a", "fair_round": turns[done.id] + 1}, tick


def test_the_pages_retries_and_the_cli_bulk_retry_give_turns_behind_the_groups_waiting_rows(client, queue, db,
                                                                                           capsys):
    """The other ways an operator sends a final row back to pending: the page's retry of one job, the page's bulk
    retry of a filter, the CLI's bulk retry. Each retried row waits behind its group's rows, as a new row would."""
    _insert(db, 10, "team-a")
    queue.claim_plan(None)  # on MySQL, the pass gives the turns
    jobs = queue.claim_batch(3, fair=True)
    for n, job in enumerate(jobs):
        queue.settle(job.id, job.dispatch_id, "failed", error=f"HTTP 400 number {n}")
    waiting = db.run("SELECT max(fair_round) AS turn FROM jenkins_jobs_queue WHERE status = 'pending'")[0]["turn"]
    by_page, by_page_bulk, by_cli_bulk = (job.id for job in jobs)
    assert client.post(f"/jobs/{by_page}/retry", {"confirm": "yes"}).status_code == 200
    queue.claim_plan(None)
    assert "retried 1 of 1" in client.post("/bulk", {"action": "retry", "status": "failed", "error": "number 1"}).text
    queue.claim_plan(None)
    assert main(["retry", "--status", "failed", "--error-like", "number 2", "--yes"]) == 0, capsys.readouterr()
    queue.claim_plan(None)
    turns = {r["id"]: r["fair_round"] for r in db.run(
        f"SELECT id, fair_round FROM jenkins_jobs_queue WHERE id IN ({by_page}, {by_page_bulk}, {by_cli_bulk})")}
    assert turns == {by_page: waiting + 1, by_page_bulk: waiting + 2, by_cli_bulk: waiting + 3}, (waiting, turns)


def test_a_row_backed_off_after_a_jenkins_500_keeps_its_turn(make_jenkins, queue, db):
    """A trigger Jenkins answered with a 500 sends its row back to pending, due after a backoff (the dispatcher's
    retry-later path): it has had its turn, and keeps it, so it goes first once due rather than behind its group's
    waiting rows."""
    jenkins = make_jenkins()
    jenkins.add_fault(path="buildWithParameters$", status=500, times=1)
    _insert(db, 10, "team-a", job="deploy")
    queue.claim_plan(None)  # on MySQL, the pass gives the turns
    first = db.run("SELECT id, fair_round FROM jenkins_jobs_queue ORDER BY fair_round, id LIMIT 1")[0]
    summary = run_pass(dispatch_settings(jenkins.base_url), max_jobs=1)
    assert summary["retried_later"] == 1, summary
    row = db.run(f"SELECT status, fair_round FROM jenkins_jobs_queue WHERE id = {first['id']}")[0]
    assert row == {"status": "pending", "fair_round": first["fair_round"]}, (first, row)


def _dispatch_until_told(url, done, errors, claimed):
    """Claim and settle batches of four until ``done``; then put the ids this process claimed in ``claimed``."""
    mine: list[int] = []
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while not done.is_set():
                taken = _claim_and_settle(queue, batch_size=4)
                mine += taken
                if not taken:
                    time.sleep(0.005)
                time.sleep(0.003)
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")
    claimed.put(mine)


def test_three_racing_dispatchers_start_another_keys_rows_within_a_few_batches(db, database_url):
    _insert(db, 1000, "team-a")
    done, errors, claimed = CHILDREN.Event(), CHILDREN.Queue(), CHILDREN.Queue()
    workers = start_together(_dispatch_until_told, [(database_url, done, errors, claimed)] * 3)
    try:
        assert wait_for(lambda: db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status = 'completed'")
                        [0]["n"] >= 100, timeout=60)
        [mark] = db.run("SELECT max(id) AS id FROM jenkins_job_events WHERE event = 'claimed'")
        _insert(db, 2, "team-b")
        assert wait_for(lambda: db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE fairness_key = 'team-b' "
                                       "AND status = 'completed'")[0]["n"] == 2, timeout=60)
    finally:
        done.set()
        taker_of = {job_id: n for n, ids in enumerate(claimed.get(timeout=30) for _ in workers) for job_id in ids}
        stop_all(workers, timeout=30)
    assert drained(errors) == []
    claims = [{**c, "actor": taker_of[c["job_id"]]} for c in db.run(
        "SELECT e.id, e.job_id, q.fairness_key FROM jenkins_job_events e JOIN jenkins_jobs_queue q ON q.id = e.job_id "
        f"WHERE e.event = 'claimed' AND e.id > {mark['id']} ORDER BY e.id")]
    # Counted per dispatcher: each one that claimed a row of team-b claimed at most its batch in flight at the insert
    # and one more (whose claim began before the turn was there) of team-a's first. Counted over all three, the
    # number also depends on how the machine schedules them: a claimer that has locked team-b's row and waits for the
    # CPU lets the others claim team-a's rows meanwhile (once 32, in a full run on two cores).
    for taker in {c["actor"] for c in claims if c["fairness_key"] == "team-b"}:  # the process that claimed it
        keys = [c["fairness_key"] for c in claims if c["actor"] == taker]
        last_b = max(i for i, key in enumerate(keys) if key == "team-b")
        assert keys[:last_b].count("team-a") <= 8, (taker, keys[:last_b + 1])


def test_a_dispatcher_pass_builds_another_keys_row_before_the_backlog(make_jenkins, queue, db):
    jenkins = make_jenkins()
    _insert(db, 40, "team-a", job="deploy")
    _insert(db, 1, "team-b", job="deploy")
    run_pass(dispatch_settings(jenkins.base_url, BATCH_SIZE="3"), max_jobs=3)
    started = [r["fairness_key"] for r in db.run(
        "SELECT fairness_key FROM jenkins_jobs_queue WHERE status <> 'pending' ORDER BY id")]
    assert sorted(started, key=str) == ["team-a", "team-a", "team-b"], started
    [b] = db.run("SELECT dispatch_id FROM jenkins_jobs_queue WHERE fairness_key = 'team-b'")
    assert jenkins.triggers_for(b["dispatch_id"]) == 1  # sent to Jenkins in that pass, once
