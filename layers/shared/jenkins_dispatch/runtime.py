"""What a warm Lambda (or a `serve` process) keeps between invocations: settings and database sessions.

Settings are read once per process; secrets behind them are cached by Powertools Parameters.
Sessions are opened on first use and reused while they stay healthy:
- ``database()``: the one session of a Lambda container (dispatcher, migrations), used by one thread;
- ``session()``: a session borrowed from a bounded pool, for the webhook, which `serve` runs on many
  threads. The pool has ``WEBHOOK_DB_POOL_SIZE`` sessions under `serve` and one in Lambda (a container
  runs one invocation at a time), so a flood of callbacks or a database blip never multiplies sessions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .config import Settings, load_settings
from .observability import metrics
from .store.db import Session, SessionPool, open_database

_lock = threading.Lock()
_settings: Settings | None = None
_database: Session | None = None
_pool: SessionPool | None = None
_pool_size: int | None = None  # set by `serve`; Lambda keeps one session


def settings() -> Settings:
    """The process's settings, loaded once (and metrics configured from them)."""
    global _settings
    with _lock:
        if _settings is None:
            _settings = load_settings()
            metrics.configure(emf=_settings.metrics_emf)
        return _settings


def loaded_settings() -> Settings | None:
    """The settings if they were read already; never reads them (which could fail again)."""
    with _lock:
        return _settings


def database() -> Session:
    """The process's own session (Lambda runs one invocation at a time)."""
    global _database
    current = settings()
    with _lock:
        if _database is None:
            _database = open_database(current.database)
        return _database


def pool() -> SessionPool:
    """The webhook's bounded session pool, created on first use."""
    global _pool
    current = settings()
    with _lock:
        if _pool is None:
            _pool = SessionPool(current.database, _pool_size or 1, application_name="jenkins-dispatch-webhook")
        return _pool


@contextmanager
def session() -> Iterator[Session]:
    """A session from the bounded pool, returned when the block ends."""
    with pool().session() as db:
        yield db


def reset() -> None:
    """Forget settings and close sessions (tests, and `serve` on shutdown)."""
    global _settings, _database, _pool, _pool_size
    with _lock:
        if _database is not None:
            _database.close()
        if _pool is not None:
            _pool.close()
        _database = _pool = _settings = _pool_size = None
        metrics.configure(emf=None)


def install(given: Settings) -> None:
    """Use settings read elsewhere (`serve`) instead of reading them again, with a webhook session pool
    of ``WEBHOOK_DB_POOL_SIZE`` (the webhook runs on many threads there)."""
    global _settings, _pool_size
    with _lock:
        _settings = given
        _pool_size = given.webhook_db_pool_size
        metrics.configure(emf=given.metrics_emf)
