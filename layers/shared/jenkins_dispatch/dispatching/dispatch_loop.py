"""Dispatching without pause: pass after pass, woken by new work — `serve`, and the continuous Lambda.

Between passes the loop waits on a WorkSignal (LISTEN/NOTIFY on PostgreSQL) and wakes for whichever
comes first: new work, a freed cap slot (only when the last pass stopped at a cap), the next pending
row becoming due, a schedule's next tick (each pass starts by enqueuing the due ones), the next lease expiring, or the periodic pass ``interval`` seconds apart (the
reconciler's fallback should a notification ever be lost).

Failures end a pass, never the loop: Jenkins as a whole failing (the breaker's call: ``breaker.py``), or the
database going away, is logged once per pass and retried with capped exponential backoff and jitter — while
the webhook keeps receiving callbacks. ``Health`` (what `/healthz` answers) reads the breaker, the database
session's statement in progress and the pass in progress as they are, so a database that stopped answering or a
pass far over its budget shows within seconds, not when the pass ends. Only a configuration error (nothing will
ever work) or a shutdown request ends the loop.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import ConfigError, DatabaseBusy, DatabaseUnavailable, DispatchError
from ..jenkins.client import JenkinsClient
from ..observability import logger, metrics
from ..store.db import Database, Session
from ..store.queue import Queue
from ..store.rows import Gauges
from .breaker import Breaker, breaker_for
from .decisions import backoff_seconds
from .dispatcher import Dispatcher, combine_summaries, lane_client
from .heartbeat import Heartbeat
from .wakeup import SLOT, LaneSignal, WorkSignal

# How soon a lost database is tried again: doubling from the base up to the cap, with jitter. (Jenkins: its
# breaker's JENKINS_RETRY_BASE_SECONDS / JENKINS_RETRY_MAX_SECONDS.)
DATABASE_RETRY = (0.5, 5.0)
BUSY_RETRY_SECONDS = 1.0
# A pass still running this many times its budget (plus one Jenkins timeout: the last triggers' wait) is overdue:
# /healthz says "degraded" while it lasts. Not "unavailable": a long reconciliation after an outage is legitimate.
OVERDUE_BUDGETS = 2.0
PASS_BUDGET_SECONDS = 55.0
# Never sleep less than this between passes (a row due "now" that a cap holds back must not spin us).
MIN_WAIT_SECONDS = 0.05
# A lease that expired but is still held (the reconciler is waiting for Jenkins) is looked at again
# no sooner than this.
EXPIRED_LEASE_RECHECK_SECONDS = 1.0


# Pass endings after which more may be due at once: the next pass starts without waiting.
MORE_TO_DO = ("pass budget spent", "max_jobs reached")


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


# --------------------------------------------------------------------------- pure decisions


def default_pass_budget(settings: Settings) -> float:
    """How long one pass claims before the next pass (which reconciles first) takes over: at most a lease
    (so expired leases, and the watch on re-sent dispatches, get a turn at least once per lease even under a
    never-ending stream of work) and at most PASS_BUDGET_SECONDS, but room for three trigger waves."""
    timeout = settings.jenkins.timeout_seconds if settings.jenkins else 0.0
    return max(min(PASS_BUDGET_SECONDS, float(settings.lease_seconds)), 3 * timeout)



def seconds_until_next_pass(gauges: Gauges | None, interval: float) -> float:
    """How long to sleep after a pass when no notification comes: the periodic pass, or sooner when a
    pending row becomes due, a schedule ticks (its row does not exist yet) or a lease expires."""
    wait = interval
    if gauges:
        due = gauges.get("next_due_seconds")
        if due is not None:
            wait = min(wait, due)
        tick = gauges.get("next_tick_seconds")
        if tick is not None:
            # A tick already due after the pass (one it could not take: a broken expression written by hand)
            # is looked at again no sooner than a lease: it must not spin the loop.
            wait = min(wait, EXPIRED_LEASE_RECHECK_SECONDS if tick <= 0 else tick)
        lease = gauges.get("next_lease_seconds")
        if lease is not None:
            wait = min(wait, max(lease, EXPIRED_LEASE_RECHECK_SECONDS))
    return max(wait, MIN_WAIT_SECONDS)


def news_calls_for_a_pass(news: set[str], last_stopped_because: str) -> bool:
    """A freed slot matters only when the last pass stopped at a cap; anything else is new work."""
    if not news:
        return False
    if news == {SLOT}:
        return last_stopped_because == "cap reached"
    return True


def add_up(total: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """Sum two pass summaries (numbers add up, nested counts too; text takes the latest)."""
    for key, value in summary.items():
        if isinstance(value, dict):
            total[key] = add_up(dict(total.get(key) or {}), value)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            total[key] = value
        else:
            total[key] = total.get(key, 0) + value
    return total


def _counts(pass_summary: dict[str, Any]) -> dict[str, Any]:
    """What of a pass's summary the loop's adds up."""
    return {k: v for k, v in pass_summary.items() if k not in ("stopped_because", "controllers")}


# --------------------------------------------------------------------------- the loop


@dataclass
class LoopSummary:
    """What a run of the loop did: passes, summed counts, why it stopped."""
    passes: int = 0
    totals: dict[str, Any] = field(default_factory=dict)
    stopped_because: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The summary as one flat dict (the Lambda's result)."""
        return {"passes": self.passes, **self.totals, "stopped_because": self.stopped_because}


class DispatchLoop:
    """Runs dispatcher passes until shut down (serve) or until the time left is too short (Lambda)."""

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
        lane: str | None = None,
        breakers: dict[str, Breaker] | None = None,
    ):
        self.settings = settings
        self.db = db
        self.signal = signal
        self.interval = interval
        self.shutdown = shutdown or threading.Event()
        self.rng = rng or random.Random()
        # One breaker per controller (per Jenkins), kept across passes: whether it is down, and when to try it
        # again. A controller whose breaker is open is left out of the pass: its rows are not even claimed.
        # ``lane``: this loop is one controller's own thread under a loop serving several (``_run_lanes``): it
        # passes over that controller only, on its own session, and leaves health wiring and the shutdown
        # heartbeat to the loop that started it.
        self.lane = lane
        self.controllers = [lane] if lane is not None else (list(settings.controllers_by_name())
                                                            or [DEFAULT_CONTROLLER])
        self.breakers: dict[str, Breaker] = {}
        for name in self.controllers:
            given = (breakers or {}).get(name) or (
                breaker if breaker is not None and name == self.controllers[0] else None)
            self.breakers[name] = given or breaker_for(self._settings_of(name), rng=self.rng)
        self.breaker = self.breakers[self.controllers[0]]
        self.health = health or Health()
        if lane is None:
            self.health.statements_sent = lambda: db.statements
            self.health.watch_database(db.waiting_seconds, settings.db_stall_seconds)
            self.health.jenkins = self.breaker
            self.health.controllers = self.breakers
            if heartbeat is not None:  # the lanes share this loop's breakers: one record of them all
                heartbeat.serves(self.breakers, settings)
        # Which loop fails the rows that name no configured controller: the only one, or the first lane.
        self.fails_unknown_controllers = lane is None or lane == (list(settings.controllers_by_name())
                                                                  or [DEFAULT_CONTROLLER])[0]
        self.pass_budget_seconds = pass_budget_seconds or default_pass_budget(settings)
        self.heartbeat = heartbeat  # None: this loop records no heartbeat (tests)
        self.gauges: Gauges | None = None
        self.watching = 0
        timeout = settings.jenkins.timeout_seconds if settings.jenkins else 0.0
        # Below this much time left a pass could not send a single trigger: stop (Lambda only).
        self.reserve_seconds = settings.time_margin_seconds + timeout

    def _settings_of(self, name: str) -> Settings:
        """The settings of one controller's passes (``jenkins`` is that controller)."""
        return self.settings.for_controller(name) if self.settings.controllers_by_name() else self.settings

    def run(self, seconds_left: Callable[[], float] | None = None) -> dict[str, Any]:
        """Run passes until shutdown, a configuration error or ``seconds_left`` runs out; return the summary.
        Several controllers: each runs in its own lane (``_run_lanes``)."""
        left = seconds_left or (lambda: math.inf)
        if self.lane is None and len(self.controllers) > 1:
            return self._run_lanes(left)
        summary = LoopSummary()
        last_stop = ""
        clients = {name: lane_client(self._settings_of(name)) for name in self.controllers}
        try:
            while True:
                if self.shutdown.is_set():
                    summary.stopped_because = "stop requested"
                    break
                if left() < self.reserve_seconds:
                    summary.stopped_because = "time nearly up"
                    break
                pause, last_stop = self._one_pass(clients, left, summary)
                if pause is not None:  # a dependency failed: wait it out, whatever the news says
                    self.shutdown.wait(max(0.0, min(pause, left() - self.reserve_seconds)))
                    continue
                self._wait_for_work(left, last_stop)
        finally:
            for client in clients.values():
                client.close()
        # `serve` shutting down says so (not live any more), unless the database is away: not worth a wait.
        if summary.stopped_because == "stop requested" and self.heartbeat is not None and self.lane is None \
                and self.health.database.ok is not False:
            self.heartbeat.stopped(Queue(self.db))
        return summary.as_dict()

    def _run_lanes(self, left: Callable[[], float]) -> dict[str, Any]:
        """Several controllers: each runs in its own lane — a thread, a database session (a session is not
        thread-safe) and a loop over that controller only — so a controller that answers slowly (a trigger wave of
        timeouts) or not at all never delays another's pass. This thread keeps the one session that waits for
        news (LISTEN, or the poll) and hands each piece to every lane. A lane that fails for good (a configuration
        error) stops them all, and its error is raised here."""
        stop = threading.Event()
        sessions: list[Session] = []
        lanes: list[DispatchLoop] = []
        signals = [LaneSignal(stop) for _ in self.controllers]
        for name, lane_signal in zip(self.controllers, signals, strict=True):
            session = Database(self.settings.database, application_name=f"jenkins-dispatch-{name}"[:63])
            sessions.append(session)
            lanes.append(DispatchLoop(self.settings, session, lane_signal, interval=self.interval,
                                      shutdown=stop, health=self.health, pass_budget_seconds=self.pass_budget_seconds,
                                      rng=random.Random(self.rng.random()), heartbeat=self.heartbeat, lane=name,
                                      breakers=self.breakers))
        every = [self.db, *sessions]
        self.health.statements_sent = lambda: sum(s.statements for s in every)
        self.health.watch_database(lambda: max(s.waiting_seconds() for s in every), self.settings.db_stall_seconds)
        results: dict[str, dict[str, Any]] = {}
        failures: list[BaseException] = []

        def run_lane(lane: DispatchLoop) -> None:
            try:
                results[lane.controllers[0]] = lane.run(left)
            except BaseException as exc:  # raised again in the loop's own thread, below
                failures.append(exc)
                stop.set()
                self.shutdown.set()  # the loop ends (a lane fails only for good): wakes the wait for news too

        threads = [threading.Thread(target=run_lane, args=(lane,), name=f"lane-{lane.controllers[0]}", daemon=True)
                   for lane in lanes]
        for thread in threads:
            thread.start()
        stopped_because = "stop requested"
        try:
            while not self.shutdown.is_set() and not stop.is_set():
                if left() < self.reserve_seconds:
                    stopped_because = "time nearly up"
                    break
                try:
                    # As long as the single loop would wait (a polling signal polls only within a long wait).
                    news = self.signal.wait(min(self.interval, left() - self.reserve_seconds))
                except DatabaseUnavailable as exc:  # the lanes meet it too, and wait it out on their own
                    self.health.database_failed(str(exc))
                    logger.error("lost the database session while waiting for work", extra={"reason": str(exc)})
                    self.shutdown.wait(backoff_seconds(self.health.database.failures, *DATABASE_RETRY, self.rng))
                    continue
                if news:
                    for lane_signal in signals:
                        lane_signal.post(news)
        finally:
            stop.set()
            for lane_signal in signals:
                lane_signal.post(set())
            for thread in threads:
                thread.join()
            for session in sessions:
                session.close()
        if failures:
            raise failures[0]
        total = LoopSummary(stopped_because=stopped_because)
        for result in results.values():
            total.passes += int(result.get("passes", 0))
            add_up(total.totals, {k: v for k, v in result.items() if k not in ("passes", "stopped_because")})
        if self.heartbeat is not None and self.health.database.ok is not False and stopped_because == "stop requested":
            self.heartbeat.stopped(Queue(self.db))
        return dict(total.as_dict(), controllers=results)

    def _one_pass(self, clients: dict[str, JenkinsClient], left: Callable[[], float],
                  summary: LoopSummary) -> tuple[float | None, str]:
        """One pass over every controller whose breaker lets it be tried: each its own Dispatcher (its rows, client
        and breaker). Returns (pause before the next one or None, why it stopped); ``clients`` of controllers that
        went down are replaced by fresh ones."""
        ready = [name for name in self.controllers if self.breakers[name].retry_in() <= 0]
        if not ready:  # every controller is down and none is due for another try yet
            return min(b.retry_in() for b in self.breakers.values()), "Jenkins unavailable"
        budget = self.pass_budget_seconds
        claim_until = None if budget is None else time.monotonic() + budget
        # Lambda: the invocation's real time left; `serve`: none (its pass ends softly at claim_until).
        remaining_ms = None if left() == math.inf else (lambda: int(left() * 1000))
        timeout = self.settings.jenkins.timeout_seconds if self.settings.jenkins else 0.0
        self.health.pass_started(budget, OVERDUE_BUDGETS * budget + timeout, self.lane or "")
        was_down = {name for name in ready if self.breakers[name].is_open}
        results: dict[str, dict[str, Any]] = {}
        dispatchers: list[Dispatcher] = []
        ran_to_the_end = False
        try:
            for n, name in enumerate(ready):
                dispatcher = Dispatcher(self._settings_of(name), self.db, clients[name], remaining_ms=remaining_ms,
                                        stop=self.shutdown, rng=self.rng, claim_until=claim_until,
                                        breaker=self.breakers[name],
                                        fail_unknown_controllers=n == 0 and self.fails_unknown_controllers)
                dispatchers.append(dispatcher)
                results[name] = dispatcher.run()
            ran_to_the_end = True
        except ConfigError:
            raise
        except DatabaseBusy as exc:
            logger.warning("pass ended early: the database is busy; trying again shortly", extra={"reason": str(exc)})
            self.health.database_ok()
            self._beat("database_busy", str(exc))
            return BUSY_RETRY_SECONDS, "database busy"
        except DatabaseUnavailable as exc:
            failures = self.health.database_failed(str(exc))
            pause = backoff_seconds(failures, *DATABASE_RETRY, self.rng)
            logger.error("pass ended: the database is unavailable; retrying",
                         extra={"reason": str(exc), "retry_in_seconds": round(pause, 2)})
            return pause, "database unavailable"
        except DispatchError as exc:
            logger.error("pass failed", extra={"reason": str(exc)})
            self._beat("failed", str(exc))
            return backoff_seconds(1, *DATABASE_RETRY, self.rng), str(exc)
        except Exception as exc:  # a defect: keep serving callbacks, say what broke, try again later
            logger.exception("pass crashed", extra={"reason": f"{type(exc).__name__}: {exc}"})
            self._beat("crashed", f"{type(exc).__name__}: {exc}")
            return backoff_seconds(3, *DATABASE_RETRY, self.rng), "crashed"
        finally:
            if not ran_to_the_end:  # what it did before it ended stays done: the loop's counts keep it
                for dispatcher in dispatchers:
                    add_up(summary.totals, _counts(dispatcher.summary.as_dict()))
            self.health.pass_ended(self.lane or "")
            try:
                metrics.flush_if_any()
            except Exception as exc:  # metrics must never end the loop
                logger.warning("could not publish the pass's metrics", extra={"reason": f"{type(exc).__name__}: {exc}"})
        result = combine_summaries(results)
        self.health.database_ok()
        self.health.record_pass(result)
        self.gauges = dispatchers[-1].gauges
        self.watching = sum(d.summary.reconciled.watching for d in dispatchers)
        summary.passes += 1
        add_up(summary.totals, _counts(result))
        stopped = result.get("stopped_because", "")
        talked = any(d.talked_to_jenkins for d in dispatchers)
        down = [name for name in ready if self.breakers[name].is_open]
        for name in down:
            # The breaker opened (or stayed open): the pass released what it had not sent to this controller. Its
            # next pass, once the breaker's backoff is over, asks it first; its rows wait, the others' do not.
            breaker = self.breakers[name]
            logger.error("Jenkins unavailable: the pass released what it had not sent; retrying",
                         extra={"controller": name, "reason": breaker.why or stopped,
                                "retry_in_seconds": round(breaker.retry_in(), 2)})
            clients[name].close()  # a fresh HTTP session (and crumb, and identity check) for the next try
            clients[name] = lane_client(self._settings_of(name))
        for name in was_down - set(down):
            logger.info("Jenkins answers again", extra={"controller": name, "jenkins": self.breakers[name].url})
        self._beat_after(result, talked_to_jenkins=talked or bool(down))
        if all(b.is_open for b in self.breakers.values()):
            return min(b.retry_in() for b in self.breakers.values()), stopped
        return None, stopped

    def _beat(self, outcome: str, detail: str, **jenkins: Any) -> None:
        """Record how the pass ended (not called when the database is unreachable: that write would fail too)."""
        if self.heartbeat is not None:
            self.heartbeat.record(Queue(self.db), outcome, detail, **jenkins)

    def _beat_after(self, result: dict[str, Any], talked_to_jenkins: bool) -> None:
        if self.heartbeat is not None:
            self.heartbeat.after_pass(Queue(self.db), result, talked_to_jenkins)

    def _wait_for_work(self, left: Callable[[], float], last_stop: str) -> None:
        if last_stop in MORE_TO_DO:
            return  # the pass stopped on its own budget with work left: no reason to sleep
        wait = seconds_until_next_pass(self.gauges, self.interval)
        # A controller that is down is tried again when its breaker says, even while the others are idle.
        retries = [b.retry_in() for b in self.breakers.values() if b.is_open]
        if retries:
            wait = min(wait, max(min(retries), MIN_WAIT_SECONDS))
        if self.watching:  # a lost re-send may land any moment: look while it still waits in Jenkins's queue
            wait = min(wait, self.settings.lease_seconds / 2)
        wake_at = time.monotonic() + wait
        while not self.shutdown.is_set():
            timeout = min(wake_at - time.monotonic(), left() - self.reserve_seconds)
            if timeout <= 0:
                return
            try:
                news = self.signal.wait(timeout)
            except DatabaseUnavailable as exc:
                self.health.database_failed(str(exc))
                logger.error("lost the database session while waiting for work", extra={"reason": str(exc)})
                return
            if news_calls_for_a_pass(news, last_stop):
                return
