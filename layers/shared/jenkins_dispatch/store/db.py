"""Opening sessions to the database, whichever it is, and a bounded pool of them: the front door of ``store/``.

``open_database(settings)`` returns the session of ``settings.engine``'s folder (``dialects/<engine>/``), a
``Session`` (``session.py``: the contract every engine's session fulfils). ``Database`` is the same factory
under the name callers have always used; annotate with ``Session``. Nothing outside ``store/`` learns which
engine it got, except by asking the session.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..config import DatabaseSettings
from ..errors import DatabaseError, DatabaseUnavailable
from . import dialects
from .endpoint import BUNDLED_RDS_CA, tls_context
from .session import OddTime, Row, Session

# Modules outside the queue take these from here, with the sessions that raise or return them.
__all__ = ["BUNDLED_RDS_CA", "Database", "DatabaseError", "OddTime", "Row", "Session", "SessionPool",
           "open_database", "tls_context"]


def open_database(settings: DatabaseSettings, application_name: str = "jenkins-dispatch") -> Session:
    """A session (not yet connected: it opens on first use) to the database ``settings`` name, of its engine."""
    return dialects.session_class(settings.engine)(settings, application_name)


# ``Database(settings)`` has opened sessions since the first release; it is the factory, not a class.
Database = open_database


class SessionPool:
    """At most ``size`` sessions shared by many threads (the webhook under `serve`).

    A session that breaks is closed by itself and reopened by the next borrower, so the number
    of server-side sessions never exceeds ``size``, whatever the number of requests or failures.
    """

    def __init__(self, settings: DatabaseSettings, size: int, application_name: str = "jenkins-dispatch",
                 acquire_timeout: float = 5.0):
        self.settings = settings
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._free = [open_database(settings, application_name) for _ in range(size)]
        self._all = list(self._free)
        self._closed = False
        self._lock = threading.Lock()
        self._available = threading.Semaphore(size)

    @property
    def statements(self) -> int:
        """How many statements the pool's sessions have run, all together."""
        return sum(db.statements for db in self._all)

    def waiting_seconds(self) -> float:
        """How long the oldest statement in progress on any of the pool's sessions has waited for its answer."""
        return max((db.waiting_seconds() for db in self._all), default=0.0)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Borrow a session for the ``with`` block; DatabaseUnavailable when none frees up in time."""
        if not self._available.acquire(timeout=self.acquire_timeout):
            raise DatabaseUnavailable(
                f"all {self.size} database sessions are busy ({self._all[0].engine_name} at "
                f"{self.settings.describe()}); try again"
            )
        with self._lock:
            db = self._free.pop()
        try:
            yield db
        finally:
            with self._lock:
                if self._closed:
                    db.close()  # the pool closed while this thread held it: closed by its own thread
                else:
                    self._free.append(db)
            self._available.release()

    def close(self) -> None:
        """Close every session of the pool: the idle ones now, each borrowed one when its thread gives it back
        (closing a session another thread is using would close its connection mid-statement: neither driver is
        thread-safe)."""
        with self._lock:
            self._closed = True
            for db in self._free:
                db.close()
