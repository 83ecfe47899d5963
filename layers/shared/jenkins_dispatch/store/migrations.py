"""The schema: applies ``dialects/<engine>/migrations/NNNN_*.sql`` in order and records each in
``jenkins_dispatch_migrations``.

Owns only the migration runner; the queue's transitions live in the stores. Its own statements (the
lock, the bookkeeping table) are named blocks of the engine's ``queries/migrations.sql``, like every other.

The runner never asks which engine it speaks to; it asks the session. Where DDL is transactional
(``Session.transactional_ddl``: PostgreSQL) everything applies in one transaction under a lock of that
transaction. Where DDL commits by itself (MySQL, MariaDB) the runner holds a named lock of its session instead
(released by ending the session) and applies file by file, each file written to be run again after a failure
part-way through. Either way a server the session calls unsupported is refused before anything is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import default_of
from ..errors import MigrationError
from . import statements
from .db import DatabaseError
from .session import Row, Session


def migration_files(dialect: str) -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration of the engine ``dialect`` names, in the order they apply."""
    found = []
    for path in sorted((statements.dialect_dir(dialect) / "migrations").glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path))
    return found


def _run(db: Session, statement: str, /, **params: Any) -> list[Row]:
    return db.run(statements.load(db.dialect)[statement], **params)


def migrate(db: Session, cutover_window_seconds: float = default_of("CUTOVER_WINDOW_SECONDS")) -> list[str]:
    """Apply pending migrations in order: in one transaction under a lock where DDL is transactional, else file
    by file under a lock of the session (see the module's docstring).

    Safe to run concurrently (the second run waits, then finds nothing to do) and idempotent.
    ``cutover_window_seconds``: how long the results of the worker that ran before jenkins-dispatch still count
    for the jobs it holds when a seed table is upgraded (the cutover migration reads it; docs/cutover.md).
    Returns the names of the migrations applied by this call.
    """
    if db.transactional_ddl:
        return _migrate_in_one_transaction(db, cutover_window_seconds)
    return _migrate_file_by_file(db, cutover_window_seconds)


def _refuse_an_unsupported_server(db: Session) -> None:
    refusal = db.unsupported_server()
    if refusal:
        raise MigrationError(refusal)


def _migrate_in_one_transaction(db: Session, cutover_window_seconds: float) -> list[str]:
    """All pending files or none: DDL rolls back with the transaction, whose lock makes a second run wait."""
    applied_now: list[str] = []
    try:
        _refuse_an_unsupported_server(db)
        with db.transaction():
            _run(db, "lock_migrations")
            _run(db, "set_cutover_window", seconds=float(cutover_window_seconds))
            _run(db, "create_migrations_table")
            done = {r["version"] for r in _run(db, "migration_versions")}
            for version, name, path in migration_files(db.dialect):
                if version in done:
                    continue
                db.run_script(path.read_text())
                _run(db, "record_migration", version=version, name=name)
                applied_now.append(f"{version:04d}_{name}")
    except DatabaseError as exc:
        raise MigrationError(f"migration failed: {exc}") from None
    return applied_now


def _migrate_file_by_file(db: Session, cutover_window_seconds: float) -> list[str]:
    """DDL commits as it goes, so no wrapping transaction: a lock of the session instead, and files that can be
    run again."""
    applied_now: list[str] = []
    current = None
    try:
        _refuse_an_unsupported_server(db)
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
            # statement time limit lock_migrations lifted, the variables of the files. No statement can fail
            # here, and the next user of ``db`` gets a fresh session (it reconnects lazily).
            db.close()
    except DatabaseError as exc:
        if current is None:
            raise MigrationError(f"migration failed: {exc}") from None
        raise MigrationError(f"migration {current} failed part-way; what it did is kept and running migrate "
                             f"again resumes it: {exc}") from None
    return applied_now
