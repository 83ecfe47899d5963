"""Find a MySQL or MariaDB server for the tests, the benchmarks and scripts: the MySQL counterpart of pg_server.

Order: MYSQL_TEST_URL when set (``mysql://user:pass@host:port/db``, any database the user may create others
beside); else the server on 127.0.0.1:3306 as root with an empty password when it answers; else none, and
the MySQL half of the tests is skipped with ``NO_SERVER`` as the reason (CI starts a server, so it runs there).
There is no embedded MySQL to fall back on, unlike PostgreSQL.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager, suppress
from functools import cache

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import DatabaseUnavailable
from jenkins_dispatch.store.db import Database, DatabaseError

# The URL needs a database; `mysql` exists on every server and root may create databases beside it.
LOCAL_URL = "mysql://root@127.0.0.1:3306/mysql"
NO_SERVER = "no MySQL/MariaDB on 127.0.0.1:3306 (root, empty password): set MYSQL_TEST_URL to test the MySQL dialect"


@cache
def mysql_admin_url() -> str | None:
    """The URL of a server we may create databases on, or None when there is none (asked once per process)."""
    url = os.environ.get("MYSQL_TEST_URL")
    if url:
        return url  # named on purpose: a server that does not answer is then an error, not a skip
    try:
        with Database(parse_database_url(LOCAL_URL)) as db:
            db.run("SELECT 1")
    except DatabaseUnavailable:
        return None
    return LOCAL_URL


def _with_database(url: str, dbname: str) -> str:
    base, sep, query = url.partition("?")
    scheme_host = base.rsplit("/", 1)[0] if base.count("/") > 2 else base
    return f"{scheme_host}/{dbname}{sep}{query}"


@contextmanager
def scratch_database(admin_url: str, prefix: str = "jd_test"):
    """A fresh, uniquely named database on the server (utf8mb4), dropped afterwards with everything in it."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with Database(parse_database_url(admin_url), application_name="jd-tests-admin") as admin:
        admin.run(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        try:
            yield _with_database(admin_url, name)
        finally:
            # DROP DATABASE waits for the metadata locks of sessions still inside it (a test's leftover
            # transaction); end those first so a test that leaked a session cannot hang the teardown.
            for row in admin.run("SELECT id FROM information_schema.processlist WHERE db = :n AND id <> CONNECTION_ID()",
                                 n=name):
                with suppress(DatabaseError):  # it ended between the listing and the KILL
                    admin.run(f"KILL {int(row['id'])}")
            admin.run(f"DROP DATABASE IF EXISTS `{name}`")

