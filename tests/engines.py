"""What a test needs to run the same on PostgreSQL and MySQL/MariaDB: the engine's server and scratch
databases, the rare SQL line that must differ, and times given as parameters instead of engine-specific
``now() - interval …`` arithmetic.

A test module marked ``pytest.mark.both_engines`` runs each database test once per engine (tests/conftest.py);
the ``engine`` fixture says which ("postgresql" or "mysql", as ``Database.dialect`` does).
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from . import mysql_server, pg_server

ENGINES = ("postgresql", "mysql")


def ago(**delta) -> datetime:
    """The moment that long before now (``ago(seconds=1)``), aware, for a ``:param`` both engines read alike:
    ``UPDATE … SET lease_expires_at = :t`` instead of ``now() - interval '1 second'``."""
    return datetime.now(UTC) - timedelta(**delta)


def sql_for(engine, *, postgresql: str, mysql: str) -> str:
    """The text for this engine (``engine`` is its name or a Database), for the line that cannot be neutral."""
    return {"postgresql": postgresql, "mysql": mysql}[engine_name(engine)]


def engine_name(engine) -> str:
    """"postgresql" or "mysql" for an engine name or a Database."""
    return engine if isinstance(engine, str) else engine.dialect


def row_lock_waiters(db, application_name: str | None = None) -> int:
    """Sessions of ``db``'s database waiting for a row lock of jenkins_jobs_queue right now (on PostgreSQL, with
    ``application_name``: only that program's). MySQL reads SHOW ENGINE INNODB STATUS, built when asked, and not
    information_schema.innodb_trx: InnoDB refreshes that copy only once nobody has read it for 0.1 s, which
    never happens while the dispatchers of the tests running beside read it every pass (a lock wait went unseen
    for the whole 5 s it lasted, in a run of the suite on six workers)."""
    if engine_name(db) == "postgresql":
        return db.run("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                      "AND wait_event_type = 'Lock' AND (CAST(:name AS text) IS NULL OR application_name = :name)",
                      name=application_name)[0]["n"]
    database = db.run("SELECT DATABASE() AS name")[0]["name"]
    status = db.run("SHOW ENGINE INNODB STATUS")[0]["Status"]
    table = f"of table `{database}`.`jenkins_jobs_queue`"
    return sum(1 for trx in status.split("---TRANSACTION ")[1:] if "LOCK WAIT" in trx and table in trx)


def numbers(engine, count: int) -> str:
    """A FROM item of the integers 1..count in column ``g``, to fill tables in one statement:
    ``INSERT INTO t (job_name) SELECT CONCAT('job-', g % 7) FROM {numbers(db, 20000)}``. PostgreSQL's
    generate_series; on MySQL a cross join of digit tables (a recursive CTE stops at 1,000 rows on MySQL 8)."""
    if engine_name(engine) == "postgresql":
        return f"generate_series(1, {int(count)}) AS numbers(g)"
    digits = "(SELECT 0 AS d UNION ALL " + " UNION ALL ".join(f"SELECT {d}" for d in range(1, 10)) + ")"
    places = max(1, len(str(int(count))))
    joined = " CROSS JOIN ".join(f"{digits} AS p{i}" for i in range(places))
    value = " + ".join(f"{10 ** i} * p{i}.d" for i in range(places))
    return f"(SELECT {value} + 1 AS g FROM {joined} HAVING g <= {int(count)}) AS numbers"


def has_server(engine: str) -> bool:
    """Whether this run has a server of ``engine`` to test on: PostgreSQL always (an embedded one at worst), MySQL
    when one answers (else its tests are skipped)."""
    if engine == "postgresql":
        return True
    if engine == "mysql":
        return mysql_server.mysql_admin_url() is not None
    raise ValueError(f"no test server known for the engine {engine!r}: teach tests/engines.py where to find one")


@contextmanager
def server(engine: str):
    """Yields the admin URL of a server of this engine we may create databases on (skips when MySQL has none)."""
    if engine == "postgresql":
        with pg_server.postgres_server() as (admin_url, _where):
            yield admin_url
        return
    admin_url = mysql_server.mysql_admin_url()
    if admin_url is None:
        pytest.skip(mysql_server.NO_SERVER)
    yield admin_url


@contextmanager
def scratch_database(engine: str, admin_url: str | None = None, prefix: str = "jd_test"):
    """A fresh, uniquely named database of this engine, dropped afterwards; on the engine's test server unless
    ``admin_url`` names one."""
    if admin_url is None:
        with server(engine) as found, scratch_database(engine, found, prefix) as url:
            yield url
        return
    maker = pg_server.scratch_database if engine == "postgresql" else mysql_server.scratch_database
    with maker(admin_url, prefix=prefix) as url:
        yield url
