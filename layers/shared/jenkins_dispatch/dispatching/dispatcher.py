"""One dispatcher pass: the due duties (``duties/``: the schedules' ticks, the unknown-controller sweep, the pruner,
reconciling expired leases), then claim and trigger batch after batch.

The order of a pass, and why:
0. The duties that need no Jenkins first, whatever Jenkins's state: due ticks become ordinary rows (one statement
   per tick), which this very pass may then claim; rows naming no configured controller fail; the pruner deletes one
   batch when its turn is this dispatcher's. Every pass of every dispatcher runs them, so no separate timer is needed.
1. Reconcile (a duty that asks Jenkins) first, so rows a crashed worker left behind are settled, adopted or re-sent
   before new work.
2. Claim one batch (one statement), check each job name once per pass, trigger the batch on a bounded
   thread pool sharing one HTTP session, then record what Jenkins answered (one statement for all
   accepted rows). Claimed-but-unsent rows are never more than one batch.
3. Stop when nothing is eligible, a cap is reached, the `max_jobs` budget is spent, the Lambda's time
   is nearly up, a stop is requested, or Jenkins as a whole fails — releasing whatever was not sent.

Whether Jenkins as a whole failed is the breaker's call (``breaker.py``), fed by every answer: one 500 among
successes is that row's transient error and the pass goes on. While the breaker is open nothing is sent; once
its backoff is over, the next pass's own requests decide (a pass with nothing to ask asks Jenkins itself,
``whoAmI``, so that recovery shows without waiting for work).

A trigger whose outcome is unknown is never re-sent blindly: the row keeps its lease, and after it
expires the reconciler searches Jenkins for its DISPATCH_ID before sending again with the same id.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import DEFAULT_CONTROLLER, LEASE_SAFETY_SECONDS, Settings, default_of
from ..errors import (
    DatabaseUnavailable,
    DispatchError,
    JenkinsAuthRejected,
    JenkinsError,
    JenkinsRequestFailed,
)
from ..jenkins.client import JenkinsClient, jenkins_client
from ..jenkins.jobs import job_path_error
from ..observability import MetricUnit, logger, metrics, subsegment
from ..store.db import Session, open_database
from ..store.dispatcher import DispatcherStore
from ..store.queue import CapsInForce, ClaimedJob, ExpiredLease, Settlement
from ..store.rows import Gauges
from ..store.schedules import Schedules
from .breaker import Breaker, breaker_for, weigh
from .cancelling import settle_stopped, stop_dispatch
from .decisions import Act, Decision, Evidence, check_job, decide_trigger, retry_delay
from .duties import Duty, due
from .duties.pruner import Pruner
from .duties.reconcile import Reconcile
from .duties.schedule_ticks import ScheduleTicks
from .duties.unknown_controllers import UnknownControllers, fail_rows_of_unknown_controllers
from .heartbeat import Heartbeat
from .reconciler import Reconciled, Reconciler
from .ticking import enqueue_due_ticks


@dataclass
class PassSummary:
    """The counts of one pass and why it stopped, as logged and returned."""
    reconciled: Reconciled = field(default_factory=Reconciled)
    claimed: int = 0
    triggered: int = 0
    completed: int = 0
    retried_later: int = 0
    failed: int = 0
    released: int = 0
    outcome_unknown: int = 0
    batches: int = 0
    ticks_enqueued: int = 0  # schedule ticks this pass enqueued (ticking.py)
    ticks_skipped: int = 0  # ticks not enqueued: missed while nothing ran, or no-overlap skips
    pruned: int = 0  # final rows the pruner deleted (duties/pruner.py)
    aggregates_pruned: int = 0  # rows of the time page's aggregates it deleted
    prune_batches: int = 0
    stopped_because: str = ""
    jenkins_unavailable: bool = False  # the pass stopped because Jenkins as a whole failed
    duration_ms: int = 0
    db_statements: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The summary as a plain dict."""
        return asdict(self)


@dataclass
class _Batch:
    """One claimed batch on its way: rows decided without a request, and triggers handed to the threads."""

    decided: list = field(default_factory=list)  # (job, Decision | None)
    sending: list = field(default_factory=list)  # (job, Future[Decision | None])

    def wait_until_all_started(self, threads: int) -> None:
        """Until every trigger still pending is on a thread (none waits in the pool's queue)."""
        pending = {future for _, future in self.sending if not future.done()}
        while len(pending) > threads:
            _done, pending = wait(pending, return_when=FIRST_COMPLETED)


PASS_BUDGET_SPENT = "pass budget spent"  # `serve`: more may be due, the next pass follows at once


class _PassStopped(Exception):
    """Jenkins as a whole failed: end the pass (the reason goes into the summary). Never leaves this module."""


class Dispatcher:
    """One dispatcher pass over one database session and one Jenkins client."""

    def __init__(
        self,
        settings: Settings,
        db: Session,
        client: JenkinsClient,
        *,
        remaining_ms: Callable[[], int] | None = None,
        stop: threading.Event | None = None,
        rng: random.Random | None = None,
        claim_until: float | None = None,
        breaker: Breaker | None = None,
        fail_unknown_controllers: bool = False,
        duties: Sequence[Duty] | None = None,
    ):
        # One controller's pass: ``settings.jenkins`` is that controller (Settings.for_controller), and only its
        # rows are claimed, triggered and reconciled, with its client and its breaker.
        self.settings = settings
        self.controller = settings.jenkins.name if settings.jenkins else DEFAULT_CONTROLLER
        # What the pass does besides claiming (duties/): a lane keeps its own across passes (the pruner remembers
        # when it is due); a single pass gets the ones every pass runs, the sweep of rows naming no configured
        # controller when it is the pass's first controller.
        self.duties: Sequence[Duty] = duties if duties is not None else pass_duties(sweeps=fail_unknown_controllers)
        # Whether this Jenkins is down, across passes (`serve` and the continuous Lambda keep one per Jenkins;
        # a single pass starts from a closed one).
        self.breaker = breaker or breaker_for(settings)
        self._probe_lock = threading.Lock()
        self._started_at: float | None = None  # on the breaker's clock
        self._probed = False
        # `serve` has no hard deadline: its pass stops claiming at this monotonic time (full batches until
        # then), so the reconciler gets its turn; the next pass starts straight away.
        self.claim_until = claim_until
        self.db = db
        self.queue = DispatcherStore(db, lease_seconds=settings.lease_seconds)
        self.client = client
        self.remaining_ms = remaining_ms
        # Two ways a pass ends early: the process is shutting down (SIGTERM, shared with the caller), or
        # Jenkins as a whole failed (this pass only: the caller decides whether to try again).
        self.shutdown = stop or threading.Event()
        self._halted = threading.Event()
        self._halt_lock = threading.Lock()
        self._halt_reason: str | None = None
        self.gauges: Gauges | None = None  # read after the pass (metrics, and when to look again)
        self.rng = rng or random.Random()
        self.summary = PassSummary()
        self._job_checks: dict[str, Decision | None] = {}  # this pass's verdict per job name (None: sendable)
        self.timeout = settings.jenkins.timeout_seconds if settings.jenkins else default_of("JENKINS_TIMEOUT_SECONDS")
        self.send_reserve_seconds = settings.time_margin_seconds + self.timeout

    # ------------------------------------------------------------------ time and stopping
    def _seconds_left(self) -> float:
        return math.inf if self.remaining_ms is None else self.remaining_ms() / 1000.0

    @property
    def talked_to_jenkins(self) -> bool:
        """Whether this pass asked Jenkins anything (so its success says Jenkins works)."""
        return self.summary.claimed > 0 or self.summary.reconciled.checked > 0 or self._probed

    def _stopping(self) -> bool:
        return self.shutdown.is_set() or self._halted.is_set()

    def _out_of_time(self, reserve: float) -> bool:
        return self._seconds_left() < reserve

    def _log(self, message: str, job: ClaimedJob | ExpiredLease, **extra: Any) -> None:
        logger.info(message, extra={"job_id": job.id, "dispatch_id": job.dispatch_id, "job_name": job.job_name,
                                    "attempt": job.attempts, "controller": self.controller, **extra})

    # ------------------------------------------------------------------ the pass
    def run(self, max_jobs: int | None = None) -> dict[str, Any]:
        """Reconcile, then claim and trigger up to ``max_jobs``; return the pass summary."""
        started = time.monotonic()
        statements_before = self.db.statements
        self._started_at = self.breaker.now()
        try:
            self._run_duties(needs_jenkins=False)
            if self.breaker.retry_in() > 0:  # open, and not yet time to try again
                raise _PassStopped(self.breaker.why or "Jenkins unavailable")
            self._run_duties(needs_jenkins=True)
            if not self.summary.stopped_because:
                self.dispatch(max_jobs)
            self._ask_jenkins_if_still_down()
        except _PassStopped as stopped:
            self.summary.stopped_because = str(stopped)
            self.summary.jenkins_unavailable = True
            # Several controllers: also per controller (the alarm keeps watching the sum, under service alone).
            several = len(self.settings.controllers_by_name()) > 1
            metrics.add_metric(name="JenkinsUnavailable", unit=MetricUnit.Count, value=1,
                               dimensions={"controller": self.controller} if several else None,
                               controller=self.controller)
            logger.error("pass stopped: Jenkins as a whole failed",
                         extra={"controller": self.controller, "reason": str(stopped)})
        finally:
            # However the pass ends (an error's caller says why), what it did stays done: a job it triggered and
            # recorded is never counted by a later pass.
            self._emit_counts()
        self.summary.duration_ms = int((time.monotonic() - started) * 1000)
        self._emit_pass_metrics()
        self.summary.db_statements = self.db.statements - statements_before  # the gauges read included
        logger.info("pass finished", extra={"summary": self.summary.as_dict()})
        return self.summary.as_dict()

    def _run_duties(self, needs_jenkins: bool) -> None:
        """The due duties of one kind, in order; their counts go into the summary as each ends."""
        for duty in due(self.duties, needs_jenkins=needs_jenkins):
            for key, value in duty.run(self).items():
                setattr(self.summary, key, getattr(self.summary, key) + value)

    def _emit_counts(self) -> None:
        """What the pass did to jobs, however it ended."""
        s = self.summary
        for name, value in (("Claimed", s.claimed), ("Triggered", s.triggered), ("JobsFailed", s.failed),
                            ("JobsCompleted", s.completed),
                            ("AdoptedAfterCrash", s.reconciled.adopted), ("LeasesExpired", s.reconciled.checked),
                            ("RetriedLater", s.retried_later), ("TriggerOutcomeUnknown", s.outcome_unknown)):
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value, controller=self.controller)

    def _emit_pass_metrics(self) -> None:
        """A pass that ran to its end: its duration, that it completed, and the queue's gauges after it."""
        s = self.summary
        metrics.add_metric(name="PassDurationMs", unit=MetricUnit.Milliseconds, value=s.duration_ms)
        # One per pass that ran to its end, Jenkins up or not: its absence is what "no dispatcher" looks like.
        metrics.add_metric(name="PassesCompleted", unit=MetricUnit.Count, value=1, controller=self.controller)
        try:
            # Read once a pass: a capped pass that claimed nothing has just read them (_why_nothing_claimed).
            gauges = self.gauges = self.gauges or self.queue.gauges()
        except DispatchError as exc:  # metrics must never turn a finished pass into a failure
            logger.warning("could not read the queue's gauges for metrics", extra={"reason": str(exc)})
            return
        metrics.add_metric(name="OldestPendingAgeSeconds", unit=MetricUnit.Seconds,
                           value=gauges["oldest_pending_seconds"] or 0)
        metrics.add_metric(name="InFlight", unit=MetricUnit.Count, value=gauges["processing"])
        # Per configured controller (a bounded label: rows naming an unknown controller are left out), 0 included.
        per_controller = gauges.get("processing_per_controller") or {}
        configured = self.settings.controllers_by_name() or [self.controller]
        metrics.set_per_controller("InFlight", {name: per_controller.get(name, 0) for name in configured})
        # Rows in flight on a controller removed from the configuration, named (they are few: one name per
        # controller removed while its rows ran), so that an alert can say whose they are.
        stranded = {name: n for name, n in per_controller.items() if name not in configured and n}
        metrics.add_metric(name="StrandedInFlight", unit=MetricUnit.Count, value=sum(stranded.values()))
        metrics.set_per_controller("StrandedInFlight", stranded)
        metrics.set_per_key(gauges.get("capped_keys") or {})
        metrics.add_metric(name="Pending", unit=MetricUnit.Count, value=gauges["pending"])
        metrics.add_metric(name="OldestTransactionAgeSeconds", unit=MetricUnit.Seconds,
                           value=gauges["oldest_transaction_seconds"] or 0)
        # Pauses are an operator's choice: visible on the dashboard, left out of OldestPendingAgeSeconds.
        metrics.add_metric(name="PausedJobs", unit=MetricUnit.Count, value=gauges["paused_jobs"])
        metrics.add_metric(name="EverythingPaused", unit=MetricUnit.Count, value=int(gauges["everything_paused"]))

    # ------------------------------------------------------------------ schedules
    def enqueue_due_ticks(self) -> None:
        """The schedules' due ticks become rows (each tick by one dispatcher only), Jenkins up or not."""
        with subsegment("db.enqueue_due_ticks"):
            ticked = enqueue_due_ticks(Schedules(self.db))
        self.summary.ticks_enqueued += ticked.enqueued
        self.summary.ticks_skipped += ticked.skipped

    # ------------------------------------------------------------------ Jenkins as a whole
    def _ask_jenkins_if_still_down(self) -> None:
        """The pass ran to its end with the breaker still open: nothing it asked decided (nothing was due, or only
        job checks were read). Ask Jenkins itself (``whoAmI``), or /healthz would say "unavailable" until the next
        trigger. Its answer closes the breaker; its failure keeps it open, for longer."""
        if not self.breaker.is_open or self._stopping() or self._out_of_time(self.timeout):
            return
        self._probed = True  # the heartbeat records what it learnt, as for any pass that asked Jenkins
        sent_at = self.breaker.now()
        try:
            self.client.check()
        except JenkinsError as exc:
            self.breaker.record_failure(None, Evidence.DOWN, self._jenkins_wide_reason(exc), sent_at)
            raise _PassStopped(self.breaker.why or self._jenkins_wide_reason(exc)) from None
        self.breaker.record_probe_ok(sent_at)

    def _jenkins_down(self, exc: JenkinsError) -> str:
        """A read Jenkins failed as a whole (job check, reconciler): the breaker opens — for longer if it was open
        when the pass began; returns why."""
        reason = self._jenkins_wide_reason(exc)
        self.breaker.record_failure(None, Evidence.DOWN, reason, self._started_at)
        return self.breaker.why or reason

    def _probe(self) -> str | None:
        """After a suspect answer: does Jenkins itself answer? None if it does (or another thread is asking)."""
        if not self._probe_lock.acquire(blocking=False):
            return None
        try:
            self.client.check()
        except JenkinsError as exc:
            return str(exc)
        finally:
            self._probe_lock.release()
        return None

    # ------------------------------------------------------------------ reconcile
    def reconcile(self) -> None:
        """Expired leases first (reconciler.py): rows a crashed worker left, lost answers, lost callbacks."""
        reconciler = Reconciler(self.settings, self.queue, self.client, self.summary, self._resend, self._log,
                                self.breaker)
        started = self.breaker.now()
        try:
            finished = reconciler.run(lambda: not self._stopping() and not self._out_of_time(self.send_reserve_seconds))
        except JenkinsError as exc:
            raise _PassStopped(self._jenkins_down(exc)) from None
        if self._halt_reason is not None:  # a re-send met a Jenkins-wide failure
            raise _PassStopped(self._halt_reason)
        if self.summary.reconciled.checked:
            self.breaker.record_success(started)  # Jenkins answered every read the reconciler made
        if not finished:
            self.summary.stopped_because = "stop requested" if self._stopping() else "time nearly up"

    def _resend(self, job: ClaimedJob, quiet_seconds: float) -> None:
        """The reconciler's re-send: the same trigger and bookkeeping as a claimed row, held in Jenkins's
        queue for ``quiet_seconds``."""
        decision = self._send(job, check_stop=False, delay_seconds=quiet_seconds)
        if decision is not None and decision.act not in (Act.STOP_PASS, Act.RETRY_LATER):
            self._apply([(job, decision)], actor="reconciler")
            return
        # Never released nor backed off: the next claim would draw a new dispatch id, and a late original
        # sent under this one could then build beside it.
        sent = decision is not None and decision.act is Act.RETRY_LATER
        reason = decision.reason if decision is not None else "re-send not sent: no time left in this pass"
        if self.queue.resend_not_taken(job.id, job.dispatch_id, reason, sent=sent):
            self._log("re-send not taken: the reconciler tries again after the lease", job, reason=reason)

    def _jenkins_wide_reason(self, exc: JenkinsError) -> str:
        if isinstance(exc, JenkinsAuthRejected):
            text = str(exc)
            return text if "JENKINS_API_TOKEN" in text else f"{text} (check JENKINS_USER and JENKINS_API_TOKEN)"
        return f"Jenkins unavailable: {exc}"

    # ------------------------------------------------------------------ claim and trigger
    def dispatch(self, max_jobs: int | None) -> None:
        """Claim and trigger batch after batch. The next batch is claimed (and its jobs checked) while the
        last triggers of the previous one are still on the wire, so the trigger threads never wait on the
        database; at most one batch is claimed-but-unsent besides the triggers in flight."""
        plan = self.queue.claim_plan(self.settings.max_in_flight, self.controller)
        capped, fair = plan.caps, plan.fair
        if not capped and self.settings.jenkins and self.settings.jenkins.max_in_flight is not None:
            capped = CapsInForce.CAPPED  # this controller's own cap
        budget = math.inf if max_jobs is None else max_jobs
        in_flight: _Batch | None = None
        with ThreadPoolExecutor(max_workers=self.settings.max_parallel_triggers, thread_name_prefix="trigger") as pool:
            try:
                while True:
                    reason = self._why_stop_claiming(budget)
                    if reason:
                        self.summary.stopped_because = reason
                        break
                    size = int(min(self.settings.batch_size, budget, self._rows_that_fit()))
                    if size < 1:
                        self.summary.stopped_because = "time nearly up"
                        break
                    if in_flight is not None:
                        in_flight.wait_until_all_started(self.settings.max_parallel_triggers)
                    started = time.monotonic()
                    with subsegment("db.claim_batch"):
                        jobs = self.queue.claim_batch(
                            size, capped=capped, max_in_flight=self.settings.max_in_flight,
                            controller=self.controller,
                            controller_max_in_flight=self.settings.jenkins.max_in_flight if self.settings.jenkins
                            else None, counted_controllers=list(self.settings.controllers_by_name()) or None,
                            fair=fair)
                    if not jobs:
                        self.summary.stopped_because = self._why_nothing_claimed(bool(capped))
                        break
                    self.summary.claimed += len(jobs)
                    self.summary.batches += 1
                    budget -= len(jobs)
                    batch = self._start_batch(pool, jobs, started)
                    previous, in_flight = in_flight, batch
                    if previous is not None:
                        self._finish_batch(previous)
            finally:
                if in_flight is not None:
                    self._finish_batch(in_flight, raise_if_halted=False)
        if self._halt_reason is not None:
            raise _PassStopped(self._halt_reason)

    def _why_stop_claiming(self, budget: float) -> str:
        if self._stopping():
            return self._halt_reason or "stop requested"
        if budget <= 0:
            return "max_jobs reached"
        if self.claim_until is not None and time.monotonic() >= self.claim_until:
            return PASS_BUDGET_SPENT
        return ""

    def _rows_that_fit(self) -> float:
        """How many rows a batch may claim so that every trigger ends in time: before the Lambda's margin,
        and before the rows' lease (a row sent after its lease could be sent again by a reconciler)."""
        waves = (self.settings.lease_seconds - LEASE_SAFETY_SECONDS) / self.timeout
        left = self._seconds_left()
        if left != math.inf:
            waves = min(waves, (left - self.settings.time_margin_seconds) / self.timeout)
        return max(0, math.floor(waves)) * self.settings.max_parallel_triggers

    def _why_nothing_claimed(self, capped: bool) -> str:
        # Read here rather than after the pass: the same read serves metrics and the next wake-up.
        self.gauges = self.queue.gauges()
        if self.gauges["everything_paused"]:
            return "everything paused"
        # Due rows left behind (paused jobs' rows are not counted): a cap holds them.
        if capped and self.gauges["oldest_pending_seconds"] is not None:
            return "cap reached"
        return "queue empty"

    def _job_check(self, job_name: str) -> Decision | None:
        """Whether the job can be sent (None) or why not, checked once per pass per job name. A check that
        failed the way one request can is about this job: its rows back off on Jenkins's scale, the others are
        sent — unless it completes a run of failures across jobs (the breaker opens; JenkinsError propagates)."""
        if job_name in self._job_checks:
            return self._job_checks[job_name]
        sent_at = self.breaker.now()
        try:
            verdict = check_job(job_name, self.client.job_info(job_name))
        except JenkinsRequestFailed as exc:
            if self.breaker.record_failure(job_name, Evidence.SUSPECT, str(exc), sent_at):
                raise
            verdict = Decision(Act.RETRY_LATER, f"could not check the job in Jenkins: {exc}",
                               error_class="JobCheckFailed", jenkins_hiccup=True)
        self._job_checks[job_name] = verdict
        return verdict

    def _start_batch(self, pool: ThreadPoolExecutor, jobs: list[ClaimedJob], started: float) -> _Batch:
        """Check each job (once per pass per job name), then hand the sendable ones to the trigger threads."""
        batch = _Batch()
        to_send: list[ClaimedJob] = []
        try:
            with subsegment("jenkins.job_info"):
                for job in jobs:
                    blocked: Decision | None
                    if error := job_path_error(job.job_name):
                        blocked = Decision(Act.FAIL, error, error_class="InvalidJobPath")
                    else:
                        blocked = self._job_check(job.job_name)
                    if blocked is not None:
                        batch.decided.append((job, blocked))
                    else:
                        to_send.append(job)
        except JenkinsError as exc:
            self._stop_with(self._jenkins_down(exc))
            batch.decided = [(job, None) for job in jobs]
            to_send = []
        batch.sending = [(job, pool.submit(self._send, job, batch_started=started)) for job in to_send]
        return batch

    def _finish_batch(self, batch: _Batch, raise_if_halted: bool = True) -> None:
        """Wait for the batch's triggers, then record what Jenkins answered."""
        with subsegment("jenkins.trigger_batch"):
            decided = batch.decided + [(job, future.result()) for job, future in batch.sending]
        self._apply(decided, actor="dispatcher")
        if raise_if_halted and self._halt_reason is not None:
            raise _PassStopped(self._halt_reason)

    def _stop_with(self, reason: str) -> None:
        """Jenkins as a whole failed (any thread): no more triggers this pass; the first reason is kept."""
        with self._halt_lock:
            if self._halt_reason is None:
                self._halt_reason = reason
        self._halted.set()

    def _send(self, job: ClaimedJob, check_stop: bool = True, delay_seconds: float | None = None,
              batch_started: float | None = None) -> Decision | None:
        """Runs on a pool thread: send one trigger unless the pass is stopping (then None: not sent)."""
        if check_stop and (
            self._stopping()
            or self._out_of_time(self.send_reserve_seconds)
            # The request must end while the claim's lease lasts (job checks or a slow Jenkins can eat it).
            or (batch_started is not None and time.monotonic() - batch_started + self.timeout
                > self.settings.lease_seconds - LEASE_SAFETY_SECONDS)
        ):
            return None
        sent_at = self.breaker.now()
        outcome = self.client.trigger(job.job_name, job.parameters, job.dispatch_id, delay_seconds=delay_seconds)
        decision = weigh(self.breaker, job.job_name, outcome, decide_trigger(job.job_name, outcome),
                         sent_at=sent_at, probe=self._probe)
        if self.breaker.is_open:
            self._stop_with(self.breaker.why or decision.reason)
        return decision

    def _apply(self, decided: list[tuple[ClaimedJob, Decision | None]], actor: str) -> None:
        """Record a batch's outcomes: accepted rows in one statement, failures in one, the rest per row."""
        accepted: list[tuple[ClaimedJob, int]] = []
        failures: list[Settlement] = []
        for job, decision in decided:
            if decision is None or decision.act is Act.STOP_PASS:
                reason = decision.reason if decision else "not sent: the pass stopped before this trigger"
                if self.queue.release(job.id, job.dispatch_id, reason, actor=actor):
                    self.summary.released += 1
                    self._log("released", job, reason=reason)
                continue
            if decision.act is Act.RECORD:
                assert decision.queue_id is not None  # decide_trigger records only what Jenkins queued
                accepted.append((job, decision.queue_id))
                continue
            metrics.add_metric(name="TriggerErrors", unit=MetricUnit.Count, value=1, controller=self.controller)
            metrics.add_metric(name=f"TriggerErrors{decision.error_class}", unit=MetricUnit.Count, value=1)
            if decision.act is Act.FAIL:
                failures.append(Settlement(job.id, job.dispatch_id, "failed", None, decision.reason))
            elif decision.act is Act.RETRY_LATER:
                delay = retry_delay(decision, job.attempts,
                                    (self.settings.retry_base_seconds, self.settings.retry_max_seconds),
                                    (self.settings.jenkins_retry_base_seconds, self.settings.jenkins_retry_max_seconds),
                                    self.rng)
                status = self.queue.retry_later(job.id, job.dispatch_id, delay, decision.reason, actor=actor)
                if status == "failed":
                    self.summary.failed += 1
                elif status == "pending":
                    self.summary.retried_later += 1
                self._log("retry later" if status == "pending" else "failed: attempts exhausted", job,
                          reason=decision.reason, error_class=decision.error_class, delay_seconds=round(delay, 1))
            else:  # KEEP_LEASE
                self.summary.outcome_unknown += 1
                logger.warning("trigger outcome unknown: keeping the lease, the reconciler will search Jenkins",
                               extra={"job_id": job.id, "dispatch_id": job.dispatch_id, "job_name": job.job_name,
                                      "attempt": job.attempts, "controller": self.controller,
                                      "reason": decision.reason})
        if accepted:
            with subsegment("db.mark_triggered"):
                recorded = self.queue.mark_triggered_many(accepted, actor=actor)
            for job, queue_id in accepted:
                if job.id in recorded:
                    self.summary.triggered += 1
                    self._log("triggered", job, jenkins_queue_id=queue_id, outcome="accepted")
                    if recorded[job.id]:
                        self._carry_out_cancel(job, queue_id, actor)
        if failures:
            settled = self.queue.settle_many(failures, actor=actor)
            self.summary.failed += len(settled)
            for failure in failures:
                if failure.job_id in settled:
                    logger.warning("failed", extra={"job_id": failure.job_id, "dispatch_id": failure.dispatch_id,
                                                    "controller": self.controller, "reason": failure.error})

    def _carry_out_cancel(self, job: ClaimedJob, queue_id: int, actor: str) -> None:
        """An operator cancelled this row while its trigger was in flight: now that Jenkins has it, cancel
        it there, then settle (if Jenkins cannot be asked now, the reconciler does it after the lease)."""
        try:
            stopped = stop_dispatch(self.client, job.job_name, job.dispatch_id, queue_id, None)
        except DispatchError as exc:
            logger.warning("could not carry out a requested cancel yet; the reconciler will",
                           extra={"job_id": job.id, "dispatch_id": job.dispatch_id, "controller": self.controller,
                                  "reason": str(exc)})
            return
        status = settle_stopped(self.queue, job.id, job.dispatch_id, stopped, "cancelled by operator while its "
                                "trigger was in flight", actor=actor, unstable_is_success=self.settings.unstable_is_success)
        self._log("requested cancel carried out", job, status=status, jenkins=stopped.note)


# --------------------------------------------------------------------------- entry points


def run_pass(
    settings: Settings,
    *,
    max_jobs: int | None = None,
    remaining_ms: Callable[[], int] | None = None,
    db: Session | None = None,
    stop: threading.Event | None = None,
    heartbeat: Heartbeat | None = None,
    pruner: Pruner | None = None,
) -> dict[str, Any]:
    """One pass with a fresh HTTP session (and a fresh database session unless one is given); with a
    ``heartbeat``, the dispatcher's row records how it ended; with a ``pruner`` (the Lambda function's, kept across
    invocations), the first controller's pass prunes when it is due."""
    own_db = db is None
    db = db or open_database(settings.database, application_name="jenkins-dispatch-dispatcher")
    names = list(settings.controllers_by_name()) or [DEFAULT_CONTROLLER]
    # Each controller on its own: one down holds back only its rows, and one that answers slowly (a trigger wave
    # of timeouts) delays no other: with several, each has its own thread and database session (a session is not
    # thread-safe); the first keeps ``db``.
    sessions = [db] + [open_database(settings.database, application_name=f"jenkins-dispatch-{name}"[:63])
                       for name in names[1:]]
    per_controller: dict[str, dict[str, Any]] = {}
    talked: list[bool] = []
    several = bool(settings.controllers_by_name())
    # A closed breaker per controller for this pass, made here so that the heartbeat records how each one ends.
    breakers = {name: breaker_for(settings.for_controller(name) if several else settings) for name in names}
    if heartbeat is not None:
        heartbeat.serves(breakers, settings)

    def one_controller(n: int) -> None:
        name, session = names[n], sessions[n]
        one = settings.for_controller(name) if several else settings
        with lane_client(one) as client:
            dispatcher = Dispatcher(one, session, client, remaining_ms=remaining_ms, stop=stop, breaker=breakers[name],
                                    duties=pass_duties(sweeps=len(names) == 1, pruner=pruner if n == 0 else None))
            try:
                per_controller[name] = dispatcher.run(max_jobs)
            except DatabaseUnavailable:
                raise  # nowhere to record it
            except DispatchError as exc:
                if heartbeat is not None and len(names) == 1:
                    heartbeat.record(dispatcher.queue, "failed", str(exc))
                raise
            talked.append(dispatcher.talked_to_jenkins)

    try:
        lane_errors: dict[str, str] = {}
        if len(names) == 1:
            one_controller(0)
        else:
            # Before the controllers' threads start: no claim runs beside it yet, so it skips no row they lock.
            unknown = fail_rows_of_unknown_controllers(settings, DispatcherStore(db))
            with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="controller") as pool:
                futures = [pool.submit(one_controller, n) for n in range(len(names))]
                lane_errors = _lane_errors(names, futures)
        summary = combine_summaries({name: per_controller.get(name) or {"error": lane_errors[name]}
                                     for name in names})
        if len(names) > 1:
            summary["failed"] += unknown
        if lane_errors:
            summary["controller_errors"] = lane_errors
        if heartbeat is not None:
            heartbeat.after_pass(DispatcherStore(db), summary, any(talked))
        return summary
    finally:
        for session in sessions[1:]:
            session.close()
        if own_db:
            db.close()


def _lane_errors(names: list[str], futures: list[Future[None]]) -> dict[str, str]:
    """Each controller's lane that ended on an error of its own (the database busy for one of its statements, say),
    by name: the pass answers with the others' work and these reasons. Raises when the database is unreachable
    (every lane's problem) or when every lane failed (nothing to answer with): the first controller's error first."""
    errors: dict[str, DispatchError] = {}
    for name, future in zip(names, futures, strict=True):
        try:
            future.result()
        except DatabaseUnavailable:
            raise
        except DispatchError as exc:
            errors[name] = exc
            logger.error("a controller's lane failed; the other controllers' work of this pass stands",
                         extra={"controller": name, "reason": str(exc)})
    if errors and len(errors) == len(names):
        raise errors[names[0]]
    return {name: str(exc).splitlines()[0] for name, exc in errors.items()}


def lane_client(lane: Settings) -> JenkinsClient:
    """The Jenkins client of one controller's lane (``lane``: ``Settings.for_controller``, or the settings of the one
    controller there is), pooled for its trigger threads; ConfigError when no Jenkins is configured."""
    return jenkins_client(lane.require_jenkins(), lane.max_parallel_triggers)


def pass_duties(*, sweeps: bool, pruner: Pruner | None = None) -> list[Duty]:
    """A lane's duties in the order a pass runs them: the schedules' ticks; on the lane that ``sweeps``, the rows of
    unknown controllers; the ``pruner`` if given (one lane of a dispatcher has it); then reconciling."""
    own: list[Duty] = [UnknownControllers()] if sweeps else []
    if pruner is not None:
        own.append(pruner)
    return [ScheduleTicks(), *own, Reconcile()]


def combine_summaries(per_controller: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One pass's summary over its controllers: with one, its own summary as it is; with several, the counts
    added up (a Jenkins-wide failure of any says so, with its reason) and each controller's under ``controllers``."""
    if len(per_controller) == 1:
        return next(iter(per_controller.values()))
    total: dict[str, Any] = {}
    for summary in per_controller.values():
        for key, value in summary.items():
            if isinstance(value, dict):
                inner = total.setdefault(key, {})
                for k, v in value.items():
                    inner[k] = inner.get(k, 0) + v
            elif isinstance(value, bool):
                total[key] = total.get(key, False) or value
            elif isinstance(value, int | float):
                total[key] = total.get(key, 0) + value
            elif value and not total.get(key):
                total[key] = value
    down = [name for name, s in per_controller.items() if s.get("jenkins_unavailable")]
    if down:
        total["stopped_because"] = "; ".join(f"{name}: {per_controller[name]['stopped_because']}" for name in down)
    total["controllers"] = per_controller
    return total
