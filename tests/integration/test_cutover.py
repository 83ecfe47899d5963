"""Cutting over from the seed's worker while it still runs (issue 27), on each engine: what its statements get
from the table once `migrate` has upgraded it. The seed's worker is played statement for statement by threads
with sessions of their own; tests/system/test_cutover.py runs its PHP code itself.

The seed's worker: ``BEGIN; SELECT * … WHERE status = 'pending' ORDER BY priority DESC, scheduled_at ASC LIMIT 1
FOR UPDATE SKIP LOCKED; UPDATE … SET status = 'processing' WHERE id = ?; COMMIT;`` then the Jenkins job, then
``UPDATE … SET status = 'completed' WHERE id = ?`` ('failed' on error)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from unittest import mock

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.errors import DatabaseError, DispatchError
from jenkins_dispatch.operating.doctor import PASS, DoctorOptions, render, run_checks
from jenkins_dispatch.store import migrations
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migration_files

from ..dispatch_helpers import dispatch_settings, wait_for
from ..engines import row_lock_waiters, scratch_database
from .test_doctor import by_name, env_for

pytestmark = pytest.mark.both_engines

# What every write the upgraded table refuses to the old worker begins with.
CLEAR = "rows are dispatched by jenkins-dispatch now: stop this worker (see docs/cutover.md)"
OLD_WORKER_DONE = "by the worker that ran before jenkins-dispatch"

# The seed's table, as tests/integration/test_migrations*.py hold it, in each engine's SQL.
SEED_TABLE = {
    "postgresql": "CREATE TABLE jenkins_jobs_queue (id SERIAL PRIMARY KEY, job_name VARCHAR(255) NOT NULL, "
                  "parameters JSON, status VARCHAR(20) DEFAULT 'pending', priority INT DEFAULT 0, "
                  "scheduled_at TIMESTAMP DEFAULT NOW())",
    "mysql": "CREATE TABLE jenkins_jobs_queue (id INT AUTO_INCREMENT PRIMARY KEY, job_name VARCHAR(255), "
             "parameters JSON, status VARCHAR(20) DEFAULT 'pending', priority INT DEFAULT 0, "
             "scheduled_at DATETIME DEFAULT CURRENT_TIMESTAMP)",
}
# The seed worker's statements (the same SQL on both engines).
SEED_CLAIM = ("SELECT * FROM jenkins_jobs_queue WHERE status = 'pending' "
              "ORDER BY priority DESC, scheduled_at ASC LIMIT 1 FOR UPDATE SKIP LOCKED")
SEED_MARK = "UPDATE jenkins_jobs_queue SET status = 'processing' WHERE id = :id"
SEED_DONE = {status: f"UPDATE jenkins_jobs_queue SET status = '{status}' WHERE id = :id"
             for status in ("completed", "failed")}


@pytest.fixture
def seed_url(engine, monkeypatch):
    """A scratch database holding the seed's table (not migrated), with nothing in it; DATABASE_URL names it."""
    with scratch_database(engine, prefix="jd_cut") as url:
        monkeypatch.setenv("DATABASE_URL", url)
        with Database(parse_database_url(url), application_name="seed-app") as app:
            app.run(SEED_TABLE[engine])
        yield url


def add_rows(url: str, first: int, count: int) -> None:
    """The application's own plain INSERT, as before and after the upgrade: job ``deploy``, parameter N."""
    values = ", ".join(f"('deploy', '{{\"ENV\": \"n{n}\"}}')" for n in range(first, first + count))
    with Database(parse_database_url(url), application_name="seed-app") as app:
        app.run(f"INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES {values}")


def migrate_with_window(url: str, seconds: float) -> None:
    """`jenkins-dispatch migrate` with CUTOVER_WINDOW_SECONDS set, as an operator runs it."""
    with mock.patch.dict(os.environ, {"DATABASE_URL": url, "CUTOVER_WINDOW_SECONDS": str(seconds)}):
        assert main(["migrate"]) == 0


def claim_as_the_old_worker(old: Database) -> int | None:
    """The seed's claim, in its own transaction: the id it took, or None when nothing was pending."""
    with old.transaction():
        rows = old.run(SEED_CLAIM)
        if rows:
            old.run(SEED_MARK, id=rows[0]["id"])
    return rows[0]["id"] if rows else None


def rows_of(db: Database) -> dict[int, dict]:
    return {r["id"]: r for r in db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id")}


def history(db: Database, job_id: int) -> list[dict]:
    return db.run("SELECT event, from_status, to_status, actor, detail FROM jenkins_job_events "
                  "WHERE job_id = :id ORDER BY id", id=job_id)


class SeedWorker(threading.Thread):
    """The seed's worker loop in a thread with its own session; a 'job' is a sleep of ``build_seconds``.
    Keeps what it claimed, what it finished (its final UPDATE went through) and every error it was given."""

    def __init__(self, url: str, build_seconds: float, stop: threading.Event):
        super().__init__(daemon=True)
        self.url, self.build_seconds, self.stop = url, build_seconds, stop
        self.claimed: list[int] = []
        self.finished: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        # No statement limit of ours: the seed's sessions wait for the upgrade's locks as long as it takes.
        settings = replace(parse_database_url(self.url), statement_timeout_ms=300_000)
        with Database(settings, application_name="seed-worker") as old:
            while not self.stop.is_set():
                try:
                    job_id = claim_as_the_old_worker(old)
                except DispatchError as exc:
                    self.errors.append(f"claim: {exc}")
                    time.sleep(0.02)
                    continue
                if job_id is None:
                    time.sleep(0.01)
                    continue
                self.claimed.append(job_id)
                time.sleep(self.build_seconds)
                try:
                    old.run(SEED_DONE["completed"], id=job_id)
                    self.finished.append(job_id)
                except DispatchError as exc:
                    self.errors.append(f"done {job_id}: {exc}")


def test_migrate_under_busy_old_workers_loses_no_result_and_their_next_claim_says_what_to_do(seed_url):
    """Two old workers claim and finish jobs as fast as they can while `migrate` runs (on MariaDB file by file,
    its DDL committing as it goes), and a third holds one job across the whole upgrade: every job they claimed
    ends with their result, and all they hear afterwards is the clear message."""
    add_rows(seed_url, 1, 150)
    stop = threading.Event()
    busy = [SeedWorker(seed_url, 0.01, stop) for _ in range(2)]
    try:
        with Database(parse_database_url(seed_url), application_name="seed-holder") as holder:
            held = claim_as_the_old_worker(holder)
            for worker in busy:
                worker.start()
            assert wait_for(lambda: sum(len(w.finished) for w in busy) >= 10, timeout=20)
            migrate_with_window(seed_url, 120)
            holder.run(SEED_DONE["completed"], id=held)  # its job ran across the upgrade, and succeeded
        add_rows(seed_url, 151, 10)  # the application goes on enqueueing
        assert wait_for(lambda: all(any(CLEAR in e for e in w.errors) for w in busy), timeout=20), \
            [w.errors[-3:] for w in busy]
    finally:
        stop.set()
        for worker in busy:
            worker.join(20)

    with Database(parse_database_url(seed_url)) as db:
        rows = rows_of(db)
        assert [e for w in busy for e in w.errors if CLEAR not in e] == []  # no constraint's dump, no lost result
        claimed = {held, *(i for w in busy for i in w.claimed)}
        finished = {held, *(i for w in busy for i in w.finished)}
        assert claimed == finished  # every job an old worker claimed, it could mark done
        assert {i for i, r in rows.items() if r["status"] == "completed"} == finished
        assert {i for i, r in rows.items() if r["status"] == "pending"} == set(rows) - finished
        # The held job was the old worker's when the table was upgraded: its completion is in its history.
        assert rows[held]["dispatch_id"] == f"legacy-{held}" and rows[held]["finished_at"] is not None
        assert rows[held]["last_error"] is None
        events = history(db, held)
        assert events[-1]["to_status"] == "completed" and OLD_WORKER_DONE in events[-1]["detail"]


def test_the_old_workers_result_written_while_the_cutover_marks_its_rows_is_kept_not_deadlocked(seed_url, engine):
    """The moment a CI run caught once in a few hundred: the old worker reports a job done just as 0005 marks the
    rows it holds. Made certain here: the old worker locks its row (its UPDATE's first step), 0005's mark starts
    and waits for that row, then the old worker's UPDATE goes on. When the mark found its rows through an index
    it already held the row's entry there, which the old worker's UPDATE needs next: a deadlock, and InnoDB
    failed one of them (error 1213) — the old worker's result lost, or `migrate` stopped part-way."""
    if engine != "mysql":
        pytest.skip("PostgreSQL upgrades in one transaction, and its row locks are the rows', not index entries'")
    add_rows(seed_url, 1, 40)
    cutover = next(path for number, _, path in migration_files("mysql") if number == 5)
    before_the_mark, mark, the_rest = cutover.read_text().partition("-- Seed rows in 'processing' were claimed")
    assert mark, "0005_cutover.sql no longer has the comment this test splits it at"
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        held = claim_as_the_old_worker(old)
        with mock.patch.object(migrations, "migration_files",
                               lambda dialect: [f for f in migration_files(dialect) if f[0] < 5]):
            migrate_with_window(seed_url, 600)
        with Database(parse_database_url(seed_url), application_name="seed-migrate") as upgrade:
            upgrade.run_script("SET @jd_cutover_window_seconds = 600;\n" + before_the_mark)
            failures: list[str] = []

            def mark_the_old_workers_rows() -> None:
                try:
                    upgrade.run_script(mark + the_rest)
                except DispatchError as exc:
                    failures.append(str(exc))

            with Database(parse_database_url(seed_url)) as watcher, old.transaction():
                old.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=held)
                marking = threading.Thread(target=mark_the_old_workers_rows, daemon=True)
                marking.start()
                assert wait_for(lambda: row_lock_waiters(watcher) == 1, timeout=10)
                try:
                    old.run(SEED_DONE["completed"], id=held)
                except DispatchError as exc:
                    failures.append(f"the old worker's result: {exc}")
            marking.join(20)
            assert not marking.is_alive()
    assert failures == []
    with Database(parse_database_url(seed_url)) as db:
        row = rows_of(db)[held]
        assert row["status"] == "completed" and row["finished_at"] is not None and row["last_error"] is None
        assert OLD_WORKER_DONE in history(db, held)[-1]["detail"]
        assert [r["id"] for r in rows_of(db).values() if r["status"] != "pending"] == [held]


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_the_old_workers_result_for_a_job_it_held_is_kept_during_the_window(seed_url, status):
    add_rows(seed_url, 1, 2)
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        held = claim_as_the_old_worker(old)
        migrate_with_window(seed_url, 600)
        old.run(SEED_DONE[status], id=held)
    with Database(parse_database_url(seed_url)) as db:
        row = rows_of(db)[held]
        assert row["status"] == status and row["finished_at"] is not None and row["lease_expires_at"] is None
        events = history(db, held)
        assert events[-1]["from_status"] == "processing" and events[-1]["to_status"] == status
        assert f"{status} {OLD_WORKER_DONE}" in events[-1]["detail"]
        if status == "failed":
            assert OLD_WORKER_DONE in row["last_error"]
        else:
            assert row["last_error"] is None


def test_a_job_the_old_worker_holds_waits_for_the_window_and_its_late_result_then_changes_nothing(
        seed_url, jenkins):
    """Within the window the reconciler leaves the old worker's job alone; after it, the job is settled (failed,
    with its reason), and the old worker's late 'completed' is refused, saying why."""
    add_rows(seed_url, 1, 1)
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        held = claim_as_the_old_worker(old)
        migrate_with_window(seed_url, 600)
        settings = dispatch_settings(jenkins.base_url)
        run_pass(settings)
        with Database(parse_database_url(seed_url)) as db:
            assert rows_of(db)[held]["status"] == "processing"  # 600 s of window left: not the reconciler's yet
            # The window closes (an operator could shorten it the same way: docs/cutover.md).
            db.run("UPDATE jenkins_dispatch_cutover SET window_ends_at = CURRENT_TIMESTAMP")
            db.run("UPDATE jenkins_jobs_queue SET lease_expires_at = CURRENT_TIMESTAMP WHERE id = :id", id=held)
            summary = run_pass(settings)
            assert summary["reconciled"]["settled"] == 1 and summary["triggered"] == 0
            settled = rows_of(db)[held]
            assert settled["status"] == "failed"
            assert "worker that ran before jenkins-dispatch" in settled["last_error"]
            assert f"jenkins-dispatch retry {held}" in settled["last_error"]
            events_before = history(db, held)

            with pytest.raises(DatabaseError) as refused:
                old.run(SEED_DONE["completed"], id=held)
            message = str(refused.value)
            assert CLEAR in message and "already failed" in message, message
            # The seed's worker then reports 'failed' (its error path): the row says so already, nothing changes.
            old.run(SEED_DONE["failed"], id=held)
            assert rows_of(db)[held] == settled and history(db, held) == events_before
    assert jenkins.counters()["trigger_requests"] == 0  # nothing of the old worker's job is sent again


def test_after_the_window_the_old_workers_result_is_refused_before_the_reconciler_settles(seed_url):
    add_rows(seed_url, 1, 1)
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        held = claim_as_the_old_worker(old)
        migrate_with_window(seed_url, 0)
        with Database(parse_database_url(seed_url)) as db:
            before = rows_of(db)[held]
            with pytest.raises(DatabaseError) as refused:
                old.run(SEED_DONE["completed"], id=held)
            assert CLEAR in str(refused.value) and "window" in str(refused.value)
            assert rows_of(db)[held] == before and before["status"] == "processing"


def test_every_claim_of_the_old_worker_is_refused_and_every_row_stays_for_jenkins_dispatch(seed_url):
    add_rows(seed_url, 1, 3)
    migrate_with_window(seed_url, 600)
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old, \
            Database(parse_database_url(seed_url)) as db:
        before = rows_of(db)
        for _ in range(3):
            with pytest.raises(DatabaseError) as refused:
                claim_as_the_old_worker(old)
            message = str(refused.value)
            assert CLEAR in message and "check constraint" not in message, message
        assert rows_of(db) == before


def test_the_old_worker_cannot_finish_a_job_jenkins_dispatch_runs(seed_url, jenkins):
    migrate_with_window(seed_url, 600)
    add_rows(seed_url, 1, 1)
    run_pass(dispatch_settings(jenkins.base_url))
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        before = rows_of(old)[1]
        assert before["status"] == "processing"
        with pytest.raises(DatabaseError) as refused:
            old.run(SEED_DONE["completed"], id=1)
        assert CLEAR in str(refused.value)
        assert rows_of(old)[1] == before


def test_doctor_shows_the_window_while_it_is_open(seed_url, jenkins):
    add_rows(seed_url, 1, 3)
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        for _ in range(2):
            claim_as_the_old_worker(old)
        migrate_with_window(seed_url, 600)
        checks = run_checks(DoctorOptions(), env_for(seed_url, jenkins.base_url))
        cutover = by_name(checks).get("cutover")
        assert cutover is not None, render(checks)
        assert cutover.status == PASS
        assert "open until" in cutover.detail and "2 jobs" in cutover.detail and "600" in cutover.detail
        old.run(SEED_DONE["completed"], id=1)
        old.run(SEED_DONE["completed"], id=2)
        assert "cutover" in by_name(run_checks(DoctorOptions(), env_for(seed_url, jenkins.base_url)))
        with Database(parse_database_url(seed_url)) as db:
            db.run("UPDATE jenkins_dispatch_cutover SET window_ends_at = CURRENT_TIMESTAMP")
        # Closed, nothing of the old worker's left: doctor says no more about it.
        assert "cutover" not in by_name(run_checks(DoctorOptions(), env_for(seed_url, jenkins.base_url)))


# docs/cutover.md's rollback: the old worker's writes let through again; and forward again afterwards.
ROLLBACK = {
    "postgresql": "DROP TRIGGER jenkins_jobs_queue_old_worker ON jenkins_jobs_queue; "
                  "ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT jenkins_jobs_queue_processing_check, "
                  "DROP CONSTRAINT jenkins_jobs_queue_final_check",
    "mysql": "DROP TRIGGER jenkins_jobs_queue_old_worker; "
             "ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT jenkins_jobs_queue_processing_check, "
             "DROP CONSTRAINT jenkins_jobs_queue_final_check",
}
CUTOVER_MIGRATION = {"postgresql": 8, "mysql": 5}


def test_the_guides_rollback_lets_the_old_worker_run_again_and_migrate_then_cuts_over_again(seed_url, engine):
    add_rows(seed_url, 1, 4)
    migrate_with_window(seed_url, 600)
    with Database(parse_database_url(seed_url), application_name="dba") as dba:
        if engine == "mysql":  # DDL commits as it goes there: a script, not a transaction
            dba.run_script(ROLLBACK[engine])
        else:
            dba.run(ROLLBACK[engine])
    with Database(parse_database_url(seed_url), application_name="seed-worker") as old:
        done = claim_as_the_old_worker(old)
        old.run(SEED_DONE["completed"], id=done)  # the old worker runs the queue again
        held = claim_as_the_old_worker(old)  # and holds a job when jenkins-dispatch comes back

        with Database(parse_database_url(seed_url)) as db:
            db.run("DELETE FROM jenkins_dispatch_migrations WHERE version = :v", v=CUTOVER_MIGRATION[engine])
        migrate_with_window(seed_url, 600)

        with pytest.raises(DatabaseError) as refused:
            claim_as_the_old_worker(old)
        assert CLEAR in str(refused.value)
        old.run(SEED_DONE["completed"], id=held)  # within the new window: kept
    with Database(parse_database_url(seed_url)) as db:
        rows = rows_of(db)
        assert rows[done]["status"] == "completed" and rows[done]["finished_at"] is not None
        assert rows[held]["status"] == "completed" and rows[held]["dispatch_id"] == f"legacy-{held}"
        assert OLD_WORKER_DONE in history(db, held)[-1]["detail"]
        assert [r["status"] for i, r in sorted(rows.items()) if i not in (done, held)] == ["pending", "pending"]


def test_migrate_refuses_a_bad_window_in_one_line_and_leaves_the_table_as_it_was(seed_url, capsys):
    add_rows(seed_url, 1, 1)
    with mock.patch.dict(os.environ, {"DATABASE_URL": seed_url, "CUTOVER_WINDOW_SECONDS": "-5"}):
        assert main(["migrate"]) == 2
    err = capsys.readouterr().err
    assert "CUTOVER_WINDOW_SECONDS" in err and len(err.strip().splitlines()) == 1, err
    with Database(parse_database_url(seed_url)) as db:
        assert sorted(rows_of(db)[1]) == ["id", "job_name", "parameters", "priority", "scheduled_at", "status"]


GRANTS = {  # the old worker's own database user, allowed its table and nothing else (created, then dropped)
    "postgresql": ("CREATE ROLE {user} LOGIN; GRANT SELECT, INSERT, UPDATE ON jenkins_jobs_queue TO {user}",
                   "DROP OWNED BY {user}; DROP ROLE {user}"),
    "mysql": ("CREATE USER '{user}'@'%'; GRANT SELECT, INSERT, UPDATE ON {db}.jenkins_jobs_queue TO '{user}'@'%'",
              "DROP USER '{user}'@'%'"),
}


def test_an_old_worker_whose_user_may_touch_only_its_table_still_has_its_result_kept(seed_url, engine):
    """The trigger writes the job's history and reads the window with the rights of whoever ran `migrate`."""
    settings = parse_database_url(seed_url)
    user = f"seed_app_{settings.dbname[-8:]}"
    add_rows(seed_url, 1, 2)
    with Database(settings, application_name="dba") as dba:
        grant, revoke = GRANTS[engine]
        for statement in grant.format(user=user, db=settings.dbname).split("; "):
            dba.run(statement)
        try:
            with Database(replace(settings, user=user, password=None), application_name="seed-worker") as old:
                held = claim_as_the_old_worker(old)
                migrate_with_window(seed_url, 600)
                old.run(SEED_DONE["completed"], id=held)
                with pytest.raises(DatabaseError) as refused:
                    claim_as_the_old_worker(old)
                assert CLEAR in str(refused.value)
        finally:
            for statement in revoke.format(user=user).split("; "):
                dba.run(statement)
        assert rows_of(dba)[held]["status"] == "completed"
        assert OLD_WORKER_DONE in history(dba, held)[-1]["detail"]
