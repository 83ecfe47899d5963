"""What a warm Lambda (or a `serve` process) keeps between invocations: settings and a database session.

Settings are read once per process; secrets behind them are cached by Powertools Parameters. The
database session is opened on first use and reused while it stays healthy.
"""

from __future__ import annotations

import threading

from .config import Settings, load_settings
from .db import Database

_lock = threading.Lock()
_settings: Settings | None = None
_databases: dict[int, Database] = {}


def settings() -> Settings:
    global _settings
    with _lock:
        if _settings is None:
            _settings = load_settings()
        return _settings


def loaded_settings() -> Settings | None:
    """The settings if they were read already; never reads them (which could fail again)."""
    with _lock:
        return _settings


def database() -> Database:
    """This thread's session (Lambda runs one invocation at a time; `serve` has a few threads)."""
    key = threading.get_ident()
    with _lock:
        db = _databases.get(key)
    if db is None:
        db = Database(settings().database)
        with _lock:
            _databases[key] = db
    return db


def reset() -> None:
    """Forget settings and close sessions (tests, and `serve` on shutdown)."""
    global _settings
    with _lock:
        for db in _databases.values():
            db.close()
        _databases.clear()
        _settings = None


def install(given: Settings) -> None:
    """Use settings read elsewhere (the CLI's `serve`) instead of reading them again."""
    global _settings
    with _lock:
        _settings = given
