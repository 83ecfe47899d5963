"""Schema on MySQL / MariaDB: created fresh, resumed after a partial failure, upgraded in place from the seed's
table keeping every row, safe to run concurrently, refused on servers without SKIP LOCKED."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime, timedelta

import pymysql
import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import MigrationError
from jenkins_dispatch.store import migrations
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate, migration_files

from ..engines import scratch_database

ALL = [f"{n:04d}_{name}" for n, name, _ in migration_files("mysql")]
TABLES = {"jenkins_jobs_queue", "jenkins_job_events", "jenkins_job_limits", "jenkins_job_pauses",
          "jenkins_dispatchers", "jenkins_dispatch_locks", "jenkins_dispatch_migrations"}
QUEUE_CHECKS = {f"jenkins_jobs_queue_{c}_check" for c in (
    "status", "job_name", "parameters", "attempts", "max_attempts", "result", "processing", "final")}
QUEUE_INDEXES = {"PRIMARY", "jenkins_jobs_queue_dispatch_id_key", "jenkins_jobs_queue_claim_by_controller_idx",
                 "jenkins_jobs_queue_in_flight_idx", "jenkins_jobs_queue_lease_idx", "jenkins_jobs_queue_dedupe_key",
                 "jenkins_jobs_queue_finished_idx", "jenkins_jobs_queue_status_finished_idx",
                 "jenkins_jobs_queue_jenkins_queue_id_idx", "jenkins_jobs_queue_due_idx",
                 "jenkins_jobs_queue_open_job_idx"}


@pytest.fixture
def mysql_url():
    """The URL of a fresh, empty database on the tests' MySQL/MariaDB server (MYSQL_TEST_URL, else the local one;
    skipped without one), dropped afterwards."""
    with scratch_database("mysql", prefix="jd_mig") as url:
        yield url


@pytest.fixture
def mysql_db(mysql_url):
    with Database(parse_database_url(mysql_url)) as db:
        yield db


def _migration_lock_was_given_back(url: str) -> bool:
    """Whether a session of its own can take the migration lock, as the next `migrate` would. The runner gives
    the lock back by closing its session, and the server ends a closed session on a thread of its own: straight
    after `migrate` returns, IS_USED_LOCK may still name the closing session for a moment (seen once in 3,500
    tests under load). So wait as `migrate` does, up to 10 s: a lock never given back still fails. (Not the
    fixture's session: a named lock is re-entrant, its own session would take it even were it still held.)"""
    return _raw(url, "SELECT GET_LOCK(CONCAT('jenkins-dispatch-migrate:', LEFT(DATABASE(), 38)), 10)") == [(1,)]


def _raw(url: str, sql: str, sql_mode: str | None = None) -> list[tuple]:
    """Run ``sql`` (several statements) the way a seed application would: its own session, its own mode."""
    s = parse_database_url(url)
    conn = pymysql.connect(host=s.host, port=s.port, user=s.user, password=s.password or "", database=s.dbname,
                           autocommit=True, client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as cursor:
            if sql_mode is not None:
                cursor.execute(f"SET sql_mode = '{sql_mode}'")
            cursor.execute(sql)
            rows = list(cursor.fetchall())
            while cursor.nextset():
                rows = list(cursor.fetchall()) or rows
        return rows
    finally:
        conn.close()


def _schema(db) -> dict:
    """What information_schema says about the tables: columns, constraints, indexes, triggers."""
    def names(sql):
        return {r["n"] for r in db.run(sql)}
    return {
        "tables": names("SELECT table_name AS n FROM information_schema.tables WHERE table_schema = DATABASE()"),
        "columns": {(r["t"], r["c"]): r["type"] for r in db.run(
            "SELECT table_name AS t, column_name AS c, column_type AS type FROM information_schema.columns "
            "WHERE table_schema = DATABASE()")},
        "constraints": names("SELECT constraint_name AS n FROM information_schema.table_constraints "
                             "WHERE constraint_schema = DATABASE() AND table_name = 'jenkins_jobs_queue'"),
        "indexes": names("SELECT DISTINCT index_name AS n FROM information_schema.statistics "
                         "WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue'"),
        "triggers": names("SELECT trigger_name AS n FROM information_schema.triggers "
                          "WHERE trigger_schema = DATABASE()"),
    }


def test_fresh_database_is_created_and_rerun_is_a_noop(mysql_url, mysql_db):
    assert migrate(mysql_db) == ALL
    schema = _schema(mysql_db)
    assert migrate(mysql_db) == []
    assert _schema(mysql_db) == schema
    # Every step of every file may run again (what a retry after a failure part-way does): nothing changes.
    for _, _, path in migration_files("mysql"):
        mysql_db.run_script(path.read_text())
    assert _schema(mysql_db) == schema
    assert schema["tables"] >= TABLES
    assert schema["constraints"] >= QUEUE_CHECKS and schema["indexes"] >= QUEUE_INDEXES
    assert schema["columns"][("jenkins_jobs_queue", "id")].startswith("bigint")
    assert schema["columns"][("jenkins_jobs_queue", "scheduled_at")] == "datetime(6)"
    assert "jenkins_jobs_queue_utc" in schema["triggers"]
    assert {r["name"] for r in mysql_db.run("SELECT name FROM jenkins_dispatch_locks")} == {"caps", "pauses"}
    assert [r["version"] for r in mysql_db.run("SELECT version FROM jenkins_dispatch_migrations")] == [
        n for n, _, _ in migration_files("mysql")]
    # The session is left as it was found: no migration lock held, MariaDB's statement limit back in place.
    assert _migration_lock_was_given_back(mysql_url)
    time_limit = mysql_db.run("SELECT @@session.max_statement_time AS time_limit")[0]["time_limit"]
    assert time_limit == mysql_db.settings.statement_timeout_ms / 1000


def test_the_schema_enforces_its_rules_under_postgresqls_names(mysql_db):
    migrate(mysql_db)
    for values, broken in [
        ("'   ', '{}', 'pending'", "jenkins_jobs_queue_job_name_check"),
        ("'a', '[1]', 'pending'", "jenkins_jobs_queue_parameters_check"),
        ("'a', '{}', 'waiting'", "jenkins_jobs_queue_status_check"),
        ("'a', '{}', 'completed'", "jenkins_jobs_queue_final_check"),
        ("'a', '{}', 'processing'", "jenkins_jobs_queue_processing_check"),
    ]:
        with pytest.raises(Exception) as refused:
            mysql_db.run(f"INSERT INTO jenkins_jobs_queue (job_name, parameters, status) VALUES ({values})")
        assert getattr(refused.value, "constraint", None) == broken, refused.value
    # One unfinished row per dedupe key; a finished one frees the key.
    mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, dedupe_key) VALUES ('a', 'k')")
    with pytest.raises(Exception) as duplicate:
        mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, dedupe_key) VALUES ('b', 'k')")
    assert duplicate.value.constraint == "jenkins_jobs_queue_dedupe_key"
    mysql_db.run("UPDATE jenkins_jobs_queue SET status = 'cancelled', finished_at = NOW(6) WHERE dedupe_key = 'k'")
    mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, dedupe_key) VALUES ('b', 'k')")
    # Caps and pauses are keyed by the item name, case-insensitively, up to 1024 characters.
    long_name = "folder/" + "x" * 1000
    mysql_db.run("INSERT INTO jenkins_job_limits (job_name, max_in_flight) VALUES (:n, 1)", n=long_name)
    mysql_db.run("INSERT INTO jenkins_job_limits (job_name, max_in_flight) VALUES (:n, 2) "
                 "ON DUPLICATE KEY UPDATE max_in_flight = VALUES(max_in_flight)", n=long_name.upper())
    assert mysql_db.run("SELECT COUNT(*) AS n, MAX(max_in_flight) AS m FROM jenkins_job_limits")[0] == {"n": 1, "m": 2}


def test_an_application_insert_in_another_time_zone_is_stored_in_utc(mysql_url, mysql_db):
    migrate(mysql_db)
    _raw(mysql_url, "SET time_zone = '+05:00'; INSERT INTO jenkins_jobs_queue (job_name) VALUES ('local');"
                    "INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('later', '2030-01-01 12:00:00')")
    rows = {r["job_name"]: r for r in mysql_db.run("SELECT job_name, scheduled_at, created_at FROM jenkins_jobs_queue")}
    now = datetime.now(UTC)
    assert abs(rows["local"]["scheduled_at"] - now) < timedelta(seconds=30)
    assert abs(rows["local"]["created_at"] - now) < timedelta(seconds=30)
    assert rows["later"]["scheduled_at"] == datetime(2030, 1, 1, 7, 0, tzinfo=UTC)


def test_a_migration_that_stopped_part_way_is_resumed(mysql_url, mysql_db):
    """DDL commits as it goes: a failure leaves part of a file applied; running migrate again completes it."""
    migrate(mysql_db)
    complete = _schema(mysql_db)
    # As if 0001 had stopped part-way: pieces missing from the middle and the end, nothing recorded (the
    # trigger, already there, must be replaced without an error).
    mysql_db.run("ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT jenkins_jobs_queue_final_check, "
                 "DROP INDEX jenkins_jobs_queue_claim_by_controller_idx, DROP INDEX jenkins_jobs_queue_dedupe_key, "
                 "DROP COLUMN open_dedupe_key, DROP COLUMN cancel_requested_at")
    mysql_db.run("DROP TABLE jenkins_job_pauses")
    mysql_db.run("DELETE FROM jenkins_dispatch_locks WHERE name = 'pauses'")
    mysql_db.run("DELETE FROM jenkins_dispatch_migrations")
    assert _schema(mysql_db) != complete
    assert migrate(mysql_db) == ALL
    assert _schema(mysql_db) == complete
    assert mysql_db.run("SELECT COUNT(*) AS n FROM jenkins_dispatch_locks")[0]["n"] == 2


def test_a_queue_migrated_before_0003_gains_its_column_and_indexes_in_place(mysql_db):
    """A database migrated by 0001 and 0002 as they were before 0003 existed, holding rows: no open_job_key,
    the claim-changed indexes without the claim order. migrate applies 0003 (and the later files): the column and its index are
    added, the three indexes made again in claim order, and every unfinished row is keyed as its job's cap and
    pause are (a final row not at all). The files after 0003 run after it, as on any database that lacks them."""
    migrate(mysql_db)
    complete = _schema(mysql_db)
    final_shape = _index_columns(mysql_db)
    mysql_db.run("ALTER TABLE jenkins_jobs_queue DROP INDEX jenkins_jobs_queue_open_job_idx, DROP COLUMN open_job_key, "
                 "DROP INDEX jenkins_jobs_queue_lease_idx, ADD INDEX jenkins_jobs_queue_lease_idx (status, lease_expires_at), "
                 "DROP INDEX jenkins_jobs_queue_in_flight_idx, "
                 "ADD INDEX jenkins_jobs_queue_in_flight_idx (status, job_name(255))")
    mysql_db.run("DELETE FROM jenkins_dispatch_migrations WHERE version >= 3")
    mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, status, dispatch_id, lease_expires_at, finished_at) "
                 "VALUES ('Deploy', 'pending', NULL, NULL, NULL), ('team/app', 'processing', 'd-1', NOW(6), NULL), "
                 "('deploy', 'completed', 'd-2', NULL, NOW(6))")
    # 0003 and every later file (each written to be run again) are what such a database lacks.
    assert migrate(mysql_db) == [name for name in ALL if int(name[:4]) >= 3]
    assert _schema(mysql_db) == complete and _index_columns(mysql_db) == final_shape
    keys = {r["job_name"]: r["k"] for r in mysql_db.run(
        "SELECT job_name, open_job_key = UNHEX(SHA2(LOWER(job_name), 256)) AS k FROM jenkins_jobs_queue")}
    assert keys == {"Deploy": 1, "team/app": 1, "deploy": None}  # NULL once final


def test_a_failing_migration_says_which_and_releases_the_lock(mysql_url, mysql_db):
    # A seed row whose status no rule admits: the constraint cannot be added, as on PostgreSQL.
    _raw(mysql_url, "CREATE TABLE jenkins_jobs_queue (id INT AUTO_INCREMENT PRIMARY KEY, job_name VARCHAR(255), "
                    "parameters TEXT, status VARCHAR(20) DEFAULT 'pending', priority INT DEFAULT 0, "
                    "scheduled_at DATETIME DEFAULT CURRENT_TIMESTAMP);"
                    "INSERT INTO jenkins_jobs_queue (job_name, status) VALUES ('a', 'queued')")
    with pytest.raises(MigrationError, match=r"migration 0001_queue failed part-way.*running migrate again") as failed:
        migrate(mysql_db)
    assert "jenkins_jobs_queue_status_check" in str(failed.value)
    assert _migration_lock_was_given_back(mysql_url)
    # Once the operator settles the row, migrate finishes the job.
    mysql_db.run("UPDATE jenkins_jobs_queue SET status = 'pending'")
    assert migrate(mysql_db) == ALL
    assert mysql_db.run("SELECT status FROM jenkins_jobs_queue") == [{"status": "pending"}]


SEED = """
CREATE TABLE jenkins_jobs_queue (
    id INT AUTO_INCREMENT PRIMARY KEY,
    job_name VARCHAR(255),
    parameters {parameters_type},
    status VARCHAR(20) DEFAULT 'pending',
    priority INT DEFAULT 0,
    scheduled_at DATETIME DEFAULT CURRENT_TIMESTAMP
);
"""
# (job_name, parameters, status, priority, scheduled_at) as the seed held them; text-only parameters apart.
SEED_ROWS = [
    ("deploy", '{"ENV": "prod", "N": 1.10}', "pending", 5, "2024-05-01 10:00:00"),
    ("deploy", None, "pending", None, None),
    ("build", '{"BRANCH": "main"}', "processing", 0, "2024-05-01 08:00:00"),
    ("build", '{"BRANCH": "dev"}', "completed", 0, "2024-05-01 07:00:00"),
    ("team/app/test", "[1, 2]", "pending", 1, "2024-05-01 11:00:00"),
    ("nightly", '"just a string"', "failed", 0, "2024-05-01 06:00:00"),
    ("nightly", "null", "cancelled", 0, "2024-05-01 05:00:00"),
    ("report", "{}", None, 2, "2024-05-01 04:00:00"),
    (None, '{"A": "b"}', "pending", 0, "2024-05-01 03:00:00"),
    ("   ", "{}", "processing", 0, "2024-05-01 02:00:00"),
    ("zero", '{"Z": 0}', "pending", 0, "0000-00-00 00:00:00"),
]
TEXT_ONLY_ROWS = [
    ("broken", "not json {", "pending", 0, "2024-05-01 01:00:00"),
    ("blank", "   ", "pending", 0, "2024-05-01 01:30:00"),
]
LEGACY_ERROR = ("was processing under the dispatcher that ran before jenkins-dispatch; its Jenkins build cannot be "
                "identified, so it is not triggered again (check Jenkins; retry it if it never ran)")


def _sql_value(value) -> str:
    return "NULL" if value is None else "'" + str(value).replace("'", "''") + "'"


@pytest.mark.parametrize("parameters_type", ["TEXT", "JSON"])
def test_seed_table_is_upgraded_in_place_keeping_every_row(mysql_url, mysql_db, parameters_type):
    rows = SEED_ROWS + (TEXT_ONLY_ROWS if parameters_type == "TEXT" else [])
    values = ",\n".join("(" + ", ".join(_sql_value(v) for v in row) + ")" for row in rows)
    # The seed's application ran without strict mode (its zero date went in), as old MySQL setups did.
    _raw(mysql_url, SEED.format(parameters_type=parameters_type)
         + f"INSERT INTO jenkins_jobs_queue (job_name, parameters, status, priority, scheduled_at) VALUES {values}",
         sql_mode="")
    before = datetime.now(UTC) - timedelta(seconds=1)

    assert migrate(mysql_db) == ALL
    after = {r["id"]: r for r in mysql_db.run(
        "SELECT id, job_name, CAST(parameters AS CHAR) AS parameters, status, priority, scheduled_at, attempts, "
        "max_attempts, dispatch_id, lease_expires_at, last_error, finished_at FROM jenkins_jobs_queue")}
    assert sorted(after) == list(range(1, len(rows) + 1))  # every row, under its id

    for row_id, (job_name, parameters, status, priority, scheduled_at) in enumerate(rows, start=1):
        row = after[row_id]
        got = json.loads(row["parameters"])
        if parameters is None or parameters == "null":
            assert got == {}, row_id
        elif parameters.strip().startswith("{"):
            assert got == json.loads(parameters), row_id
        elif parameters.strip():
            assert got == {"_unparsed_parameters": parameters}, (row_id, got)
        else:
            assert got == {}, row_id
        assert row["priority"] == (priority or 0), row_id
        if scheduled_at is None or scheduled_at.startswith("0000"):
            assert row["scheduled_at"] >= before, row_id  # due now
        else:  # the server runs in UTC here: the seed's wall-clock time is kept
            assert row["scheduled_at"] == datetime.fromisoformat(scheduled_at).replace(tzinfo=UTC), row_id
        if job_name is None or not job_name.strip():
            # No name to dispatch under: kept for the record, settled.
            assert row["job_name"] == "?" and row["status"] == "failed" and row["finished_at"] is not None
            assert "no job name" in row["last_error"]
            continue
        assert row["job_name"] == job_name, row_id
        assert row["status"] == (status or "pending"), row_id
        if row["status"] in ("completed", "failed", "cancelled"):
            assert row["finished_at"] >= before, row_id
        else:
            assert row["finished_at"] is None, row_id
        if status == "processing":
            assert row["dispatch_id"] == f"legacy-{row_id}" and row["lease_expires_at"] is not None
            assert row["attempts"] == row["max_attempts"] == 3 and row["last_error"] == LEGACY_ERROR
        else:
            assert row["dispatch_id"] is None and row["attempts"] == 0 and row["last_error"] is None, row_id

    schema = _schema(mysql_db)
    assert schema["columns"][("jenkins_jobs_queue", "id")].startswith("bigint")
    assert schema["columns"][("jenkins_jobs_queue", "job_name")] == "varchar(1024)"
    assert schema["columns"][("jenkins_jobs_queue", "scheduled_at")] == "datetime(6)"
    assert schema["constraints"] >= QUEUE_CHECKS and schema["indexes"] >= QUEUE_INDEXES
    # The seed's AUTO_INCREMENT keeps counting; the upgraded table takes rows like a fresh one.
    mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('next')")
    assert mysql_db.run("SELECT MAX(id) AS id FROM jenkins_jobs_queue")[0]["id"] == len(rows) + 1
    assert migrate(mysql_db) == []


def test_concurrent_migrations_apply_once(mysql_url):
    results, errors = [], []
    start = threading.Barrier(4)

    def run():
        try:
            with Database(parse_database_url(mysql_url)) as db:
                db.run("SELECT 1")  # connected before the race starts
                start.wait()
                results.append(migrate(db))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, 0, len(ALL)]
    with Database(parse_database_url(mysql_url)) as db:
        assert db.run("SELECT COUNT(*) AS n FROM jenkins_dispatch_migrations")[0]["n"] == len(ALL)
        assert db.run("SELECT COUNT(*) AS n FROM jenkins_dispatch_locks")[0]["n"] == 2


def test_migrate_waits_for_the_lock_and_refuses_in_one_line_when_it_never_comes(mysql_url, mysql_db, monkeypatch):
    holder = pymysql.connect(**_connect_args(mysql_url))
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(CONCAT('jenkins-dispatch-migrate:', LEFT(DATABASE(), 38)), 0)")
        # The real wait is 60 s; the statement's own timeout is what this test shortens.
        statements = dict(migrations.statements.load("mysql"))
        statements["lock_migrations"] = statements["lock_migrations"].replace(", 60)", ", 1)")
        monkeypatch.setattr(migrations.statements, "load", lambda dialect: statements)
        with pytest.raises(MigrationError, match=r"^another `jenkins-dispatch migrate` held the migration lock"):
            migrate(mysql_db)
        assert "jenkins_jobs_queue" not in _schema(mysql_db)["tables"]
    finally:
        holder.close()
    assert migrate(mysql_db) == ALL


def test_an_old_server_is_refused_before_anything_is_done(mysql_db, monkeypatch):
    from jenkins_dispatch.store.dialects.mysql import server

    assert mysql_db.unsupported_server() is None  # the test server itself passes
    seen = []

    def as_if_older(version):
        seen.append(version)
        return "MariaDB 10.5.22 is too old for jenkins-dispatch (it has no SKIP LOCKED, ...)"

    monkeypatch.setattr(server, "unsupported_server", as_if_older)
    with pytest.raises(MigrationError, match=r"^MariaDB 10.5.22 is too old"):
        migrate(mysql_db)
    assert seen == [mysql_db.server_version()] and "MariaDB" in seen[0]
    assert _schema(mysql_db)["tables"] == set()  # not even the bookkeeping table


def _connect_args(url: str) -> dict:
    s = parse_database_url(url)
    return dict(host=s.host, port=s.port, user=s.user, password=s.password or "", database=s.dbname,
                autocommit=True)


def _index_columns(db) -> dict[str, list[str]]:
    rows = db.run("SELECT index_name AS i, column_name AS c FROM information_schema.statistics "
                  "WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue' ORDER BY index_name, seq_in_index")
    columns: dict[str, list[str]] = {}
    for r in rows:
        columns.setdefault(r["i"], []).append(r["c"])
    return columns


# The indexes a claim changes (status leads them) whose second column does not already order pending rows
# for the claim: NULL until later (lease, finished_at) or shared by many rows (job_name).
_STATUS_LED = ("jenkins_jobs_queue_in_flight_idx", "jenkins_jobs_queue_lease_idx",
               "jenkins_jobs_queue_status_finished_idx")


def test_indexes_a_claim_changes_keep_pending_rows_in_claim_order(mysql_db):
    # InnoDB orders entries with equal keys by id: pending rows far apart by id would put a claim's ten rows
    # on ten pages of each such index (read from disk once the table outgrows the buffer pool). Claim order
    # after the leading columns keeps them side by side, as in the claim index.
    migrate(mysql_db)
    columns = _index_columns(mysql_db)
    for name in _STATUS_LED:
        assert columns[name][0] == "status" and columns[name][2:] == ["claim_priority", "scheduled_at"], (name, columns[name])


def queue_updates() -> list[tuple[str, str]]:
    """Every UPDATE of the queue in a migration file, as written there: up to the ``;`` that ends it, or, for
    0001's time-zone fix (a prepared statement), up to the quote that ends its text."""
    found = []
    for number, name, path in migration_files("mysql"):
        text = path.read_text()
        for match in re.finditer(r"^\s*('?)UPDATE jenkins_jobs_queue\b", text, re.M):
            start = match.start(1) + len(match.group(1))
            if match.group(1):
                unquoted = text.replace("''", "\0\0")
                statement = unquoted[start:unquoted.index("'", start)].replace("\0\0", "'")
            else:
                statement = text[start:text.index(";\n", start)]
            found.append((f"{number:04d}_{name}", statement))
    return found


def test_every_update_of_the_queue_in_a_migration_walks_the_primary_key(mysql_db):
    """The worker that ran before jenkins-dispatch may still run while `migrate` upgrades its table (MySQL's DDL
    commits as it goes): its UPDATE of one row by id locks the row, then the row's index entries. A migration's
    UPDATE that found its rows through a secondary index took them the other way round, and the two could
    deadlock; InnoDB then failed the old worker's lighter statement, and the job's result was lost (a CI run:
    0005's legacy mark against the old worker's 'completed', error 1213). Walking the primary key, a migration
    only ever waits for such a row. Checked with EXPLAIN on a table full enough to tempt the optimizer."""
    updates = queue_updates()
    assert len(updates) >= 10, updates  # the pattern still finds them
    migrate(mysql_db)
    mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('deploy', '{}')")
    for _ in range(11):
        mysql_db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                     "SELECT job_name, parameters FROM jenkins_jobs_queue")
    mysql_db.run("ANALYZE TABLE jenkins_jobs_queue")
    walked = {}
    for migration, statement in updates:
        plan = mysql_db.run("EXPLAIN " + statement)
        walked[(migration, statement.splitlines()[0])] = [
            (step["table"], step["key"]) for step in plan
            if step["table"] in ("jenkins_jobs_queue", "q") and step["key"] not in (None, "PRIMARY")]
    assert {where: steps for where, steps in walked.items() if steps} == {}
