"""How a dispatcher waits for work between passes: one small interface, one implementation per database.

PostgreSQL: LISTEN on the channel the schema's triggers notify (migration 0002) — a plain INSERT by the
application wakes the dispatcher within milliseconds, at no cost while nothing happens. A database
without notifications (MySQL / MariaDB) gets the polling variant behind the same interface.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ..store.db import Database

CHANNEL = "jenkins_dispatch"
WORK = "work"  # rows became pending (inserted, released, retried, rescheduled) or a cap was raised
SLOT = "slot"  # a row left processing: a capped job may now start
RECONNECTED = "reconnected"  # the session was reopened: notifications may have been missed


class WorkSignal(Protocol):
    """What the dispatch loop waits on between passes."""

    def wait(self, timeout: float) -> set[str]:
        """Block up to ``timeout`` seconds; return the kinds of news that arrived ({} on timeout)."""
        ...


class NotificationSignal:
    """LISTEN on the dispatcher's own session (no extra session): notifications queue up on it while a
    pass runs statements, and are read here between passes."""

    def __init__(self, db: Database, shutdown: threading.Event | None = None):
        self.db = db
        self.shutdown = shutdown or threading.Event()
        self._connects = -1
        db.listen(CHANNEL)

    def wait(self, timeout: float) -> set[str]:
        """Wait up to ``timeout`` seconds for notifications; a reconnect counts as news."""
        # A session opened since the last wait (first use, or a reconnect during a pass) may have missed
        # notifications: report it, so the caller runs a pass instead of trusting the silence.
        self.db.connection()
        if self.db.connects != self._connects:
            self._connects = self.db.connects
            news = {RECONNECTED}
            news.update(self.db.wait_for_notifications(0))
            return news
        # Wait in short slices so a shutdown request is honoured promptly.
        remaining = timeout
        while True:
            news = set(self.db.wait_for_notifications(min(remaining, 0.5)))
            remaining -= 0.5
            if news or remaining <= 0 or self.shutdown.is_set():
                return news


class PollingSignal:
    """For databases without notifications: wake at most every ``poll_seconds`` and say "maybe work"."""

    def __init__(self, poll_seconds: float = 1.0, shutdown: threading.Event | None = None):
        self.poll_seconds = poll_seconds
        self.shutdown = shutdown or threading.Event()

    def wait(self, timeout: float) -> set[str]:
        """Sleep up to one poll interval; report work once a full interval has passed."""
        if self.shutdown.wait(min(timeout, self.poll_seconds)):
            return set()
        return {WORK} if timeout >= self.poll_seconds else set()


def work_signal(db: Database, shutdown: threading.Event | None = None, poll_seconds: float = 1.0) -> WorkSignal:
    """What a dispatcher on ``db`` waits on: notifications where the database sends them, else polling."""
    if db.notifications:
        return NotificationSignal(db, shutdown)
    return PollingSignal(poll_seconds, shutdown)
