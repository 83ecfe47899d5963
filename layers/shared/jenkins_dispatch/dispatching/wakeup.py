"""How a dispatcher waits for work between passes: one small interface, one implementation per database.

PostgreSQL: LISTEN on the channel the schema's triggers notify (migration 0002) — a plain INSERT by the
application wakes the dispatcher within milliseconds, at no cost while nothing happens. A database
without notifications (MySQL / MariaDB) gets the polling variant behind the same interface: once a poll
interval it reads a cheap fingerprint of the queue (the last job and history ids, rows in flight, caps, pauses)
and answers "work" only when it moved, so an idle queue, or a backlog that is all paused or at its caps, costs
one statement a second instead of a full pass.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from ..errors import DatabaseUnavailable, DispatchError
from ..observability import logger
from ..store.db import Session
from ..store.dispatcher import DispatcherStore
from ..store.rows import Fingerprint

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

    def __init__(self, db: Session, shutdown: threading.Event | None = None):
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
    """For databases without notifications: every ``poll_seconds`` read the queue's fingerprint (one cheap
    statement on the dispatcher's own session) and report work when it moved since the previous poll.

    The previous poll was read before the last pass began (every pass but the loop's first follows a poll),
    so whatever committed since, during that pass included, is seen; a pass that changed something itself is
    followed by one more, which finds the queue as it left it. What the fingerprint does not show, the loop's
    own deadlines cover: the next row becoming due, the next lease expiring and the periodic pass.
    """

    def __init__(self, db: Session, poll_seconds: float = 0.1, shutdown: threading.Event | None = None):
        self.queue = DispatcherStore(db)
        self.poll_seconds = poll_seconds
        self.shutdown = shutdown or threading.Event()
        self._seen: Fingerprint | None = None  # the fingerprint the previous poll read

    def wait(self, timeout: float) -> set[str]:
        """Poll every interval for up to ``timeout`` seconds; return {WORK} as soon as the queue moved. The
        first poll comes a whole interval after the call (the pass before it has just looked), none when the
        caller's deadline comes first (it runs a pass then anyway)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left < self.poll_seconds:
                self.shutdown.wait(max(left, 0.0))
                return set()
            if self.shutdown.wait(self.poll_seconds):
                return set()
            if self._queue_moved():
                return {WORK}

    def _queue_moved(self) -> bool:
        try:
            seen = self.queue.fingerprint()
        except DatabaseUnavailable:
            raise  # the loop records it and runs a pass, which waits the outage out
        except DispatchError as exc:
            # Busy (a lock or time limit), or anything else the pass will meet too and report properly.
            logger.warning("could not read the queue's fingerprint; running a pass", extra={"reason": str(exc)})
            return True
        # The first poll has nothing to compare with: a pass, in case something landed during the first one.
        moved, self._seen = seen != self._seen, seen
        return moved


def work_signal(db: Session, shutdown: threading.Event | None = None, poll_seconds: float = 0.1) -> WorkSignal:
    """What a dispatcher on ``db`` waits on: notifications where the database sends them, else polling."""
    if db.supports_listen:
        return NotificationSignal(db, shutdown)
    return PollingSignal(db, poll_seconds, shutdown)


class LaneSignal:
    """One controller's lane's share of the loop's signal: the thread that waits on the database hands every
    piece of news to each lane (``post``), and each lane waits for its own (several controllers: one session
    LISTENs or polls for all of them, not one per controller)."""

    def __init__(self, shutdown: threading.Event):
        self.shutdown = shutdown
        self._news: set[str] = set()
        self._changed = threading.Condition()

    def post(self, news: set[str]) -> None:
        """News for this lane (an empty set only wakes it, to see the shutdown)."""
        with self._changed:
            self._news |= news
            self._changed.notify_all()

    def wait(self, timeout: float) -> set[str]:
        """Block up to ``timeout`` seconds for news (or the shutdown); return it, and forget it."""
        with self._changed:
            self._changed.wait_for(lambda: bool(self._news) or self.shutdown.is_set(), timeout)
            news, self._news = self._news, set()
        return news
