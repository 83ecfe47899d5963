"""One case rule for job names (issue 21 #4): Jenkins finds items whatever the case of their names (Jenkins.items
and a folder's items are maps ordered by String.CASE_INSENSITIVE_ORDER), so `slow`, `SLOW` and `Slow` are one job
there, and caps, pauses and in-flight counts must treat them as one here. The real database, on each engine;
the races run real processes, each on its own session."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.store import statements
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate, migration_files

from ..child_processes import CHILDREN, drained, start_together, stop_all
from ..dispatch_helpers import dispatch_settings, expire_leases
from ..engines import ago, numbers, scratch_database
from ..stores import Queue

pytestmark = pytest.mark.both_engines
VARIANTS = ("slow", "SLOW", "Slow", "sLoW")


def _in_flight_per_job(db: Database) -> Counter:
    """Processing rows per Jenkins job, counted here by the test itself (lower-cased names), not by the queue."""
    return Counter({r["k"]: r["n"] for r in db.run(
        "SELECT LOWER(job_name) AS k, COUNT(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing' "
        "GROUP BY LOWER(job_name)")})


def _claim_work_settle(url, capped, done, errors):
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while not done.is_set():
                jobs = queue.claim_batch(3, capped=capped)
                if not jobs:
                    time.sleep(0.002)
                    continue
                time.sleep(0.01)  # held a while, so that the sampler sees what is in flight
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")


def test_case_variants_of_a_capped_job_are_never_two_in_flight_under_racing_claimers(db, database_url):
    """`limits set slow 1`, then rows slow / SLOW / Slow / sLoW: six processes claim (four capped, two on the
    uncapped path a pass takes when it started before the cap was set) and settle, while a sampler counts the
    rows in flight per Jenkins job. On main, PostgreSQL claimed every spelling in one batch."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name) SELECT CASE g % 5 WHEN 0 THEN 'slow' WHEN 1 THEN 'SLOW' "
           f"WHEN 2 THEN 'Slow' WHEN 3 THEN 'sLoW' ELSE 'other' END FROM {numbers(db, 100)}")
    Queue(db).set_limit("slow", 1)
    done, errors = CHILDREN.Event(), CHILDREN.Queue()
    workers = start_together(_claim_work_settle, [(database_url, n < 4, done, errors) for n in range(6)])
    peak = Counter()
    try:
        with Database(parse_database_url(database_url)) as sampler:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                for name, n in _in_flight_per_job(sampler).items():
                    peak[name] = max(peak[name], n)
                if sampler.run("SELECT COUNT(*) AS n FROM jenkins_jobs_queue WHERE status <> 'completed'")[0]["n"] == 0:
                    break
    finally:  # the claimers loop until told: tell them even when sampling failed
        done.set()
        stop_all(workers, timeout=30)
    assert drained(errors) == []
    assert db.run("SELECT COUNT(*) AS n FROM jenkins_jobs_queue WHERE status = 'completed'")[0]["n"] == 100
    assert peak["slow"] == 1, peak  # reached (so the check could fail), never passed


@pytest.mark.parametrize("capped", [False, True])
def test_a_cap_set_under_one_spelling_holds_every_spelling_in_one_claim(queue, capped):
    for name in VARIANTS:
        queue.enqueue(name)
    queue.set_limit("SLOW", 1)
    claimed = queue.claim_batch(10, capped=capped)
    # The uncapped claim (a pass that began before the cap) leaves the job to the capped one.
    assert len(claimed) == (1 if capped else 0), [j.job_name for j in claimed]


def test_setting_a_cap_under_another_spelling_changes_the_one_cap(queue):
    queue.set_limit("slow", 1)
    queue.set_limit("SLOW", 2)
    assert [(r["job_name"], r["max_in_flight"]) for r in queue.limits()] == [("slow", 2)]
    queue.enqueue("Slow")
    queue.claim_batch(5, capped=True)
    assert queue.limits()[0]["in_flight"] == 1  # counted under the cap's own spelling
    assert queue.remove_limit("sLoW") and queue.limits() == []


def test_a_pause_holds_every_spelling_and_any_spelling_lifts_it(queue):
    for name in (*VARIANTS, "other"):
        queue.enqueue(name)
    paused = queue.pause("Slow", reason="freeze")
    assert paused.created and paused.pending == 4
    again = queue.pause("SLOW")
    assert not again.created and again.job_name == "Slow"  # the pause in force, as it was given
    for capped in (False, True):
        assert [j.job_name for j in queue.claim_batch(10, capped=capped)] in (["other"], [])
    assert [p.job_name for p in queue.pauses()] == ["Slow"]
    lifted = queue.resume("slow")
    assert lifted.resumed and lifted.pending == 4 and lifted.still_paused == []
    assert sorted(j.job_name for j in queue.claim_batch(10)) == sorted(VARIANTS)


def test_in_flight_counts_stats_and_the_waiting_reasons_count_one_job(queue):
    queue.set_limit("slow", 2)
    for name in VARIANTS:
        queue.enqueue(name)
    queue.pause("other-job")
    assert len(queue.claim_batch(10, capped=True)) == 2
    assert {name.lower(): n for name, n in queue.in_flight_counts().items()} == {"slow": 2}
    per_job = [r for r in queue.stats_per_job() if r["job_name"].lower() == "slow"]
    assert [(r["in_flight"], r["pending"], r["cap"]) for r in per_job] == [(2, 2, 2)]
    wanted = [("default", name) for name in VARIANTS]
    context = queue.waiting_context(wanted)
    assert all(context.caps[key] == 2 and context.in_flight[key] == 2 for key in wanted), context
    queue.pause("SLOW")
    context = queue.waiting_context(wanted)
    assert all(context.pause_of(name) is not None for name in VARIANTS)
    assert context.pause_of("other-job") is not None and context.pause_of("unpaused") is None
    # `ls --job` and the bulk selections name a job the same way
    assert sorted(r["job_name"] for r in queue.list_jobs(job_name="SLOW")) == sorted(VARIANTS)
    assert queue.jobs_matching(final=False, job_name="Slow")[1] == 4


def test_the_gauges_leave_out_every_spelling_of_a_paused_job(queue, db):
    for name in VARIANTS:
        queue.enqueue(name)
    db.run("UPDATE jenkins_jobs_queue SET scheduled_at = :t", t=ago(minutes=5))
    queue.pause("slow")
    assert queue.gauges()["oldest_pending_seconds"] is None


# --------------------------------------------------------------------------- existing caps and pauses


def _migrate_up_to(db: Database, last: int) -> None:
    """Apply the migrations up to ``last`` only, as `migrate` of that release would have."""
    queries = statements.load(db.dialect)
    if db.dialect == "mysql":
        db.run(queries["create_migrations_table"])
        for version, name, path in migration_files(db.dialect):
            if version <= last:
                db.run_script(path.read_text())
                db.run(queries["record_migration"], version=version, name=name)
        return
    with db.transaction():
        db.run(queries["create_migrations_table"])
        for version, name, path in migration_files(db.dialect):
            if version <= last:
                db.run(path.read_text())
                db.run(queries["record_migration"], version=version, name=name)


def test_existing_caps_and_pauses_move_to_the_case_rule_keeping_the_stricter_cap_and_the_first_pause(engine):
    """Before the case rule PostgreSQL could hold caps `Slow` 3 and `slow` 1 side by side (and pauses alike):
    one job in Jenkins, so one is kept: the stricter cap, and the pause in force the longest. MySQL keyed them
    on the lower-cased name from the start: nothing to merge there, and its caps stay as they were."""
    before = {"postgresql": 6, "mysql": 3}[engine]
    with scratch_database(engine, prefix="jd_case") as url, Database(parse_database_url(url)) as db:
        _migrate_up_to(db, before)
        if engine == "postgresql":
            db.run("INSERT INTO jenkins_job_limits (job_name, max_in_flight) VALUES "
                   "('Slow', 3), ('slow', 1), ('SLOW', 2), ('Fast', 5), ('deploy', 0), ('DEPLOY', 0)")
            db.run("INSERT INTO jenkins_job_pauses (job_name, paused_at, paused_by, reason) VALUES "
                   "('Build', :early, 'alice', 'first'), ('build', :late, 'bob', 'second'), ('lint', :late, 'x', NULL)",
                   early=ago(hours=2), late=ago(hours=1))
        else:
            db.run("INSERT INTO jenkins_job_limits (job_name, max_in_flight) VALUES "
                   "('Slow', 1), ('Fast', 5), ('deploy', 0)")
            db.run("INSERT INTO jenkins_job_pauses (job_name, paused_at, paused_by, reason) VALUES "
                   "('Build', :early, 'alice', 'first'), ('lint', :late, 'x', NULL)",
                   early=ago(hours=2), late=ago(hours=1))
        migrate(db)
        queue = Queue(db)
        limits = {r["job_name"].lower(): r["max_in_flight"] for r in queue.limits()}
        assert limits == {"slow": 1, "fast": 5, "deploy": 0}
        assert len(queue.limits()) == 3
        pauses = queue.pauses()
        assert [(p.job_name, p.paused_by, p.reason) for p in pauses] == [("Build", "alice", "first"), ("lint", "x", None)]
        # ... and from now on one job: any spelling meets the one cap and the one pause.
        for name in ("SLOW", "sLOW", "BUILD", "bUILD"):
            queue.enqueue(name)
        assert [j.job_name for j in queue.claim_batch(10, capped=True)] == ["SLOW"]
        queue.set_limit("sloW", 4)
        assert {r["job_name"].lower(): r["max_in_flight"] for r in queue.limits()}["slow"] == 4
        assert not queue.pause("build").created


# --------------------------------------------------------------------------- Jenkins spells the job its own way


def test_a_row_spelled_otherwise_than_jenkins_spells_its_job_is_found_not_sent_twice(make_jenkins, db):
    """Jenkins's queue item names the job as it was created (`waiting`); the row says `WAITING`. The search after
    a lost answer must still see that item as the row's: it adopts it instead of sending the row again."""
    jenkins = make_jenkins(notification=None)
    jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=1)
    queue = Queue(db)
    job_id = queue.enqueue("WAITING").id
    settings = dispatch_settings(jenkins.base_url)
    run_pass(settings)
    expire_leases(db)
    run_pass(settings)
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["jenkins_queue_id"] == 1 and row["resends"] == 0, row
    assert jenkins.triggers_for(row["dispatch_id"]) == 1
    assert any(e["event"] == "adopted" for e in queue.events(job_id))
