"""The schema: applies ``sql/<dialect>/migrations/NNNN_*.sql`` in order and records each in
``jenkins_dispatch_migrations``.

Owns only the migration runner; the queue's transitions live in ``queue.py``. Its own statements (the
lock, the bookkeeping table) are named blocks of the dialect's ``queries.sql``, like every other.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MigrationError
from . import statements
from .db import Database, DatabaseError, Row, database_error_message


def migration_files(dialect: str = Database.dialect) -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration of ``dialect``, in the order they apply."""
    found = []
    for path in sorted((statements.dialect_dir(dialect) / "migrations").glob("*.sql")):
        number, _, name = path.stem.partition("_")
        found.append((int(number), name, path))
    return found


def _run(db: Database, statement: str, /, **params) -> list[Row]:
    return db.run(statements.load(db.dialect)[statement], **params)


def migrate(db: Database) -> list[str]:
    """Apply pending migrations in order, in one transaction under an advisory lock.

    Safe to run concurrently (the second run waits, then finds nothing to do) and idempotent.
    Returns the names of the migrations applied by this call.
    """
    applied_now: list[str] = []
    try:
        with db.transaction():
            _run(db, "lock_migrations")
            _run(db, "create_migrations_table")
            done = {r["version"] for r in _run(db, "migration_versions")}
            for version, name, path in migration_files(db.dialect):
                if version in done:
                    continue
                db.run(path.read_text())
                _run(db, "record_migration", version=version, name=name)
                applied_now.append(f"{version:04d}_{name}")
    except DatabaseError as exc:
        raise MigrationError(f"migration failed: {database_error_message(exc)}") from None
    return applied_now
