"""Rate limits (`limits set JOB --per-minute N`): no set of dispatchers starts more than N rows of a job in any
60 s, proven with processes racing on the real database. The minute is simulated by recorded starts dated in the
past (the product's minute is never shortened), and checked once in real time against the emulator's builds."""

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.cli.context import operator_name as _operator_name
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.operating.operator import Caps, why_rows_wait
from jenkins_dispatch.store.db import Database

from ..child_processes import CHILDREN, start_together, stop_all
from ..cli_helpers import configure_default_controller
from ..dispatch_helpers import dispatch_settings
from ..engines import numbers, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

RATE = 10


CLAIMERS = 3


def _claim_until_dry_each_round(url, rounds, together, results):
    """Claim as the dispatcher does (the capped path when any limit is set) until three claims in a row are empty,
    once per round: a round begins with one token in ``rounds`` per claimer (None: the end), and every claimer
    passes ``together`` before its first claim, so the claimers race each round."""
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while rounds.get(timeout=300) is not None:
                together.wait(timeout=60)
                claimed, dry = [], 0
                while dry < 3:
                    jobs = queue.claim_batch(4, capped=queue.claim_plan(None).caps)
                    claimed += [j.id for j in jobs]
                    dry = 0 if jobs else dry + 1
                results.put(claimed)
    except Exception as exc:  # told to the test at once, not found as a timeout
        results.put(f"{type(exc).__name__}: {exc}")


@contextmanager
def _racing_claimers(url: str) -> Iterator[Callable[[], list[int]]]:
    """Three claimer processes, started once for every round of the test (spawning three for each of its eleven
    rounds took most of its time); yields ``race()``: one round, the ids each claimed, together."""
    rounds, results, together = CHILDREN.Queue(), CHILDREN.Queue(), CHILDREN.Barrier(CLAIMERS)
    workers = start_together(_claim_until_dry_each_round, [(url, rounds, together, results)] * CLAIMERS)

    def race() -> list[int]:
        for _ in workers:
            rounds.put(True)
        per_worker = [results.get(timeout=60) for _ in workers]
        assert [r for r in per_worker if isinstance(r, str)] == [], "a claimer failed"
        return [i for ids in per_worker for i in ids]

    try:
        yield race
    finally:
        for _ in workers:
            rounds.put(None)
        stop_all(workers, timeout=30)


def _seed_starts(db, job: str, count: int, seconds_ago: float) -> None:
    """``count`` starts of ``job`` recorded ``seconds_ago`` (as the capped claim records them)."""
    key = sql_for(db, postgresql="lower(:job)", mysql="UNHEX(SHA2(LOWER(:job), 256))")
    db.run(f"INSERT INTO jenkins_job_starts (controller, job_key, job_id, at) SELECT 'default', {key}, 0, :at "
           f"FROM {numbers(db, count)}", job=job, at=datetime.now(UTC) - timedelta(seconds=seconds_ago))


def _database_now(db) -> datetime:
    """The database's clock, as its statements read it (``now()``, ``NOW(6)``)."""
    return db.run(sql_for(db, postgresql="SELECT now() AS at", mysql="SELECT NOW(6) AS at"))[0]["at"]


def _date_starts(db, now: datetime, seeded_seconds_ago: int) -> None:
    """Every recorded start dated from ``now`` (a reading of the database's clock): the seeded ones (job id 0)
    ``seeded_seconds_ago`` before it, the racers' at it, so the seeded ones are the oldest in the minute."""
    db.run("UPDATE jenkins_job_starts SET at = :at WHERE job_id = 0", at=now - timedelta(seconds=seeded_seconds_ago))
    db.run("UPDATE jenkins_job_starts SET at = :at WHERE job_id <> 0", at=now)


def _move_window(db, seconds: int) -> None:
    """What the clock does: every recorded start (and claim) ``seconds`` further in the past."""
    shift = sql_for(db, postgresql=f"at - interval '{seconds} seconds'", mysql=f"at - INTERVAL {seconds} SECOND")
    db.run(f"UPDATE jenkins_job_starts SET at = {shift}")
    db.run(f"UPDATE jenkins_job_events SET at = {shift} WHERE event = 'claimed'")


def _claims_per_window(db) -> list[int]:
    """Claims of the history, as many as fall in each 60 s window that starts at a claim."""
    times = sorted(r["at"] for r in db.run("SELECT at FROM jenkins_job_events WHERE event = 'claimed'"))
    return [sum(1 for t in times if start <= t < start + timedelta(seconds=60)) for start in times]


def test_three_racing_claimers_start_only_the_rest_of_the_minute_then_everything_as_it_moves(db, database_url):
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT 'deploy' FROM {numbers(db, 100)}")
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT 'lint' FROM {numbers(db, 20)}")
    queue = Queue(db)
    queue.set_rate("deploy", RATE)
    _seed_starts(db, "deploy", 4, seconds_ago=30)

    with _racing_claimers(database_url) as race:
        first = race()
        deploy = {r["id"] for r in db.run("SELECT id FROM jenkins_jobs_queue WHERE job_name = 'deploy'")}
        assert len([i for i in first if i in deploy]) == RATE - 4, "only the rest of the minute is started"
        assert len([i for i in first if i not in deploy]) == 20, "a job with no rate is not held back"
        (limit,) = queue.limits()
        assert (limit["per_minute"], limit["started_last_minute"], limit["max_in_flight"]) == (RATE, RATE, None)

        # Why the rest waits: the rate, how many started, and when the oldest seeded start leaves the minute. The
        # database's clock computes that wait, so the starts are dated from a reading of it (`before`), the seeded
        # ones 30 s earlier: the wait shown is 30 s less the time the database's clock moved before the read, which
        # is at most what it moved between `before` and a second reading after it, however slow the machine.
        pending = queue.list_jobs(status="pending", limit=1)
        before = _database_now(db)
        _date_starts(db, before, seeded_seconds_ago=30)
        (why,) = why_rows_wait(queue, pending, Caps())
        between = (_database_now(db) - before).total_seconds()
        assert why.code == "rate_limit" and why.text.startswith(f"rate limit {RATE}/min: {RATE} started in the last minute")
        assert max(1, math.ceil(30 - between)) <= int(why.text.rsplit("~", 1)[1].rstrip("s")) <= 30, (why.text, between)

        # The minute moves on, ten times: each time three claimers start no more than the rate, until all are started.
        claimed = set(first)
        for _ in range(10):
            _move_window(db, 60)
            more = race()
            assert len(more) == len(set(more)) <= RATE
            claimed |= set(more)
        assert deploy <= claimed and len(claimed) == 120
    assert max(_claims_per_window(db)) <= RATE + 20  # the first minute also holds lint's 20 (no rate)


def test_a_cap_and_a_rate_both_hold_and_rm_removes_each_on_its_own(db):
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT 'deploy' FROM {numbers(db, 30)}")
    queue = Queue(db)
    queue.set_limit("deploy", 3)
    queue.set_rate("Deploy", 5)  # another spelling: the same job's limits
    assert len(queue.claim_batch(10, capped=True)) == 3  # the cap holds first
    db.run("UPDATE jenkins_jobs_queue SET status = 'completed', finished_at = updated_at WHERE status = 'processing'")
    assert len(queue.claim_batch(10, capped=True)) == 2  # then the rate: 5 in the minute
    assert queue.remove_limit("deploy") and queue.limit_of("deploy") is None
    (limit,) = queue.limits()
    assert (limit["max_in_flight"], limit["per_minute"]) == (None, 5)  # the rate stayed
    assert queue.claim_batch(10, capped=queue.claim_plan(None).caps) == []  # and still holds
    assert queue.remove_rate("deploy") and queue.limits() == [] and not queue.remove_rate("deploy")
    assert len(queue.claim_batch(10, capped=queue.claim_plan(None).caps)) == 10


def _changes(queue):
    return [(c["kind"], c["job_name"], c["previous"], c["max_in_flight"], c["previous_per_minute"], c["per_minute"],
             c["changed_by"]) for c in queue.limit_history()]


def test_rate_changes_are_kept_in_the_caps_history_with_who_and_from_what(db):
    queue = Queue(db)
    queue.set_rate("deploy", 5, changed_by="alice@ops")
    queue.set_rate("Deploy", 8, changed_by="bob@ops")  # another spelling: the same job's rate, as first spelt
    queue.set_limit("deploy", 2, changed_by="carol@ops")
    assert queue.remove_rate("deploy", changed_by="dave@ops")
    assert not queue.remove_rate("deploy", changed_by="erin@ops")  # no rate: nothing changed, nothing recorded
    assert queue.remove_limit("deploy", changed_by="frank@ops")
    assert _changes(queue) == [
        ("cap", "deploy", 2, None, None, None, "frank@ops"),
        ("rate", "deploy", None, None, 8, None, "dave@ops"),
        ("cap", "deploy", None, 2, None, None, "carol@ops"),
        ("rate", "deploy", None, None, 5, 8, "bob@ops"),
        ("rate", "deploy", None, None, None, 5, "alice@ops"),
    ]


def test_setting_the_cap_or_rate_a_job_already_has_changes_nothing_and_records_nothing(db):
    """Issue 33: `limits set J 2` when the cap already was 2 wrote a `2 → 2` entry in the caps' history."""
    queue = Queue(db)
    assert queue.set_limit("deploy", 2, changed_by="alice").changed
    assert queue.set_rate("deploy", 5, changed_by="alice").changed
    updated = db.run("SELECT updated_at FROM jenkins_job_limits")
    again = queue.set_limit("Deploy", 2, changed_by="bob")  # another spelling: the same job's cap
    assert (again.changed, again.previous) == (False, 2)
    assert not queue.set_rate("DEPLOY", 5, changed_by="bob").changed
    assert not queue.set_rate("deploy", 5, "default", changed_by="bob").changed
    assert db.run("SELECT updated_at FROM jenkins_job_limits") == updated
    assert [c["changed_by"] for c in queue.limit_history()] == ["alice", "alice"]
    changed = queue.set_limit("deploy", 3, changed_by="carol")
    assert (changed.changed, changed.previous) == (True, 2)
    assert queue.set_limit("deploy", 2, "eu", changed_by="dave").changed  # another controller: another job
    assert _changes(queue)[:2] == [("cap", "deploy", None, 2, None, None, "dave"),
                                   ("cap", "deploy", 2, 3, None, None, "carol")]


def _set_cap(url, barrier, job, cap, results):
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db)
            db.connection()  # connected before the race: the race is the statements'
            barrier.wait(timeout=30)
            results.append(queue.set_limit(job, cap, changed_by=threading.current_thread().name).changed)
    except BaseException as exc:  # noqa: BLE001 - told to the test below
        results.append(exc)


@pytest.mark.parametrize("before", [None, 2], ids=["no-cap-yet", "another-cap"])
def test_operators_setting_the_same_cap_at_once_record_one_change(db, database_url, before):
    """Six sessions set deploy's cap to 5 at the same moment: one of them changes it (and records it); the others
    find it already so, whether the job had no limits row yet (six inserts race) or another cap."""
    queue = Queue(db)
    if before is not None:
        queue.set_limit("deploy", before, changed_by="seed")
    barrier, results = threading.Barrier(6), []
    threads = [threading.Thread(target=_set_cap, args=(database_url, barrier, "deploy", 5, results), name=f"op{n}")
               for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted(results) == [False] * 5 + [True]
    assert queue.limit_of("deploy") == 5
    changes = [c for c in _changes(queue) if c[6] != "seed"]
    assert [(c[2], c[3]) for c in changes] == [(before, 5)]


def test_limits_set_and_rm_of_a_rate_record_the_operator_and_limits_history_shows_them(db, database_url, capsys,
                                                                                      monkeypatch):
    configure_default_controller(monkeypatch)
    queue = Queue(db)
    assert main(["limits", "set", "deploy", "3", "--per-minute", "10"]) == 0
    assert main(["limits", "set", "deploy", "--per-minute", "4"]) == 0
    assert main(["limits", "rm", "deploy", "--per-minute"]) == 0
    assert main(["limits", "rm", "deploy"]) == 0  # the cap (the rate is gone already)
    capsys.readouterr()
    operator = _operator_name()
    assert _changes(queue) == [
        ("cap", "deploy", 3, None, None, None, operator),
        ("rate", "deploy", None, None, 4, None, operator),
        ("rate", "deploy", None, None, 10, 4, operator),
        ("cap", "deploy", None, 3, None, None, operator),
        ("rate", "deploy", None, None, None, 10, operator),
    ]
    assert main(["limits", "history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["AT", "JOB_NAME", "CONTROLLER", "LIMIT", "FROM", "TO", "CHANGED_BY"]
    assert [line.split()[2:7] for line in lines[1:]] == [
        ["deploy", "default", "cap", "3", "none"], ["deploy", "default", "rate", "4/min", "none"],
        ["deploy", "default", "rate", "10/min", "4/min"], ["deploy", "default", "cap", "none", "3"],
        ["deploy", "default", "rate", "none", "10/min"]]
    assert main(["limits", "history", "--json"]) == 0
    latest = json.loads(capsys.readouterr().out)[0]
    assert (latest["kind"], latest["previous"], latest["changed_by"]) == ("cap", 3, operator)


def test_in_real_time_three_dispatchers_wait_for_the_minute_to_move(db, jenkins):
    """The window is real here: three starts recorded 57 s ago fill a rate of 3; nothing reaches Jenkins until
    they leave the minute, then three builds, and no more."""
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT 'deploy' FROM {numbers(db, 10)}")
    Queue(db).set_rate("deploy", 3)
    _seed_starts(db, "deploy", 3, seconds_ago=57)
    window_opens = time.time() + 3
    settings = dispatch_settings(jenkins.base_url)
    stop = threading.Event()
    errors: list[BaseException] = []

    def dispatcher():
        try:
            while not stop.is_set():
                run_pass(settings)
                time.sleep(0.1)
        except BaseException as exc:  # noqa: BLE001 - told to the test below
            errors.append(exc)

    threads = [threading.Thread(target=dispatcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(6)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert errors == []
    started = sorted(b.started for b in jenkins.builds("deploy"))
    assert len(started) == 3, started
    assert started[0] >= window_opens - 0.5, "a build started before the minute moved"
