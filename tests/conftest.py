import os
from dataclasses import replace
from pathlib import Path

# Before any handler or Powertools import: fake AWS, no tracing, a metrics namespace.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "JenkinsDispatch")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "jenkins-dispatch")
os.environ.setdefault("POWERTOOLS_DEV", "false")

import pytest  # noqa: E402

from jenkins_dispatch.config import parse_database_url  # noqa: E402
from jenkins_dispatch.store.db import Database  # noqa: E402
from jenkins_dispatch.store.migrations import migrate  # noqa: E402

from .emulator_fixtures import *  # noqa: E402,F401,F403
from .engines import ENGINES, scratch_database  # noqa: E402
from .mysql_server import NO_SERVER, mysql_admin_url  # noqa: E402
from .pg_server import postgres_server  # noqa: E402
from .statement_coverage import PLUGIN_NAME, StatementCoverage  # noqa: E402
from .stores import Queue  # noqa: E402

# Every table a test may fill; the migrations' own table (and MySQL's lock rows) stay.
TABLES = ("jenkins_job_events", "jenkins_jobs_queue", "jenkins_job_limits", "jenkins_job_pauses", "jenkins_dispatchers",
          "jenkins_job_schedules", "jenkins_job_limit_events", "jenkins_job_stats", "jenkins_job_stat_bins",
          "jenkins_queue_depth", "jenkins_job_starts", "jenkins_key_limits", "jenkins_key_rules")
# Keyed by something else than an id (no counter tells they were used): MySQL empties them every time.
KEYED_TABLES = ("jenkins_job_schedules", "jenkins_job_stats", "jenkins_job_stat_bins", "jenkins_queue_depth",
                "jenkins_key_limits")
# Those whose id is an identity column on PostgreSQL (on MySQL every one but the schedules has an AUTO_INCREMENT id).
IDENTITY_TABLES = ("jenkins_job_events", "jenkins_jobs_queue")


def pytest_configure(config):
    """The engine markers (pyproject's --strict-markers refuses unknown ones); which statement ran on which
    engine (tests/statement_coverage.py)."""
    config.pluginmanager.register(StatementCoverage(config), PLUGIN_NAME)
    config.addinivalue_line("markers", "both_engines: run each database test once on PostgreSQL and once on "
                                       "MySQL/MariaDB, ids [postgresql] / [mysql] (module, class or function)")
    config.addinivalue_line("markers", "postgresql_only(reason): in a both_engines module, a test whose subject "
                                       "exists only on PostgreSQL; its [mysql] run is skipped with the reason")
    config.addinivalue_line("markers", "wall_clock: a test that waits for the clock to pass minute boundaries "
                                       "(minutes, nearly all of it idle): collected first, so a worker starts it "
                                       "while the others run the rest")


def pytest_generate_tests(metafunc):
    """A both_engines test that touches the database (any fixture built on `engine`) runs once per engine."""
    if "engine" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_engines"):
        metafunc.parametrize("engine", ENGINES, indirect=True, ids=ENGINES)


@pytest.fixture
def engine(request):
    """The engine this test runs on: its parameter in a both_engines test, else PostgreSQL."""
    return getattr(request, "param", "postgresql")


def _migrated(url: str) -> str:
    with Database(parse_database_url(url)) as db:
        migrate(db)
    return url


# One scratch database per engine per process (per xdist worker), created and migrated once, when the first
# test of that engine asks for it.
@pytest.fixture(scope="session")
def postgresql_database_url():
    """The session's PostgreSQL database, migrated."""
    with postgres_server() as (admin_url, _where), scratch_database("postgresql", admin_url) as url:
        if url != admin_url:  # our own scratch database, not one we were handed
            _commit_without_waiting_for_the_disk(url)
        yield _migrated(url)


def _commit_without_waiting_for_the_disk(url: str) -> None:
    """Every later session on this scratch database commits without waiting for its WAL to reach the disk
    (synchronous_commit = off: ~0.3 ms a commit instead of ~2.7 ms here). What others see and when is unchanged;
    only a crash of the server itself could lose the last commits, and no test crashes the server."""
    with Database(parse_database_url(url)) as db:
        db.run("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); "
               "END $$")


@pytest.fixture(scope="session")
def mysql_database_url():
    """The session's MySQL/MariaDB database, migrated; skips when there is no server to test on."""
    admin_url = mysql_admin_url()
    if admin_url is None:
        pytest.skip(NO_SERVER)
    with scratch_database("mysql", admin_url) as url:
        yield _migrated(url)


@pytest.fixture
def database_url(engine, request, monkeypatch):
    """The migrated database of the test's engine, exported as DATABASE_URL for the subprocesses it starts."""
    url = request.getfixturevalue(f"{engine}_database_url")
    monkeypatch.setenv("DATABASE_URL", url)
    return url


TEST_STATEMENT_TIMEOUT_MS = 120_000


@pytest.fixture
def db(database_url, engine):
    """A session on the test's database, with every table emptied first (ids start at 1 again). Its statements
    may run for two minutes: it is the test's own hands, filling tables with tens of thousands of rows in one
    statement, which under a full run's load on two cores took longer than the product's 15 s default."""
    settings = replace(parse_database_url(database_url), statement_timeout_ms=TEST_STATEMENT_TIMEOUT_MS)
    with Database(settings, application_name="jd-tests") as database:
        empty_tables(database)
        yield database


# A table with at least this many rows is TRUNCATEd; fewer are DELETEd (cheaper than a new file per table).
TRUNCATE_FROM_ROWS = 1000


def empty_tables(database: Database) -> None:
    """Empty the tables the previous test on this database touched (rows or a used id counter), and restart
    their ids at 1. Only those: TRUNCATE of all five tables cost ~70 ms on PostgreSQL and ~44 ms on MariaDB per
    test (~120 ms each under a full run's load), most of it for tables that were already empty."""
    if database.dialect == "mysql":
        # Every table's id is AUTO_INCREMENT: a table any statement inserted into (even rolled back) has a
        # counter above 1; the others are empty and at 1. (MySQL 8 caches information_schema figures per
        # session for a day unless told not to; MariaDB reads them live and has no such variable.)
        database.connection()  # the session knows its server once open
        fresh = "" if database.mariadb else "SET SESSION information_schema_stats_expiry = 0;\n"
        # The keyed tables have no counter to tell they were used: emptied in the same round trip.
        rows = database.run(
            "".join(f"DELETE FROM {t};\n" for t in KEYED_TABLES) + fresh +
            "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = DATABASE() "
            f"AND table_name IN ({', '.join(repr(t) for t in TABLES)}) AND auto_increment > 1")
        touched = [r["t"] for r in rows]
        if touched:  # TRUNCATE: the one statement that also restarts AUTO_INCREMENT without a table rebuild
            database.run_script(";\n".join(f"TRUNCATE TABLE {table}" for table in touched))
        return
    # PostgreSQL: the row counts (stopped at TRUNCATE_FROM_ROWS) and whether each identity was used since its
    # last restart, in one round trip.
    row = database.run("SELECT " + ", ".join(
        f"(SELECT count(*) FROM (SELECT FROM {t} LIMIT {TRUNCATE_FROM_ROWS}) r) AS {t}" for t in TABLES) + ", " +
        ", ".join(f"pg_sequence_last_value(pg_get_serial_sequence('{t}', 'id')::regclass) IS NOT NULL AS {t}_id"
                  for t in IDENTITY_TABLES))[0]
    large = [t for t in TABLES if row[t] >= TRUNCATE_FROM_ROWS]
    small = [t for t in TABLES if 0 < row[t] < TRUNCATE_FROM_ROWS]
    used_ids = [t for t in IDENTITY_TABLES if row[f"{t}_id"] and t not in large]
    statements = [f"TRUNCATE {', '.join(large)} RESTART IDENTITY"] if large else []
    statements += [f"DELETE FROM {t}" for t in small]
    statements += [f"SELECT setval(pg_get_serial_sequence('{t}', 'id'), 1, false)" for t in used_ids]
    if statements:
        database.run(";\n".join(statements))


@pytest.fixture
def queue(db):
    return Queue(db, lease_seconds=60)


LAYERS = ("unit", "integration", "system")


def pytest_collection_modifyitems(config, items):
    """Mark every test with the layer its folder names, so `-m unit` selects what `tests/unit` holds; skip the
    [mysql] run of a postgresql_only test, and every [mysql] run when there is no MySQL server."""
    tests_folder = Path(__file__).resolve().parent
    for item in items:
        if _engine(item) == "mysql":
            only = item.get_closest_marker("postgresql_only")
            if only is not None:
                item.add_marker(pytest.mark.skip(reason="PostgreSQL only: " + (
                    only.kwargs.get("reason") or (only.args[0] if only.args else "no MySQL counterpart"))))
            elif mysql_admin_url() is None:
                item.add_marker(pytest.mark.skip(reason=NO_SERVER))
        try:
            folder = item.path.resolve().relative_to(tests_folder).parts[0]
        except ValueError:
            continue
        if folder in LAYERS:
            item.add_marker(folder)
    items.sort(key=lambda item: item.get_closest_marker("wall_clock") is None)  # stable: the rest keep their order


def _engine(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("engine") if callspec is not None else None
