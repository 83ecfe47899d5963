"""Both database engines for the benchmarks: a scratch database on each, emptied and filled fast, and the few
statements a benchmark sends itself (the seed's loop, JSON lookups) in each engine's SQL.

PostgreSQL comes from tests/pg_server.py. MySQL/MariaDB: MYSQL_TEST_URL when set, else the server on
127.0.0.1:3306 as root with an empty password when it answers, else none (its rows are then left out and
the table says why). The scratch databases here are the benchmarks' own (a unique name, dropped after),
so the benchmarks need nothing of the tests' MySQL machinery.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import DatabaseUnavailable
from jenkins_dispatch.store.db import Database, DatabaseError, Session
from jenkins_dispatch.store.migrations import migrate
from tests.pg_server import postgres_server
from tests.pg_server import scratch_database as pg_scratch_database

MYSQL_LOCAL_URL = "mysql://root@127.0.0.1:3306/mysql"

# The seed's dispatcher, as the issue describes it: one job per transaction, in each engine's SQL (the
# same statements; MySQL's NOW() has whole seconds unless asked for microseconds).
SEED = {
    "postgresql": {
        "claim": "SELECT id FROM jenkins_jobs_queue WHERE status = 'pending' AND scheduled_at <= now() "
                 "ORDER BY priority DESC, scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED",
        "mark": "UPDATE jenkins_jobs_queue SET status = 'processing', dispatch_id = :d, lease_expires_at = now() "
                "WHERE id = :id",
        "done": "UPDATE jenkins_jobs_queue SET status = 'completed', finished_at = now() WHERE id = :id",
    },
    "mysql": {
        "claim": "SELECT id FROM jenkins_jobs_queue WHERE status = 'pending' AND scheduled_at <= NOW(6) "
                 "ORDER BY priority DESC, scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED",
        "mark": "UPDATE jenkins_jobs_queue SET status = 'processing', dispatch_id = :d, lease_expires_at = NOW(6) "
                "WHERE id = :id",
        "done": "UPDATE jenkins_jobs_queue SET status = 'completed', finished_at = NOW(6) WHERE id = :id",
    },
}

# A row's parameters.N as text (MariaDB has no ->> operator).
PARAMETER_N = {"postgresql": "parameters->>'N'", "mysql": "JSON_UNQUOTE(JSON_EXTRACT(parameters, '$.N'))"}

_TABLES = ("jenkins_job_events", "jenkins_jobs_queue", "jenkins_job_limits")


def mysql_admin_url() -> str | None:
    """A MySQL/MariaDB server we may create databases on, or None when there is none."""
    url = os.environ.get("MYSQL_TEST_URL")
    if url:
        return url
    try:
        with Database(parse_database_url(MYSQL_LOCAL_URL), application_name="jd-bench-admin") as db:
            db.run("SELECT 1")
    except DatabaseUnavailable:
        return None
    return MYSQL_LOCAL_URL


@contextmanager
def mysql_scratch_database(admin_url: str, prefix: str = "jd_bench") -> Iterator[str]:
    """A fresh, uniquely named MySQL database (utf8mb4), dropped afterwards with everything in it."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    base, sep, query = admin_url.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{name}{sep}{query}"
    with Database(parse_database_url(admin_url), application_name="jd-bench-admin") as admin:
        admin.run(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        try:
            yield url
        finally:
            # DROP DATABASE waits for the metadata locks of sessions still in it: end those first.
            for row in admin.run("SELECT id FROM information_schema.processlist WHERE db = :n "
                                 "AND id <> CONNECTION_ID()", n=name):
                with suppress(DatabaseError):
                    admin.run(f"KILL {int(row['id'])}")
            admin.run(f"DROP DATABASE IF EXISTS `{name}`")


@contextmanager
def scratch_databases(prefix: str = "jd_bench") -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """({engine: URL of a migrated scratch database}, {engine: why it is missing}): PostgreSQL, then MySQL."""
    with ExitStack() as stack:
        urls: dict[str, str] = {}
        missing: dict[str, str] = {}
        admin_url, _ = stack.enter_context(postgres_server())
        urls["postgresql"] = stack.enter_context(pg_scratch_database(admin_url, prefix=prefix))
        mysql_url = mysql_admin_url()
        if mysql_url is None:
            missing["mysql"] = "no MySQL/MariaDB on 127.0.0.1:3306 (root, no password) and no MYSQL_TEST_URL"
        else:
            urls["mysql"] = stack.enter_context(mysql_scratch_database(mysql_url, prefix=prefix))
        for url in urls.values():
            with Database(parse_database_url(url)) as db:
                migrate(db)
        yield urls, missing


def server_name(db: Session) -> str:
    """The server and its version, for a table's engine column (e.g. "MariaDB 10.11.6", "PostgreSQL 16.2")."""
    return db.server_label(db.server_version())


def empty(db: Database) -> None:
    """Remove every row the benchmarks write, numbering ids from 1 again."""
    if db.dialect == "mysql":
        # TRUNCATE refuses a table another one's foreign key names unless the checks are off (this session).
        db.run_script("SET FOREIGN_KEY_CHECKS = 0;\n"
                      + "".join(f"TRUNCATE TABLE {t};\n" for t in _TABLES)
                      + "SET FOREIGN_KEY_CHECKS = 1;")
    else:
        db.run(f"TRUNCATE {', '.join(_TABLES)} RESTART IDENTITY")


def _mysql_numbers(n: int) -> str:
    """A derived table g(g) of the numbers 1..n: a cross join of digit tables (MySQL 8 and MariaDB have no
    generate_series; MariaDB's seq_1_to_n engine is not in MySQL)."""
    digits = max(1, math.ceil(math.log10(max(n, 2))))
    ten = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " \
          "UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
    joins = " CROSS JOIN ".join(f"{ten} d{i}" for i in range(digits))
    value = " + ".join(f"d{i}.d * {10 ** i}" for i in range(digits))
    return f"(SELECT 1 + {value} AS g FROM {joins}) g WHERE g.g <= {int(n)}"


@contextmanager
def _secondary_indexes_rebuilt(db: Database) -> Iterator[None]:
    """Drop the queue table's secondary indexes for a bulk load and build them again after it, exactly as
    the schema defines them (read back from information_schema): InnoDB builds an index from sorted rows
    far faster than it maintains nine indexes row by row through a small buffer pool."""
    rows = db.run("SELECT index_name AS name, non_unique, column_name AS col, sub_part FROM information_schema.statistics "
                  "WHERE table_schema = DATABASE() AND table_name = 'jenkins_jobs_queue' AND index_name <> 'PRIMARY' "
                  "ORDER BY index_name, seq_in_index")
    indexes: dict[str, tuple[bool, list[str]]] = {}
    for r in rows:
        unique, columns = indexes.setdefault(r["name"], (not r["non_unique"], []))
        columns.append(f"`{r['col']}`" + (f"({int(r['sub_part'])})" if r["sub_part"] else ""))
    if indexes:
        db.run("ALTER TABLE jenkins_jobs_queue " + ", ".join(f"DROP INDEX `{n}`" for n in indexes))
    try:
        yield
    finally:
        if indexes:
            db.run("ALTER TABLE jenkins_jobs_queue " + ", ".join(
                f"ADD {'UNIQUE ' if unique else ''}INDEX `{n}` ({', '.join(cols)})"
                for n, (unique, cols) in indexes.items()))


def fill(db: Database, pending: int, finished: int = 0) -> None:
    """Empty the queue, then `finished` completed rows a day old and `pending` due rows (priority 0-2,
    scheduled up to 1,000 s ago, ten job names) in one INSERT ... SELECT each; then fresh statistics."""
    empty(db)
    if db.dialect == "mysql":
        with _secondary_indexes_rebuilt(db):
            _fill_mysql(db, pending, finished)
        db.run("ANALYZE TABLE jenkins_jobs_queue")
        return
    if finished:
        db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, status, attempts, dispatch_id, jenkins_result, "
               "finished_at, scheduled_at) SELECT 'job-' || (g % 10), '{}', 'completed', 1, 'old-' || g, 'SUCCESS', "
               "now() - interval '1 day', now() - interval '1 day' FROM generate_series(1, :n) g", n=finished)
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at) "
           "SELECT 'job-' || (g % 10), jsonb_build_object('n', g), g % 3, now() - make_interval(secs => g % 1000) "
           "FROM generate_series(1, :n) g", n=pending)
    db.run("VACUUM ANALYZE jenkins_jobs_queue")


def add_pending(db: Database, pending: int, controller: str, job_prefix: str = "job-") -> None:
    """Add `pending` due rows of `controller` beside what the queue holds (priority 0-2, scheduled up to 1,000 s
    ago, ten job names), in one INSERT ... SELECT; then fresh statistics."""
    if db.dialect == "mysql":
        db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller) "
               "SELECT CONCAT(:p, g % 10), JSON_OBJECT('n', g), g % 3, NOW(6) - INTERVAL (g % 1000) SECOND, :c "
               "FROM " + _mysql_numbers(pending), p=job_prefix, c=controller)
        db.run("ANALYZE TABLE jenkins_jobs_queue")
        return
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at, controller) "
           "SELECT :p || (g % 10), jsonb_build_object('n', g), g % 3, now() - make_interval(secs => g % 1000), :c "
           "FROM generate_series(1, :n) g", n=pending, p=job_prefix, c=controller)
    db.run("VACUUM ANALYZE jenkins_jobs_queue")


def _fill_mysql(db: Database, pending: int, finished: int) -> None:
    if finished:
        db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, status, attempts, dispatch_id, "
               "jenkins_result, finished_at, scheduled_at) "
               "SELECT CONCAT('job-', g % 10), '{}', 'completed', 1, CONCAT('old-', g), 'SUCCESS', "
               "NOW(6) - INTERVAL 1 DAY, NOW(6) - INTERVAL 1 DAY FROM " + _mysql_numbers(finished))
    if pending:
        db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, priority, scheduled_at) "
               "SELECT CONCAT('job-', g % 10), JSON_OBJECT('n', g), g % 3, NOW(6) - INTERVAL (g % 1000) SECOND "
               "FROM " + _mysql_numbers(pending))
