"""Dispatching without pause — `serve`, and the continuous Lambda: a supervisor and one lane per controller.

The supervisor (``DispatchLoop``) owns the session that waits for news (``wakeup.py``: LISTEN/NOTIFY on PostgreSQL,
a poll of the queue's fingerprint elsewhere), hands each piece of news to every lane, adds the lanes' results up, and
keeps ``Health`` (what `/healthz` answers, below). Each lane (``lanes.py``) owns one controller's breaker,
Jenkins client, database session and pass loop, so a controller that answers slowly or not at all never delays
another's pass. With one controller the supervisor runs its lane on its own thread and session (no second session).

A lane wakes for whichever comes first: new work, a freed cap slot (only when its last pass stopped at a cap), the
next pending row becoming due, a schedule's next tick, the next lease expiring, the pruner's next batch, or the
periodic pass ``interval`` seconds apart (the reconciler's fallback should a notification ever be lost).

Failures end a pass, never the loop: Jenkins as a whole failing (the breaker's call: ``breaker.py``), or the
database going away, is logged once per pass and retried with capped exponential backoff and jitter — while
the webhook keeps receiving callbacks. Only a configuration error (nothing will ever work) or a shutdown request ends
the loop; a lane that fails for good stops them all.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import DatabaseUnavailable
from ..observability import logger
from ..store.db import Database, Session
from ..store.dispatcher import DispatcherStore
from .breaker import Breaker, breaker_for
from .decisions import backoff_seconds
from .dispatcher import pass_duties
from .duties.pruner import Pruner
from .heartbeat import Heartbeat
from .lanes import (
    DATABASE_RETRY,
    EXPIRED_LEASE_RECHECK_SECONDS,
    MIN_WAIT_SECONDS,
    Lane,
    LaneTiming,
    LoopSummary,
    add_up,
    news_calls_for_a_pass,
    seconds_until_next_pass,
)
from .wakeup import LaneSignal, WorkSignal

__all__ = ["EXPIRED_LEASE_RECHECK_SECONDS", "MIN_WAIT_SECONDS", "Condition", "DispatchLoop", "Health", "add_up",
           "default_pass_budget", "news_calls_for_a_pass", "seconds_until_next_pass"]

# A pass still running this many times its budget (plus one Jenkins timeout: the last triggers' wait) is overdue:
# /healthz says "degraded" while it lasts. Not "unavailable": a long reconciliation after an outage is legitimate.
OVERDUE_BUDGETS = 2.0
PASS_BUDGET_SECONDS = 55.0


# --------------------------------------------------------------------------- health


@dataclass
class Condition:
    """The last known state of one dependency, as `/healthz` reports it."""

    ok: bool | None = None  # None: not known yet
    reason: str | None = None
    since: str | None = None  # when it entered this state (UTC, ISO 8601)
    failures: int = 0  # consecutive failed attempts

    def as_dict(self) -> dict[str, Any]:
        """The condition as `/healthz` shows it."""
        state = "unknown" if self.ok is None else ("ok" if self.ok else "unavailable")
        return {"status": state, "reason": self.reason, "since": self.since, "consecutive_failures": self.failures}


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Health:
    """What the dispatcher loop sees, kept in memory: answering `/healthz` costs no database session.

    Three parts are read live rather than recorded when a pass ends, since a pass may never end: the breaker of
    Jenkins, how long the session's statement in progress has waited (``watch_database``), and how long the pass
    in progress has run (``pass_started``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.database = Condition()
        self.jenkins: Breaker | None = None  # the loop's breaker (its first controller's), once the loop runs
        self.controllers: dict[str, Breaker] = {}  # every controller's breaker, by name, once the loop runs
        self.passes = 0
        self.last_pass_at: str | None = None
        self.last_pass_unix: float | None = None  # the same moment, for Prometheus
        self.last_pass: dict[str, Any] | None = None
        # Statements the dispatcher's session has sent, in passes and in the waits between them (a polling
        # wait probes the queue): what an idle dispatcher costs the database, read live (a plain int).
        self.statements_sent: Callable[[], int] = lambda: 0
        self._waiting: Callable[[], float] = lambda: 0.0  # the statement in progress's wait, in seconds
        self._stall_seconds = math.inf
        # Passes in progress, by lane (a controller's own thread; "" when one thread serves every controller):
        # (monotonic start, budget, overdue after).
        self._running: dict[str, tuple[float, float, float]] = {}

    def watch_database(self, waiting_seconds: Callable[[], float], stall_seconds: float) -> None:
        """Read ``waiting_seconds()`` at each report: above ``stall_seconds`` the database stopped answering."""
        self._waiting = waiting_seconds
        self._stall_seconds = stall_seconds

    def _set(self, condition: Condition, ok: bool, reason: str | None = None) -> None:
        with self._lock:
            if condition.ok is not ok:
                condition.since = _now_iso()
            condition.ok = ok
            condition.reason = reason
            condition.failures = 0 if ok else condition.failures + 1

    def database_ok(self) -> None:
        """The database answered."""
        self._set(self.database, True)

    def database_failed(self, reason: str) -> int:
        """The database failed; return how many times in a row."""
        self._set(self.database, False, reason)
        return self.database.failures

    def pass_started(self, budget_seconds: float, overdue_after_seconds: float, lane: str = "") -> None:
        """A pass began (its claiming budget, and when it counts as overdue) on ``lane``."""
        with self._lock:
            self._running[lane] = (time.monotonic(), budget_seconds, overdue_after_seconds)

    def pass_ended(self, lane: str = "") -> None:
        """The pass in progress on ``lane`` ended, however."""
        with self._lock:
            self._running.pop(lane, None)

    def record_pass(self, summary: dict[str, Any]) -> None:
        """Remember a finished pass and when it ended."""
        with self._lock:
            self.passes += 1
            now = datetime.now(UTC)
            self.last_pass_at = now.isoformat(timespec="seconds")
            self.last_pass_unix = now.timestamp()
            self.last_pass = summary

    def _database_now(self) -> dict[str, Any]:
        """The database's condition as last recorded, unless the statement in progress has waited too long."""
        doc = self.database.as_dict()
        waited = self._waiting()
        if waited > self._stall_seconds:
            doc.update(status="unavailable", reason=f"a statement has waited {waited:.0f} s for the database's "
                                                    f"answer (more than DB_STALL_SECONDS, {self._stall_seconds:g})")
        return doc

    def _dispatcher_now(self) -> dict[str, Any]:
        if not self._running:
            return {"status": "idle"}
        # The pass that has run longest speaks for the dispatcher (lanes: one controller's pass may be overdue).
        started, budget, overdue_after = min(self._running.values())
        running = time.monotonic() - started
        overdue = running > overdue_after
        return {"status": "overdue" if overdue else "passing", "pass_running_seconds": round(running, 1),
                "pass_budget_seconds": budget}

    def _jenkins_now(self) -> dict[str, Any]:
        if self.jenkins is None:
            return {"status": "unknown", "reason": None, "since": None, "consecutive_failures": 0}
        return self.jenkins.snapshot()

    def _controllers_now(self) -> dict[str, dict[str, Any]]:
        return {name: dict(breaker.snapshot(), url=breaker.url) for name, breaker in self.controllers.items()}

    def readings(self) -> dict[str, float | None]:
        """Numbers for metrics: 1/0 per dependency (None: not known yet), and the last pass's Unix time."""
        with self._lock:
            database, jenkins = self._database_now()["status"], self._jenkins_now()["status"]
            return {
                "database_up": None if database == "unknown" else float(database == "ok"),
                "jenkins_up": None if jenkins == "unknown" else float(jenkins == "ok"),
                "last_pass_timestamp_seconds": self.last_pass_unix,
            }

    def controller_readings(self) -> dict[str, float | None]:
        """Per controller: 1 while its breaker is closed, 0 while open (None: not asked yet)."""
        with self._lock:
            states = {name: c["status"] for name, c in self._controllers_now().items()}
        return {name: None if state == "unknown" else float(state == "ok") for name, state in states.items()}

    def report(self) -> tuple[int, dict[str, Any]]:
        """503 while the database does not answer (a failed pass said so, or a statement waits too long); else 200,
        "degraded" while Jenkins is down or a pass is overdue: Jenkins's state is reported, not judged, since
        callbacks must keep arriving while Jenkins rejects our triggers."""
        with self._lock:
            database, jenkins, dispatcher = self._database_now(), self._jenkins_now(), self._dispatcher_now()
            controllers = self._controllers_now()
            # One controller down is "degraded": the others' rows still go out.
            troubled = (jenkins["status"] == "unavailable" or dispatcher["status"] == "overdue"
                        or any(c["status"] == "unavailable" for c in controllers.values()))
            doc = {
                "status": "unavailable" if database["status"] == "unavailable" else ("degraded" if troubled else "ok"),
                "database": database,
                "jenkins": jenkins,
                "controllers": controllers,
                "dispatcher": dispatcher,
                "passes": self.passes,
                "last_pass_at": self.last_pass_at,
                "last_pass": self.last_pass,
                "db_statements": self.statements_sent(),
            }
        return (503 if doc["status"] == "unavailable" else 200), doc


def default_pass_budget(settings: Settings) -> float:
    """How long one pass claims before the next pass (which reconciles first) takes over: at most a lease
    (so expired leases, and the watch on re-sent dispatches, get a turn at least once per lease even under a
    never-ending stream of work) and at most PASS_BUDGET_SECONDS, but room for three trigger waves."""
    timeout = settings.jenkins.timeout_seconds if settings.jenkins else 0.0
    return max(min(PASS_BUDGET_SECONDS, float(settings.lease_seconds)), 3 * timeout)


class DispatchLoop:
    """The supervisor: runs a lane per controller until shut down (serve) or until the time left is too short
    (Lambda)."""

    def __init__(
        self,
        settings: Settings,
        db: Session,
        signal: WorkSignal,
        *,
        interval: float,
        shutdown: threading.Event | None = None,
        health: Health | None = None,
        pass_budget_seconds: float | None = None,
        rng: random.Random | None = None,
        heartbeat: Heartbeat | None = None,
        breaker: Breaker | None = None,
        pruner: Pruner | None = None,
    ):
        self.settings = settings
        self.db = db
        self.signal = signal
        self.shutdown = shutdown or threading.Event()
        self.rng = rng or random.Random()
        self.controllers = list(settings.controllers_by_name()) or [DEFAULT_CONTROLLER]
        # One breaker per controller (per Jenkins), kept across passes; ``breaker``, given, is the first one's.
        self.breakers: dict[str, Breaker] = {
            name: (breaker if breaker is not None and n == 0 else breaker_for(self._settings_of(name), rng=self.rng))
            for n, name in enumerate(self.controllers)}
        self.breaker = self.breakers[self.controllers[0]]
        self.health = health or Health()
        self.health.statements_sent = lambda: db.statements
        self.health.watch_database(db.waiting_seconds, settings.db_stall_seconds)
        self.health.jenkins = self.breaker
        self.health.controllers = self.breakers
        self.heartbeat = heartbeat  # None: no heartbeat recorded (tests)
        if heartbeat is not None:  # the lanes share these breakers: one record of them all
            heartbeat.serves(self.breakers, settings)
        # The first lane sweeps rows of unknown controllers and prunes, for the whole dispatcher.
        self.pruner = pruner or Pruner(settings.prune_finished_after_seconds)
        budget = pass_budget_seconds or default_pass_budget(settings)
        timeout = settings.jenkins.timeout_seconds if settings.jenkins else 0.0
        # Below reserve_seconds left a pass could not send a single trigger: stop (Lambda only).
        self.timing = LaneTiming(interval=interval, pass_budget_seconds=budget,
                                 overdue_after_seconds=OVERDUE_BUDGETS * budget + timeout,
                                 reserve_seconds=settings.time_margin_seconds + timeout)

    def _settings_of(self, name: str) -> Settings:
        """The settings of one controller's passes (``jenkins`` is that controller)."""
        return self.settings.for_controller(name) if self.settings.controllers_by_name() else self.settings

    def _lane(self, n: int, db: Session, signal: WorkSignal | LaneSignal, shutdown: threading.Event,
              rng: random.Random) -> Lane:
        name = self.controllers[n]
        return Lane(name, self._settings_of(name), db, signal, timing=self.timing, breaker=self.breakers[name],
                    health=self.health, shutdown=shutdown, rng=rng, heartbeat=self.heartbeat,
                    duties=pass_duties(sweeps=n == 0, pruner=self.pruner if n == 0 else None))

    def run(self, seconds_left: Callable[[], float] | None = None) -> dict[str, Any]:
        """Run passes until shutdown, a configuration error or ``seconds_left`` runs out; return the summary."""
        left = seconds_left or (lambda: math.inf)
        if len(self.controllers) == 1:
            result = self._lane(0, self.db, self.signal, self.shutdown, self.rng).run(left).as_dict()
        else:
            result = self._run_lanes(left)
        # `serve` shutting down says so (not live any more), unless the database is away: not worth a wait.
        if result["stopped_because"] == "stop requested" and self.heartbeat is not None \
                and self.health.database.ok is not False:
            self.heartbeat.stopped(DispatcherStore(self.db))
        return result

    def _run_lanes(self, left: Callable[[], float]) -> dict[str, Any]:
        """Several controllers: each lane on its own thread and database session (a session is not thread-safe).
        This thread keeps the one session that waits for news and hands each piece to every lane. A lane that fails
        for good (a configuration error) stops them all, and its error is raised here."""
        stop = threading.Event()
        signals = [LaneSignal(stop) for _ in self.controllers]
        sessions: list[Session] = [Database(self.settings.database, application_name=f"jenkins-dispatch-{name}"[:63])
                                   for name in self.controllers]
        lanes = [self._lane(n, session, signal, stop, random.Random(self.rng.random()))
                 for n, (session, signal) in enumerate(zip(sessions, signals, strict=True))]
        every = [self.db, *sessions]
        self.health.statements_sent = lambda: sum(s.statements for s in every)
        self.health.watch_database(lambda: max(s.waiting_seconds() for s in every), self.settings.db_stall_seconds)
        results: dict[str, dict[str, Any]] = {}
        failures: list[BaseException] = []

        def run_lane(lane: Lane) -> None:
            try:
                results[lane.name] = lane.run(left).as_dict()
            except BaseException as exc:  # raised again in the supervisor's thread, below
                failures.append(exc)
                stop.set()
                self.shutdown.set()  # the loop ends (a lane fails only for good): wakes the wait for news too

        threads = [threading.Thread(target=run_lane, args=(lane,), name=f"lane-{lane.name}", daemon=True)
                   for lane in lanes]
        for thread in threads:
            thread.start()
        try:
            stopped_because = self._fan_out_news(left, signals, stop)
        finally:
            stop.set()
            for signal in signals:
                signal.post(set())
            for thread in threads:
                thread.join()
            for session in sessions:
                session.close()
        if failures:
            raise failures[0]
        return _sum_of_lanes(results, stopped_because)

    def _fan_out_news(self, left: Callable[[], float], signals: list[LaneSignal], stop: threading.Event) -> str:
        """Wait for news on the supervisor's session and post it to every lane, until a stop or the time runs out."""
        while not self.shutdown.is_set() and not stop.is_set():
            if left() < self.timing.reserve_seconds:
                return "time nearly up"
            try:
                # As long as one lane would wait (a polling signal polls only within a long wait).
                news = self.signal.wait(min(self.timing.interval, left() - self.timing.reserve_seconds))
            except DatabaseUnavailable as exc:  # the lanes meet it too, and wait it out on their own
                self.health.database_failed(str(exc))
                logger.error("lost the database session while waiting for work", extra={"reason": str(exc)})
                self.shutdown.wait(backoff_seconds(self.health.database.failures, *DATABASE_RETRY, self.rng))
                continue
            if news:
                for signal in signals:
                    signal.post(news)
        return "stop requested"


def _sum_of_lanes(results: dict[str, dict[str, Any]], stopped_because: str) -> dict[str, Any]:
    """The lanes' summaries added up, each lane's under ``controllers``."""
    total = LoopSummary(stopped_because=stopped_because)
    for result in results.values():
        total.passes += int(result.get("passes", 0))
        add_up(total.totals, {k: v for k, v in result.items() if k not in ("passes", "stopped_because")})
    return dict(total.as_dict(), controllers=results)
