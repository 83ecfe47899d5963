"""One controller's lane: its breaker, its Jenkins client, its database session and its loop of passes.

A lane runs a pass (``dispatcher.py``, with the lane's duties), then waits for news on its signal — the supervisor's
own (one controller) or the news the supervisor fans out to it (several, ``dispatch_loop.py``) — or for the next row,
tick or lease due, its breaker's next try, or the periodic pass. A pass that fails is mapped by the pure
``decisions.after_a_failed_pass`` to a pause, a reason and a heartbeat; only a configuration error ends the lane.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import Settings
from ..errors import DatabaseUnavailable
from ..observability import logger, metrics
from ..store.db import Session
from ..store.dispatcher import DispatcherStore
from ..store.rows import Gauges
from .breaker import Breaker
from .decisions import FailedPass, after_a_failed_pass, backoff_seconds
from .dispatcher import Dispatcher, lane_client
from .duties import Duty
from .duties.pruner import Pruner
from .heartbeat import Heartbeat
from .wakeup import SLOT, LaneSignal, WorkSignal

# How soon a lost database is tried again: doubling from the base up to the cap, with jitter. (Jenkins: its
# breaker's JENKINS_RETRY_BASE_SECONDS / JENKINS_RETRY_MAX_SECONDS.)
DATABASE_RETRY = (0.5, 5.0)
# Never sleep less than this between passes (a row due "now" that a cap holds back must not spin us).
MIN_WAIT_SECONDS = 0.05
# A lease that expired but is still held (the reconciler is waiting for Jenkins) is looked at again
# no sooner than this.
EXPIRED_LEASE_RECHECK_SECONDS = 1.0
# Pass endings after which more may be due at once: the next pass starts without waiting.
MORE_TO_DO = ("pass budget spent", "max_jobs reached")


# --------------------------------------------------------------------------- pure decisions


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


@dataclass
class LoopSummary:
    """What a run of the loop did: passes, summed counts, why it stopped."""
    passes: int = 0
    totals: dict[str, Any] = field(default_factory=dict)
    stopped_because: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The summary as one flat dict (the Lambda's result)."""
        return {"passes": self.passes, **self.totals, "stopped_because": self.stopped_because}


# --------------------------------------------------------------------------- the lane


class PassHealth(Protocol):
    """What a lane tells the supervisor's ``Health`` (``dispatch_loop.py``) of its passes and the database."""

    def pass_started(self, budget_seconds: float, overdue_after_seconds: float, lane: str = "") -> None:
        """A pass began on ``lane``."""

    def pass_ended(self, lane: str = "") -> None:
        """The pass in progress on ``lane`` ended, however."""

    def record_pass(self, summary: dict[str, Any]) -> None:
        """A pass ran to its end."""

    def database_ok(self) -> None:
        """The database answered."""

    def database_failed(self, reason: str) -> int:
        """The database failed; return how many times in a row."""


@dataclass(frozen=True)
class LaneTiming:
    """A lane's clocks, set by its supervisor: the pass's claiming budget, when a pass counts as overdue, the periodic
    pass, and the time a pass needs at least (below it a Lambda stops)."""
    interval: float
    pass_budget_seconds: float
    overdue_after_seconds: float
    reserve_seconds: float


class Lane:
    """One controller's passes, one after the other, on its own session."""

    def __init__(self, name: str, settings: Settings, db: Session, signal: WorkSignal | LaneSignal, *,
                 timing: LaneTiming, breaker: Breaker, health: PassHealth, shutdown: threading.Event,
                 rng: random.Random, duties: list[Duty], heartbeat: Heartbeat | None):
        self.name = name
        self.settings = settings  # this controller's (Settings.for_controller), or the one controller's
        self.db = db
        self.signal = signal
        self.timing = timing
        self.breaker = breaker  # kept across passes: whether this Jenkins is down, and when to try it again
        self.health = health
        self.shutdown = shutdown
        self.rng = rng
        self.duties = duties  # kept across passes: the pruner remembers when it is due
        self.heartbeat = heartbeat  # None: no heartbeat recorded (tests)
        self.client = lane_client(settings)
        self.gauges: Gauges | None = None
        self.watching = 0

    def run(self, left: Callable[[], float]) -> LoopSummary:
        """Pass after pass until shutdown, a configuration error or ``left`` runs out."""
        summary = LoopSummary()
        try:
            while not self._stopped(left, summary):
                pause, last_stop = self._one_pass(left, summary)
                if pause is not None:  # a dependency failed: wait it out, whatever the news says
                    self.shutdown.wait(max(0.0, min(pause, left() - self.timing.reserve_seconds)))
                    continue
                self._wait_for_work(left, last_stop)
        finally:
            self.client.close()
        return summary

    def _stopped(self, left: Callable[[], float], summary: LoopSummary) -> bool:
        if self.shutdown.is_set():
            summary.stopped_because = "stop requested"
        elif left() < self.timing.reserve_seconds:
            summary.stopped_because = "time nearly up"
        return bool(summary.stopped_because)

    def _one_pass(self, left: Callable[[], float], summary: LoopSummary) -> tuple[float | None, str]:
        """One pass, unless the breaker says not yet. Returns (pause before the next one or None, why it stopped)."""
        if self.breaker.retry_in() > 0:  # down, and not due for another try yet
            return self.breaker.retry_in(), "Jenkins unavailable"
        budget = self.timing.pass_budget_seconds
        # Lambda: the invocation's real time left; `serve`: none (its pass ends softly at claim_until).
        remaining_ms = None if left() == math.inf else (lambda: int(left() * 1000))
        dispatcher = Dispatcher(self.settings, self.db, self.client, remaining_ms=remaining_ms, stop=self.shutdown,
                                rng=self.rng, claim_until=time.monotonic() + budget, breaker=self.breaker,
                                duties=self.duties)
        was_down = self.breaker.is_open
        self.health.pass_started(budget, self.timing.overdue_after_seconds, self.name)
        try:
            result = dispatcher.run()
        except Exception as exc:
            # What it did before it ended stays done: the loop's counts keep it.
            add_up(summary.totals, _counts(dispatcher.summary.as_dict()))
            failed = after_a_failed_pass(exc)
            if failed is None:
                raise
            return self._failed(failed, exc), failed.reason
        finally:
            self.health.pass_ended(self.name)
            try:
                metrics.flush_if_any()
            except Exception as exc:  # metrics must never end the loop
                logger.warning("could not publish the pass's metrics", extra={"reason": f"{type(exc).__name__}: {exc}"})
        return self._passed(dispatcher, result, was_down, summary)

    def _failed(self, failed: FailedPass, exc: Exception) -> float:
        """Carry out what ``after_a_failed_pass`` decided; return the pause."""
        attempt = failed.backoff_attempt
        if failed.database_ok is True:
            self.health.database_ok()
        elif failed.database_ok is False:
            attempt = self.health.database_failed(str(exc))
        pause = failed.pause_seconds if failed.pause_seconds is not None else \
            backoff_seconds(attempt or 1, *DATABASE_RETRY, self.rng)
        reason = failed.beat[1] if failed.beat else str(exc)
        extra: dict[str, Any] = {"reason": reason}
        if failed.database_ok is False:
            extra["retry_in_seconds"] = round(pause, 2)
        if failed.level == "exception":
            logger.exception(failed.log, extra=extra)
        else:
            getattr(logger, failed.level)(failed.log, extra=extra)
        if failed.beat is not None:
            self._beat(*failed.beat)
        return pause

    def _passed(self, dispatcher: Dispatcher, result: dict[str, Any], was_down: bool,
                summary: LoopSummary) -> tuple[float | None, str]:
        """A pass that ran to its end: health, counts, the breaker's verdict, the heartbeat."""
        self.health.database_ok()
        self.health.record_pass(result)
        self.gauges = dispatcher.gauges
        self.watching = dispatcher.summary.reconciled.watching
        summary.passes += 1
        add_up(summary.totals, _counts(result))
        stopped = result.get("stopped_because", "")
        down = self.breaker.is_open
        if down:
            # The breaker opened (or stayed open): the pass released what it had not sent. Its next pass, once the
            # breaker's backoff is over, asks it first; its rows wait, other controllers' do not.
            logger.error("Jenkins unavailable: the pass released what it had not sent; retrying",
                         extra={"controller": self.name, "reason": self.breaker.why or stopped,
                                "retry_in_seconds": round(self.breaker.retry_in(), 2)})
            self.client.close()  # a fresh HTTP session (and crumb, and identity check) for the next try
            self.client = lane_client(self.settings)
        elif was_down:
            logger.info("Jenkins answers again", extra={"controller": self.name, "jenkins": self.breaker.url})
        if self.heartbeat is not None:
            self.heartbeat.after_pass(DispatcherStore(self.db), result, dispatcher.talked_to_jenkins or down)
        return (self.breaker.retry_in() if down else None), stopped

    def _beat(self, outcome: str, detail: str) -> None:
        """Record how the pass ended (not called when the database is unreachable: that write would fail too)."""
        if self.heartbeat is not None:
            self.heartbeat.record(DispatcherStore(self.db), outcome, detail)

    def _more_to_prune(self) -> bool:
        return any(isinstance(duty, Pruner) and duty.seconds_until_due() <= 0 for duty in self.duties)

    def _wait_for_work(self, left: Callable[[], float], last_stop: str) -> None:
        if last_stop in MORE_TO_DO or self._more_to_prune():
            return  # the pass stopped on its own budget with work left: no reason to sleep
        wait = seconds_until_next_pass(self.gauges, self.timing.interval)
        # A controller that is down is tried again when its breaker says, even while the others are idle.
        if self.breaker.is_open:
            wait = min(wait, max(self.breaker.retry_in(), MIN_WAIT_SECONDS))
        if self.watching:  # a lost re-send may land any moment: look while it still waits in Jenkins's queue
            wait = min(wait, self.settings.lease_seconds / 2)
        wake_at = time.monotonic() + wait
        while not self.shutdown.is_set():
            timeout = min(wake_at - time.monotonic(), left() - self.timing.reserve_seconds)
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
