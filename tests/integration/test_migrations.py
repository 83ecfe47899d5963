"""Schema: created fresh, upgraded in place from the seed's table, safe to run concurrently; on each engine
(the MySQL upgrade of its own seed table is tested in test_migrations_mysql.py)."""

import threading

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import DatabaseError
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate, migration_files

from ..engines import scratch_database, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

SEED = """
CREATE TABLE jenkins_jobs_queue (
    id SERIAL PRIMARY KEY,
    job_name VARCHAR(255) NOT NULL,
    parameters JSON,
    status VARCHAR(20) DEFAULT 'pending',
    priority INT DEFAULT 0,
    scheduled_at TIMESTAMP DEFAULT NOW()
);
INSERT INTO jenkins_jobs_queue (job_name, parameters, status, priority, scheduled_at) VALUES
    ('deploy', '{"ENV": "prod"}', 'pending', 5, now() - interval '1 hour'),
    ('deploy', NULL, 'pending', 0, now() - interval '2 hours'),
    ('build', '{"BRANCH": "main"}', 'processing', 0, now() - interval '3 hours'),
    ('build', '{"BRANCH": "dev"}', 'completed', 0, now() - interval '4 hours'),
    ('team/app/test', '[1, 2]', 'pending', 1, now());
"""


@pytest.fixture
def empty_database(engine):
    with scratch_database(engine, prefix="jd_mig") as url:
        yield url


def test_fresh_database_is_created_and_rerun_is_a_noop(empty_database, engine):
    with Database(parse_database_url(empty_database)) as db:
        assert migrate(db) == [f"{n:04d}_{name}" for n, name, _ in migration_files(engine)]
        assert migrate(db) == []
        tables = {r["t"] for r in db.run(
            "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = "
            + sql_for(engine, postgresql="current_schema()", mysql="DATABASE()"))}
        assert {"jenkins_jobs_queue", "jenkins_job_limits", "jenkins_job_events", "jenkins_dispatch_migrations"} <= tables
        if engine == "postgresql":  # a storage parameter of PostgreSQL's autovacuum; InnoDB has no counterpart
            options = db.run("SELECT reloptions FROM pg_class WHERE relname = 'jenkins_jobs_queue'")[0]["reloptions"]
            assert "autovacuum_vacuum_scale_factor=0.01" in options


@pytest.mark.postgresql_only(reason="the seed table is PostgreSQL SQL; MySQL's seed upgrade is in test_migrations_mysql.py")
def test_seed_table_is_upgraded_in_place_keeping_every_row(empty_database):
    with Database(parse_database_url(empty_database)) as db:
        db.run(SEED)
        migrate(db)
        rows = {r["id"]: r for r in db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id")}
        assert len(rows) == 5
        assert rows[1]["parameters"] == {"ENV": "prod"} and rows[1]["priority"] == 5
        assert rows[2]["parameters"] == {}
        assert rows[4]["status"] == "completed" and rows[4]["finished_at"] is not None
        assert rows[5]["parameters"] == {"_unparsed_parameters": "[1, 2]"}  # kept, not dropped
        legacy = rows[3]
        assert legacy["status"] == "processing" and legacy["dispatch_id"] == "legacy-3"
        assert legacy["attempts"] == legacy["max_attempts"] and "not triggered again" in legacy["last_error"]
        types = {r["c"]: r["t"] for r in db.run(
            "SELECT column_name AS c, data_type AS t FROM information_schema.columns "
            "WHERE table_name = 'jenkins_jobs_queue'")}
        assert types["id"] == "bigint" and types["parameters"] == "jsonb"
        assert types["scheduled_at"] == "timestamp with time zone"
        # The seed's serial keeps counting, and the upgraded table works like a fresh one.
        queue = Queue(db, lease_seconds=60)
        assert queue.enqueue("deploy").id == 6
        claimed = [j.id for j in queue.claim_batch(10)]
        assert claimed == [1, 5, 2, 6]  # priority, then scheduled_at


def test_concurrent_migrations_apply_once(empty_database, engine):
    results, errors = [], []

    def run():
        try:
            with Database(parse_database_url(empty_database)) as db:
                results.append(migrate(db))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, 0, len(migration_files(engine))]


def test_a_pause_from_before_pauses_per_controller_holds_on_every_controller(empty_database, monkeypatch):
    """0014_controller_pauses (MySQL 0011): each existing pause keeps holding its job back everywhere."""
    from jenkins_dispatch.store import migrations

    every = migrations.migration_files
    with Database(parse_database_url(empty_database)) as db:
        monkeypatch.setattr(migrations, "migration_files",
                            lambda dialect: [m for m in every(dialect) if m[1] != "controller_pauses"])
        migrate(db)
        queue = Queue(db)
        queue.enqueue("deploy", controller="b")
        queue.enqueue("deploy")
        queue.enqueue("build", controller="b")
        # As the pause statement of that schema wrote it (today's names a controller column it had not).
        db.run("INSERT INTO jenkins_job_pauses (job_name, reason) VALUES ('Deploy', 'from before')")
        monkeypatch.setattr(migrations, "migration_files", every)
        assert [name.split("_", 1)[1] for name in migrate(db)] == ["controller_pauses"]
        [pause] = queue.pauses()
        assert (pause.job_name, pause.controller, pause.reason) == ("Deploy", None, "from before")
        assert [j.job_name for j in queue.claim_batch(10, controller="b")] == ["build"]
        assert queue.claim_batch(10) == []


@pytest.mark.postgresql_only(reason="JIT compilation and indexes not yet usable by older snapshots are PostgreSQL's")
def test_an_insert_right_after_the_upgrade_compiles_nothing_while_older_snapshots_hide_the_new_indexes(
        empty_database):
    """The seed's worker changed rows while another transaction was open in the cluster (its xid older than the
    upgrade's): PostgreSQL builds the new indexes with indcheckxmin, and sessions whose snapshots reach back that
    far cannot plan with them. The fair-share trigger's lookups then fell back to a sort it had switched off, cost
    ~10^10, and PostgreSQL compiled each one with LLVM: ~0.35 s a row here, past the 15 s statement timeout for a
    20-row INSERT on a loaded CI machine. Seen in auto_explain's plans of the trigger's statements."""
    url = parse_database_url(empty_database)
    with Database(url) as db, Database(url) as elsewhere, Database(url) as application:
        if not db.run("SELECT pg_jit_available() AS jit")[0]["jit"]:
            pytest.skip("this PostgreSQL has no JIT compiler")
        try:
            application.run("LOAD 'auto_explain'")
        except DatabaseError:
            pytest.skip("this PostgreSQL has no auto_explain module")
        db.run(SEED)
        with elsewhere.transaction():
            elsewhere.run("SELECT txid_current()")  # an xid older than the upgrade's, running throughout
            db.run("UPDATE jenkins_jobs_queue SET status = 'processing' WHERE id = 1")  # the old worker's claim
            migrate(db)
            hidden = db.run("SELECT count(*) AS n FROM pg_index "
                            "WHERE indrelid = 'jenkins_jobs_queue'::regclass AND indcheckxmin")[0]["n"]
            assert hidden > 0  # the situation this test is about
            for setting in ("auto_explain.log_nested_statements = on", "auto_explain.log_min_duration = 0",
                            "client_min_messages = log"):
                application.run(f"SET {setting}")
            application.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')")
            plans = [(n.get(b"M", b"") + b"\n" + n.get(b"W", b"")).decode() for n in application.connection().notices]
        assert any("jenkins_dispatch_fair_round" in p for p in plans)  # the trigger's lookups were seen
        assert [p for p in plans if "JIT:" in p] == []
