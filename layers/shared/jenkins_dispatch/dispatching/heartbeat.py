"""Dispatcher heartbeats: who is dispatching, when each last passed, and how that pass ended.

Every dispatcher — `serve`, a Lambda container, a CLI `dispatch` — upserts one row of
``jenkins_dispatchers`` after each pass (one statement, which also removes rows not seen for a day).
`stats` lists the live ones; the webhook's and the operator's "why is this job waiting" read the latest
word about Jenkins from there. A heartbeat that cannot be written is logged and forgotten: it must never
turn a pass into a failure (when the database is down the pass has failed anyway).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..observability import logger

if TYPE_CHECKING:
    from ..config import Settings
    from ..store.dispatcher import DispatcherStore
    from .breaker import Breaker

# A dispatcher counts as live this long after its last pass at least: a pass may last a lease, and a
# Jenkins or database outage backs off between passes; it also covers a one-pass-per-minute schedule.
MIN_LIVE_SECONDS = 300.0
LIVE_PERIODS = 3  # ...or three of its periods, for one that passes less often than that
STOPPED = "stopped"  # the outcome a dispatcher records when it shuts down (queries/shared.sql: never live)
DETAIL_CHARS = 500  # an exception's text can be long; the table keeps a readable line


def stale_after_seconds(interval: float | None) -> float:
    """How long after its last pass a dispatcher passing every ``interval`` seconds (None: unknown, e.g.
    a scheduled single pass) still counts as live."""
    return max(MIN_LIVE_SECONDS, LIVE_PERIODS * interval) if interval else MIN_LIVE_SECONDS


def pass_outcome(summary: dict[str, Any]) -> tuple[str, str]:
    """(outcome, detail) of a pass that ran to its end: "jenkins_unavailable" when Jenkins as a whole failed,
    else "ok"; the detail is why it stopped."""
    detail = str(summary.get("stopped_because") or "")
    return ("jenkins_unavailable" if summary.get("jenkins_unavailable") else "ok"), detail


def jenkins_state(summary: dict[str, Any], talked_to_jenkins: bool) -> tuple[bool | None, str | None]:
    """What a finished pass learned about Jenkins: (False, why) it failed as a whole, (True, None) it
    answered, (None, None) it was not asked (nothing to send or check)."""
    if summary.get("jenkins_unavailable"):
        return False, str(summary.get("stopped_because") or "Jenkins unavailable")
    if talked_to_jenkins:
        return True, None
    return None, None


def default_dispatcher_id(kind: str, instance: str | None = None) -> str:
    """``serve@host:pid``; ``lambda@function/log-stream`` (one row per warm container); ``cli@host`` (one row
    per machine, however many `dispatch` commands it runs)."""
    if instance:
        return f"{kind}@{instance}"
    host = socket.gethostname()
    return f"cli@{host}" if kind == "cli" else f"{kind}@{host}:{os.getpid()}"


class Heartbeat:
    """One dispatcher's identity and pass count; ``record`` upserts its row after each pass."""

    def __init__(self, kind: str, *, interval: float | None = None, dispatcher_id: str | None = None,
                 instance: str | None = None):
        self.kind = kind
        self.dispatcher_id = dispatcher_id or default_dispatcher_id(kind, instance)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_at = datetime.now(UTC)
        self.stale_after = stale_after_seconds(interval)
        self.passes = 0
        self._count_lock = threading.Lock()  # several controllers' lanes record passes from their own threads
        self._breakers: Mapping[str, Breaker] | None = None
        self._caps: Mapping[str, dict[str, int | None]] = {}
        self._known: dict[str, dict[str, Any]] = {}  # each controller's last known state (its breaker may be new)

    def serves(self, breakers: Mapping[str, Breaker], settings: Settings | None = None) -> None:
        """The controllers this dispatcher serves, by name, with their breakers and (from ``settings``) the caps its
        claims hold each one's rows to: each heartbeat records them, so that "why is this job waiting" is told the
        caps the dispatchers keep, not those of whoever asks."""
        self._breakers = breakers
        if settings is not None:
            own = {c.name: c.max_in_flight for c in settings.controllers_by_name().values()}
            self._caps = {name: {"max_in_flight": settings.max_in_flight, "own_max_in_flight": own.get(name)}
                          for name in breakers}

    def controllers(self) -> dict[str, dict[str, Any]] | None:
        """Each controller served: how its breaker stands (status, since, reason; "unknown" only while it was never
        asked by this dispatcher: a single pass's breaker is new each pass, what an earlier pass of this process
        learned stands) and the caps its rows are held to (MAX_IN_FLIGHT as ``max_in_flight``, the controller's own
        as ``own_max_in_flight``; None: none); None before ``serves``."""
        if self._breakers is None:
            return None
        doc = {}
        with self._count_lock:
            for name, breaker in self._breakers.items():
                state = breaker.snapshot()
                if state["status"] != "unknown":
                    self._known[name] = {"status": state["status"], "since": state["since"],
                                         "reason": (state["reason"] or "")[:DETAIL_CHARS] or None}
                doc[name] = dict(self._known.get(name, {"status": "unknown", "since": None, "reason": None}),
                                 **self._caps.get(name, {}))
        return doc

    def record(self, queue: DispatcherStore, outcome: str, detail: str | None, *, jenkins_ok: bool | None = None,
               jenkins_reason: str | None = None) -> bool:
        """Upsert this dispatcher's row after a pass; False (and a warning) when it could not be written."""
        with self._count_lock:
            self.passes += 1
        return self._write(queue, outcome, detail, jenkins_ok, jenkins_reason)

    def stopped(self, queue: DispatcherStore, detail: str = "stop requested") -> bool:
        """Say that this dispatcher stopped (a shutdown, not a pass): it no longer counts as live."""
        return self._write(queue, STOPPED, detail, None, None)

    def _write(self, queue: DispatcherStore, outcome: str, detail: str | None, jenkins_ok: bool | None,
               jenkins_reason: str | None) -> bool:
        try:
            queue.record_heartbeat(
                dispatcher_id=self.dispatcher_id, kind=self.kind, host=self.host, pid=self.pid,
                started_at=self.started_at, stale_after_seconds=self.stale_after, outcome=outcome,
                detail=(detail or "")[:DETAIL_CHARS] or None, passes=self.passes, jenkins_ok=jenkins_ok,
                jenkins_reason=(jenkins_reason or "")[:DETAIL_CHARS] or None, controllers=self.controllers(),
            )
        except Exception as exc:  # the pass's own work is done: a heartbeat must never undo it
            logger.warning("could not record the dispatcher's heartbeat",
                           extra={"dispatcher_id": self.dispatcher_id, "reason": f"{type(exc).__name__}: {exc}"})
            return False
        return True

    def after_pass(self, queue: DispatcherStore, summary: dict[str, Any], talked_to_jenkins: bool) -> bool:
        """Record a pass that ran to its end."""
        outcome, detail = pass_outcome(summary)
        jenkins_ok, reason = jenkins_state(summary, talked_to_jenkins)
        return self.record(queue, outcome, detail, jenkins_ok=jenkins_ok, jenkins_reason=reason)
