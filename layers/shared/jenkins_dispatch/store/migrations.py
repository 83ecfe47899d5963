"""The schema: applies ``dialects/<engine>/migrations/NNNN_*.sql`` in order and records each in
``jenkins_dispatch_migrations``.

Owns only the migration runner; the queue's transitions live in ``queue.py``. Its own statements (the
lock, the bookkeeping table) are named blocks of the dialect's ``queries.sql``, like every other.

PostgreSQL applies everything in one transaction under an advisory lock. MySQL commits DDL implicitly, so
there the runner holds a named lock of its session instead (GET_LOCK, released by ending the session) and
each migration file is written to be run again after a failure part-way through.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config import default_of
from ..errors import MigrationError
from . import statements
from .db import Database, DatabaseError, Row


def migration_files(dialect: str = Database.dialect) -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration of ``dialect``, in the order they apply."""
    found = []
    for path in sorted((statements.dialect_dir(dialect) / "migrations").glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path))
    return found


def _run(db: Database, statement: str, /, **params) -> list[Row]:
    return db.run(statements.load(db.dialect)[statement], **params)


def migrate(db: Database, cutover_window_seconds: float = default_of("CUTOVER_WINDOW_SECONDS")) -> list[str]:
    """Apply pending migrations in order: on PostgreSQL in one transaction under an advisory lock, on MySQL
    file by file under a named lock.

    Safe to run concurrently (the second run waits, then finds nothing to do) and idempotent.
    ``cutover_window_seconds``: how long the results of the worker that ran before jenkins-dispatch still count
    for the jobs it holds when a seed table is upgraded (the cutover migration reads it; docs/cutover.md).
    Returns the names of the migrations applied by this call.
    """
    if db.dialect == "mysql":
        return _migrate_mysql(db, cutover_window_seconds)
    applied_now: list[str] = []
    try:
        with db.transaction():
            _run(db, "lock_migrations")
            _run(db, "set_cutover_window", seconds=float(cutover_window_seconds))
            _run(db, "create_migrations_table")
            done = {r["version"] for r in _run(db, "migration_versions")}
            for version, name, path in migration_files(db.dialect):
                if version in done:
                    continue
                db.run(path.read_text())
                _run(db, "record_migration", version=version, name=name)
                applied_now.append(f"{version:04d}_{name}")
    except DatabaseError as exc:
        raise MigrationError(f"migration failed: {exc}") from None
    return applied_now


# The oldest servers with everything the MySQL statements use: SKIP LOCKED (MySQL 8.0.1, MariaDB 10.6),
# JSON_TABLE (8.0.4, 10.6), expression defaults (8.0.13) and CHECK constraints that are enforced rather than
# parsed and ignored (8.0.16).
MYSQL_MINIMUM = (8, 0, 16)
MARIADB_MINIMUM = (10, 6, 0)
_VERSION = re.compile(r"^(?:5\.5\.5-)?(\d+)\.(\d+)\.(\d+)")


def unsupported_server(version: str) -> str | None:
    """Why a server reporting ``VERSION()`` = ``version`` cannot hold the queue, in one line; None if it can.

    Also reads the handshake's form of MariaDB before 11, which puts "5.5.5-" in front of the real version.
    """
    found = _VERSION.match(version.strip())
    mariadb = "mariadb" in version.lower()
    name, minimum = ("MariaDB", MARIADB_MINIMUM) if mariadb else ("MySQL", MYSQL_MINIMUM)
    wanted = ".".join(map(str, minimum))
    if not found:
        return f"cannot read the server's version {version!r}: jenkins-dispatch needs {name} {wanted} or later"
    number = tuple(int(part) for part in found.groups())
    if number >= minimum:
        return None
    shown = ".".join(found.groups())
    if number[:2] < minimum[:2]:  # a whole series short: the one feature a queue cannot do without
        why = "it has no SKIP LOCKED, which concurrent claims rely on"
    else:
        why = "it parses CHECK constraints without enforcing them"
    return f"{name} {shown} is too old for jenkins-dispatch ({why}): upgrade to {name} {wanted} or later"


def _migrate_mysql(db: Database, cutover_window_seconds: float) -> list[str]:
    """MySQL's runner: DDL commits as it goes, so no wrapping transaction, a session lock instead."""
    applied_now: list[str] = []
    current = None
    try:
        db.connection()  # the session learns the server's version as it connects
        refusal = unsupported_server(db.server_version)
        if refusal:
            raise MigrationError(refusal)
        locked = _run(db, "lock_migrations")[0]["locked"]
        try:
            if locked != 1:
                raise MigrationError("another `jenkins-dispatch migrate` held the migration lock for 60 s: "
                                     "let it finish, then run migrate again")
            _run(db, "set_cutover_window", seconds=float(cutover_window_seconds))
            _run(db, "create_migrations_table")
            done = {r["version"] for r in _run(db, "migration_versions")}
            for version, name, path in migration_files(db.dialect):
                if version in done:
                    continue
                current = f"{version:04d}_{name}"
                db.run_script(path.read_text())
                _run(db, "record_migration", version=version, name=name)
                applied_now.append(current)
        finally:
            # Ending the session gives back everything this run took on it, whatever happened: the lock, the
            # statement time limit lock_migrations lifted, the @jd_ variables of the files. No statement can
            # fail here, and the next user of ``db`` gets a fresh session (it reconnects lazily).
            db.close()
    except DatabaseError as exc:
        if current is None:
            raise MigrationError(f"migration failed: {exc}") from None
        raise MigrationError(f"migration {current} failed part-way; what it did is kept and running migrate "
                             f"again resumes it: {exc}") from None
    return applied_now
