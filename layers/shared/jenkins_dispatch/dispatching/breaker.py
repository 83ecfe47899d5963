"""One Jenkins's circuit breaker: is it down, on what evidence, and when is it tried again.

"Jenkins is down" stops every trigger towards it and backs off, so it needs evidence (docs/jenkins.md, "Jenkins as
a whole: the breaker"), and one request's failure is not that:
- Jenkins said so itself — a 503 while it restarts or starts, a refused connection, rejected credentials — or
  Jenkins itself (``whoAmI``) did not answer a probe right after a failed request: open at once;
- requests failed in a way one request can (a 500, a proxy's 5xx, no answer): open only after
  ``failures`` of them in a row, with no success between, about that many different jobs. A job whose
  own triggers keep failing is that job's problem: its rows back off, the others are sent.
One success closes it, and the backoff starts again from its base; each time it opens again without a success
between, the backoff doubles (with jitter) up to its maximum.

Pure state behind a lock, with an injectable clock: the dispatcher's trigger threads record what they saw, the
dispatch loop waits until ``retry_at``, `/healthz` reads ``snapshot()``. One instance per Jenkins base URL: the
day several controllers are configured, each gets its own, and one controller's outage holds back only its
own rows.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..config import Settings
from ..jenkins.answers import TriggerOutcome
from .decisions import Act, Decision, Evidence, backoff_seconds, jenkins_evidence, worth_a_probe


def _wall_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Breaker:
    """Whether one Jenkins (``url``) is down. Thread-safe; times are read from ``clock`` (monotonic seconds)."""

    def __init__(
        self,
        url: str,
        *,
        failures: int = 3,
        retry_base_seconds: float = 1.0,
        retry_max_seconds: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        wall_clock: Callable[[], str] = _wall_now,
    ):
        if failures < 1 or not 0 < retry_base_seconds <= retry_max_seconds:
            raise ValueError("a breaker needs failures >= 1 and 0 < retry_base_seconds <= retry_max_seconds")
        self.url = url
        self.failures = failures
        self.retry_base_seconds = retry_base_seconds
        self.retry_max_seconds = retry_max_seconds
        self._clock = clock
        self._rng = rng or random.Random()
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._open = False
        self._known = False  # anything recorded yet (else /healthz says "unknown")
        self._streak: list[str] = []  # jobs of the suspect failures since the last success, in order
        self._failed_in_a_row = 0  # every failure since the last success, suspect or not
        self._opens = 0  # times opened since the last success: the backoff's exponent
        self._opened_at: float | None = None
        self._retry_at: float | None = None
        self._why: str | None = None
        self._since: str | None = None

    # ------------------------------------------------------------------ reading
    def now(self) -> float:
        """The breaker's clock: stamp a request with it before sending (``sent_at``)."""
        return self._clock()

    @property
    def is_open(self) -> bool:
        """Jenkins is down: send nothing to it before ``retry_at`` (then one request decides)."""
        with self._lock:
            return self._open

    @property
    def retry_at(self) -> float | None:
        """When (on the breaker's clock) Jenkins may be tried again; None while closed."""
        with self._lock:
            return self._retry_at if self._open else None

    @property
    def why(self) -> str | None:
        """Why it opened (the evidence, one line); None while closed."""
        with self._lock:
            return self._why if self._open else None

    def retry_in(self) -> float:
        """Seconds until Jenkins may be tried again (0 while closed or once due)."""
        with self._lock:
            if not self._open or self._retry_at is None:
                return 0.0
            return max(0.0, self._retry_at - self._clock())

    def snapshot(self) -> dict[str, Any]:
        """The state as `/healthz` shows it (``jenkins``)."""
        with self._lock:
            state = "unknown" if not self._known else ("unavailable" if self._open else "ok")
            doc: dict[str, Any] = {"status": state, "reason": self._why if self._open else None, "since": self._since,
                                   "consecutive_failures": self._failed_in_a_row}
            if self._open and self._retry_at is not None:
                doc["retry_in_seconds"] = round(max(0.0, self._retry_at - self._clock()), 1)
            return doc

    # ------------------------------------------------------------------ recording
    def record_success(self, sent_at: float | None = None) -> bool:
        """Jenkins answered a request as Jenkins does. Closes the breaker — unless the request was sent before it
        opened (an answer already on its way says nothing about the outage that followed). True if it closed."""
        with self._lock:
            if self._open and sent_at is not None and self._opened_at is not None and sent_at < self._opened_at:
                return False
            was_open = self._open
            if was_open or not self._known:
                self._since = self._wall()
            self._known = True
            self._open = False
            self._streak.clear()
            self._failed_in_a_row = 0
            self._opens = 0
            self._opened_at = self._retry_at = self._why = None
            return was_open

    def record_probe_ok(self, sent_at: float | None = None) -> bool:
        """Jenkins itself answered a probe. While open, that is the success that closes it. While closed it
        clears nothing: it shows Jenkins answers, not that triggers work, so the run of failures stands."""
        with self._lock:
            if not self._open:
                return False
        return self.record_success(sent_at)

    def record_failure(self, job: str | None, kind: Evidence, reason: str, sent_at: float | None = None) -> bool:
        """A request failed (``job``: the Jenkins job it was about, None for Jenkins itself; ``kind``: SUSPECT or
        DOWN — a failed probe is DOWN). Returns whether the breaker is open now."""
        if kind is Evidence.WORKS:
            raise ValueError("a request that worked is a success, not a failure")
        with self._lock:
            if not self._known:
                self._since = self._wall()
            self._known = True
            self._failed_in_a_row += 1
            if self._open:
                # Only a request sent after it opened (the one allowed at retry_at) says the outage goes on.
                if sent_at is not None and self._opened_at is not None and sent_at >= self._opened_at:
                    self._trip(reason)
                return True
            if kind is Evidence.SUSPECT:
                self._streak.append(job or "")
                jobs = len(set(self._streak))
                if jobs < self.failures:
                    return False
                reason = (f"Jenkins unavailable: {len(self._streak)} requests failed in a row, about {jobs} "
                          f"different jobs; the last: {reason}")
            self._since = self._wall()
            self._trip(reason)
            return True

    def _trip(self, reason: str) -> None:
        """Open (or re-open) with the next backoff. Called with the lock held."""
        now = self._clock()
        self._open = True
        self._opens += 1
        self._opened_at = now
        self._retry_at = now + backoff_seconds(self._opens, self.retry_base_seconds, self.retry_max_seconds,
                                               self._rng)
        self._why = reason


def weigh(breaker: Breaker, job_name: str, outcome: TriggerOutcome, decision: Decision, *, sent_at: float | None,
          probe: Callable[[], str | None]) -> Decision:
    """What a row's trigger answer comes to once the breaker has weighed it as evidence about Jenkins as a whole.

    A sane answer is a success. A Jenkins-wide one (restarting, unreachable, credentials) opens the breaker. A
    suspect one (a 500, a proxy's 5xx, no answer) counts towards the run of failures; after Jenkins's own 5xx,
    unless the run already opened it, ``probe()`` asks Jenkins itself — returning None when it answered (or when
    another thread is asking already) and why not otherwise: Jenkins not answering either opens it. While the row's
    own decision stands (backoff, or the lease kept when the trigger may have been acted upon), a row whose trigger
    Jenkins did not act upon is released instead once the breaker is open: its attempt is not spent on an outage.
    """
    evidence = jenkins_evidence(outcome)
    if evidence is Evidence.WORKS:
        breaker.record_success(sent_at)
        return decision
    opened = breaker.record_failure(job_name, evidence, decision.reason, sent_at)
    if not opened and worth_a_probe(outcome):
        failed = probe()
        if failed is not None:
            opened = breaker.record_failure(None, Evidence.DOWN, f"Jenkins unavailable: {decision.reason}; then "
                                            f"Jenkins itself did not answer: {failed}")
    if opened and decision.act is Act.RETRY_LATER:
        return Decision(Act.STOP_PASS, breaker.why or decision.reason, error_class=decision.error_class)
    return decision


def breaker_for(settings: Settings, **kwargs: Any) -> Breaker:
    """The breaker of the Jenkins the settings name, with its thresholds (JENKINS_BREAKER_FAILURES,
    JENKINS_RETRY_BASE_SECONDS, JENKINS_RETRY_MAX_SECONDS)."""
    return Breaker(settings.require_jenkins().url, failures=settings.jenkins_breaker_failures,
                   retry_base_seconds=settings.jenkins_retry_base_seconds,
                   retry_max_seconds=settings.jenkins_retry_max_seconds, **kwargs)
