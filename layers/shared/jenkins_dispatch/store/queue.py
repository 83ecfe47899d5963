"""The queue: every transition of a job row, each a Python method named after what it does.

Runs the statements of its database's dialect (``dialects/<session.dialect>/queries.sql``, loaded by name
through ``statements.py``) and never writes SQL itself; callers never see SQL nor learn which database
they speak to. The schema is ``migrations.py``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from .. import inputs
from ..config import DEFAULT_CONTROLLER, default_of
from ..errors import Conflict, DatabaseBusy, InvalidInput, NotFound
from ..jenkins.jobs import dumps_parameters, job_name_error, loads_parameters
from ..moments import from_iso
from . import statements
from .db import DatabaseError, Row, Session
from .dispatch_ids import LEGACY_PREFIX
from .rows import (
    CutoverWindow,
    Dispatcher,
    Fingerprint,
    FoundJob,
    Gauges,
    HourCounts,
    JenkinsOutage,
    Job,
    JobEvent,
    JobStats,
    Limit,
    LimitChange,
    MatchedJob,
    OldestPending,
    OldestTransaction,
    ServerIdentity,
    Stats,
    WaitingJobName,
    WatchedRow,
)

FINAL_STATUSES = ("completed", "failed", "cancelled")
STATUSES = ("pending", "processing", *FINAL_STATUSES)
# Rows the migration found processing under the seed's dispatcher (the format's home: dispatch_ids.py).
LEGACY_DISPATCH_PREFIX = LEGACY_PREFIX
MAX_PARAMETER_FILTERS = 3  # parameter values a job list filters on at once (slots of list_jobs)
PARAMETER_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")  # parameter names a filter may name (quoted into a JSON path)
CLAIM_ATTEMPTS = 3  # a claim picked as a deadlock victim is tried again at once, up to this many times in all
VICTIM_ATTEMPTS = 3  # any block outside a caller's transaction, the same (``Queue._run``)
EVERYTHING = "*"  # jenkins_job_pauses.job_name of a pause of every job (Jenkins forbids '*' in item names)


# --------------------------------------------------------------------------- what callers get back


@dataclass(frozen=True)
class ClaimedJob:
    """A row a claim took: what the trigger needs, and the dispatch that fences it."""
    id: int
    job_name: str
    parameters: dict  # numbers as JsonNumber (their JSON text), see jenkins.jobs.form_value
    attempts: int
    max_attempts: int
    dispatch_id: str


@dataclass(frozen=True)
class ExpiredLease:
    """A processing row whose lease expired, with what Jenkins was known to have of it."""
    id: int
    job_name: str
    parameters: dict  # numbers as JsonNumber (their JSON text), as in ClaimedJob
    attempts: int
    max_attempts: int
    dispatch_id: str
    jenkins_queue_id: int | None
    build_number: int | None
    build_url: str | None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None  # the lease this take handed out: the reconciler's token
    resends: int = 0  # times the reconciler sent this dispatch again (Jenkins showed no trace of it)
    cancel_requested: bool = False  # an operator cancelled it while its trigger was in flight


@dataclass(frozen=True)
class Settlement:
    """One row's final state, for ``settle_many``."""
    job_id: int
    dispatch_id: str
    status: str  # completed / failed / cancelled
    result: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Settled:
    """A row ``settle`` finished, with its timings from the row's history (None where the history does not tell):
    the queue wait (last insert or operator's retry → first trigger Jenkins accepted after it) and the build's
    duration (the settling dispatch's ``started`` → the settle)."""
    job_id: int
    queue_wait_seconds: float | None = None
    build_seconds: float | None = None


def _seconds(value: Any) -> float | None:
    """A duration the database computed (a Decimal on PostgreSQL), or None when it is unknown or negative (clocks)."""
    return None if value is None or value < 0 else float(value)


@dataclass(frozen=True)
class EnqueueResult:
    """The id of an enqueued row, and whether it was new."""
    id: int
    created: bool  # False: an unfinished row with the same dedupe_key already existed


def like_contains(text: str) -> str:
    """A LIKE pattern matching any text that contains ``text`` as it is: its ``%``, ``_`` and ``\\`` are
    escaped (the statements say ``ESCAPE '\\'``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class Pause:
    """A pause in force: ``job_name`` None means every job; ``controller`` None means on every controller (what
    every pause meant before pauses were per controller), else on that controller only."""

    job_name: str | None
    paused_at: datetime
    paused_by: str | None = None
    reason: str | None = None
    controller: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The pause as a plain dict, for ``--json``."""
        return {"job_name": self.job_name, "everything": self.job_name is None, "controller": self.controller,
                "paused_at": self.paused_at, "paused_by": self.paused_by, "reason": self.reason}


@dataclass(frozen=True)
class PauseResult(Pause):
    """A pause as it is now in force, and the pending rows it holds back."""
    created: bool = True  # False: it was already paused (the pause in force is kept as it was)
    pending: int = 0  # pending rows of the job (of every job for a pause of everything) now


@dataclass(frozen=True)
class ResumeResult:
    """What a resume lifted, and the pauses still in force."""
    job_name: str | None  # None: the pause of everything
    resumed: bool  # False: it was not paused
    pending: int  # pending rows of the job (every job's) now
    still_paused: list[Pause]  # the pauses left in force
    controller: str | None = None  # None: the pause of every controller


@dataclass(frozen=True)
class RateWindow:
    """A job's rate (starts per minute) and its last minute, as the capped claim counts it."""

    per_minute: int
    started: int  # starts in the last 60 s
    next_start_seconds: float | None = None  # when the rate next has room (None: it has room now)

    @property
    def full(self) -> bool:
        """Whether the rate holds the job's rows back now."""
        return self.started >= self.per_minute


@dataclass(frozen=True)
class WaitingContext:
    """What decides why pending rows wait, read once for a page of rows (``Queue.waiting_context``). Caps, rates
    and rows in flight are a job's on one controller, keyed (controller, job_name), as the capped claim keeps
    them; ``controllers_in_flight`` counts each controller's rows in flight (its own max_in_flight holds them)."""

    caps: dict[tuple[str, str], int]  # (controller, job_name) → its job's cap there (only where it has one)
    in_flight: dict[tuple[str, str], int]  # (controller, job_name) → its job's processing rows there (any spelling)
    total_in_flight: int
    pauses: list[Pause]
    jenkins_unavailable_since: datetime | None = None  # as the live dispatchers last found Jenkins
    jenkins_reason: str | None = None
    paused_as: dict[str, str] = field(default_factory=dict)  # job_name → the name its job's pause was given
    rates: dict[tuple[str, str], RateWindow] = field(default_factory=dict)  # (controller, job_name) → its rate there
    controllers_in_flight: dict[str, int] = field(default_factory=dict)  # controller → its processing rows
    # ``pauses`` and ``paused_as`` are the pauses of every controller; these, the pauses of one controller:
    controller_pauses: list[Pause] = field(default_factory=list)
    paused_on: dict[str, dict[str, str]] = field(default_factory=dict)  # job_name → controller → its pause's name
    # The live dispatchers that recorded their controllers (id, live, controllers, last_pass_seconds), the most
    # recent pass first: what each one last found of each controller it serves.
    dispatchers: list[dict[str, Any]] = field(default_factory=list)
    # How many dispatchers are live at all (None: not read): with none, nothing takes a due row.
    live_dispatchers: int | None = None

    def counted_in_flight(self, configured: Sequence[str]) -> int:
        """The rows in flight MAX_IN_FLIGHT holds to: those of the ``configured`` controllers (a removed controller's
        stranded rows count against no cap); every row in flight when none is configured (nothing to tell apart)."""
        if not configured:
            return self.total_in_flight
        return sum(self.controllers_in_flight.get(name, 0) for name in configured)

    def pause_of(self, job_name: str, controller: str = DEFAULT_CONTROLLER) -> Pause | None:
        """The pause holding a row of ``job_name`` on ``controller`` back, the one that says most first:
        everything's, its whole controller's, its job's on every controller, its job's on that controller (each
        under whichever spelling of the name that pause was given)."""
        everywhere = {p.job_name: p for p in self.pauses}
        there = {p.job_name: p for p in self.controller_pauses if p.controller == controller}
        return (everywhere.get(None) or there.get(None) or everywhere.get(self.paused_as.get(job_name, job_name))
                or there.get(self.paused_on.get(job_name, {}).get(controller, job_name)))


SCHEDULED_AT_LATEST = datetime(9999, 12, 31, tzinfo=UTC)  # the table's bound: later times no reader can hold


def _scheduled_at(value: str | datetime | None) -> str | None:
    """A scheduled_at given to ``enqueue``, as the ISO text both dialects read: ISO 8601 (no zone means UTC) up to
    9999-12-31 00:00 UTC (the table refuses later times, which no reader can show)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = from_iso(value)
        except ValueError:
            raise InvalidInput(f"scheduled_at must be a real time: {value!r} is not one (ISO 8601, e.g. "
                               "2026-11-30T12:00:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def _timestamp(value: str | datetime | None) -> datetime | None:
    """A timestamp read back from JSON (ISO text) or as itself."""
    return from_iso(value) if isinstance(value, str) else value


def _moment(value: str | datetime | None) -> datetime | None:
    """A time filter as a datetime, which both dialects bind as a point in time (ISO text without a zone
    means UTC, as on the command line); MySQL cannot read an ISO text's offset."""
    if isinstance(value, str):
        try:
            value = from_iso(value)
        except ValueError:
            raise InvalidInput(f"not a time: {value!r} (use ISO 8601, e.g. 2026-11-30T12:00:00Z)") from None
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def _pause(row: Row) -> Pause:
    name = row["job_name"]
    paused_at = row["paused_at"]  # never NULL (the table's); ISO text when read from a JSON document
    return Pause(job_name=None if name == EVERYTHING else name,
                 paused_at=from_iso(paused_at) if isinstance(paused_at, str) else paused_at,
                 paused_by=row["paused_by"], reason=row["reason"], controller=row.get("controller"))


def _pause_key(job_name: str | None) -> str:
    """The stored name of a pause of ``job_name`` (None: everything), refusing names no job can have."""
    if job_name is None:
        return EVERYTHING
    if not isinstance(job_name, str) or not job_name.strip():
        raise InvalidInput("job name must not be empty")
    if job_name.strip() == EVERYTHING:
        raise InvalidInput(f"{EVERYTHING!r} is reserved: give no job name to pause or resume everything")
    return job_name


def _json(value: Any) -> dict:
    """A row's parameters: as text (``parameters::text``, what the queries feeding triggers return) they are
    parsed with every number kept as its JSON text (``loads_parameters``); a jsonb value the driver already
    decoded (numbers as floats: fine for display only) is taken as it is."""
    if isinstance(value, str):
        value = loads_parameters(value)
    return value


def _parameter_slots(parameters: dict[str, str] | None) -> dict[str, str | None]:
    """A parameter filter as the statements' slots (``param_key_N``, ``param_value_N``); unused slots are NULL,
    which the statement skips. At most ``MAX_PARAMETER_FILTERS``, keys as ``PARAMETER_KEY`` allows."""
    given = list((parameters or {}).items())
    if len(given) > MAX_PARAMETER_FILTERS:
        raise InvalidInput(f"at most {MAX_PARAMETER_FILTERS} parameter filters at once")
    for key, _ in given:
        if not PARAMETER_KEY.match(key):
            raise InvalidInput(f"bad parameter name {key!r}: use letters, digits, '_', '-' and '.'")
    slots: dict[str, str | None] = {}
    for n in range(1, MAX_PARAMETER_FILTERS + 1):
        slots[f"param_key_{n}"], slots[f"param_value_{n}"] = given[n - 1] if n <= len(given) else (None, None)
    return slots


def _claimed(row: Row) -> ClaimedJob:
    return ClaimedJob(
        id=row["id"],
        job_name=row["job_name"],
        parameters=_json(row["parameters"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        dispatch_id=row["dispatch_id"],
    )


def _constraint_message(exc: DatabaseError) -> str:
    constraint = exc.constraint or ""
    readable = {
        "jenkins_jobs_queue_status_check": "status must be one of " + ", ".join(STATUSES),
        "jenkins_jobs_queue_job_name_check": "job name must not be empty (and at most 1024 characters)",
        "jenkins_jobs_queue_parameters_check": "parameters must be a JSON object",
        "jenkins_jobs_queue_max_attempts_check": "max attempts must be at least 1",
        "jenkins_jobs_queue_attempts_check": "attempts must not be negative",
        "jenkins_job_limits_max_in_flight_check": "a cap must be 0 or more",
        "jenkins_job_limits_job_name_check": "job name must not be empty",
        "jenkins_job_limits_per_minute_check": "a rate must be 1 or more starts per minute",
        "jenkins_jobs_queue_dedupe_key": "another unfinished job has the same dedupe key",
        "jenkins_job_pauses_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_job_limits_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_jobs_queue_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_jobs_queue_scheduled_at_check": "scheduled_at must be a real time, not infinity (nor a zero date)",
        "jenkins_jobs_queue_scheduled_at_at_most_9999_12_31": (
            f"scheduled_at must be at most {SCHEDULED_AT_LATEST:%Y-%m-%d %H:%M} UTC (no reader can show a later time; "
            "that moment itself means never)"),
    }
    return readable.get(constraint, str(exc))


def _check_buckets(window_seconds: int, bucket_seconds: int) -> None:
    # The aggregate's buckets are five minutes: a chart's bucket is a whole number of them.
    if bucket_seconds < 300 or bucket_seconds % 300 or window_seconds < bucket_seconds:
        raise InvalidInput("a bucket must be a multiple of 300 s and the window at least one bucket")


def _named(argument: str, error: str | None) -> str | None:
    """An ``inputs`` refusal naming the argument it is about."""
    return None if error is None else f"{argument}: {error}"


def _refuse(*errors: str | None) -> None:
    """InvalidInput with the first of ``errors`` (None: no error), before anything is stored."""
    if first := next((e for e in errors if e is not None), None):
        raise InvalidInput(first)


@dataclass(frozen=True)
class LimitSet:
    """What setting a job's cap (or rate) did: ``changed`` False when it already was that (nothing written,
    nothing recorded in the caps' history); ``previous`` the cap (rate) it had, None for none."""

    changed: bool
    previous: int | None


class Queue:
    """Queue operations on one database session. Every method is one round trip unless it says so."""

    def __init__(self, db: Session, lease_seconds: int = default_of("LEASE_SECONDS")):
        self.db = db
        self.lease_seconds = lease_seconds
        self._statements = statements.load(db.dialect)

    def _run(self, name: str, **params: Any) -> list[Row]:
        for attempt in range(VICTIM_ATTEMPTS):
            try:
                return self.db.run(self._statements[name], **params)
            except DatabaseBusy as exc:
                # A deadlock victim was rolled back whole, at once: outside a caller's transaction, running the
                # block again is its first run (every transition is fenced), where failing it would fail a whole
                # batch and leave its rows processing until their leases run out (seen: two lanes' writes).
                if not exc.victim or self.db.in_transaction or attempt == VICTIM_ATTEMPTS - 1:
                    raise
            except DatabaseError as exc:
                if exc.invalid_input:
                    raise InvalidInput(_constraint_message(exc)) from None
                raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ enqueue
    def enqueue(
        self,
        job_name: str,
        parameters: dict | None = None,
        *,
        priority: int = 0,
        scheduled_at: datetime | str | None = None,
        max_attempts: int = 3,
        dedupe_key: str | None = None,
        actor: str = "operator",
        controller: str = DEFAULT_CONTROLLER,
    ) -> EnqueueResult:
        """Add a pending row for ``controller``; with ``dedupe_key``, return the unfinished row with that key
        instead."""
        parameters = {} if parameters is None else parameters
        _refuse(job_name_error(job_name), inputs.parameters_error(parameters),
                _named("priority", inputs.PRIORITY.error(priority)),
                _named("max_attempts", inputs.ATTEMPTS.error(max_attempts)),
                None if dedupe_key is None else inputs.dedupe_key_error(dedupe_key))
        scheduled_at = _scheduled_at(scheduled_at)
        rows = self._run(
            "enqueue",
            job_name=job_name,
            parameters=dumps_parameters(parameters),  # numbers read as JsonNumber (CLI --params) kept as written
            priority=priority,
            scheduled_at=scheduled_at,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            actor=actor,
            controller=controller,
        )
        if not rows and dedupe_key is not None:
            # The duplicate committed after our statement's snapshot: look again with a fresh one.
            rows = [dict(r, created=False) for r in self._run("find_open_by_dedupe_key", dedupe_key=dedupe_key)]
        if not rows:
            # The row holding the key finished in between; enqueue anew.
            return self.enqueue(job_name, parameters, priority=priority, scheduled_at=scheduled_at,
                                max_attempts=max_attempts, dedupe_key=dedupe_key, actor=actor, controller=controller)
        return EnqueueResult(id=rows[0]["id"], created=rows[0]["created"])

    # ------------------------------------------------------------------ claim
    def fingerprint(self) -> Fingerprint:
        """Marks that move when anything a pass would act on changes (rows inserted, any transition, caps,
        pauses): one cheap read, the polling dispatcher's question between passes. Compare two for equality."""
        return cast(Fingerprint, self._run("queue_fingerprint")[0])

    def caps_in_force(self, max_in_flight: int | None) -> bool:
        """Whether claims must go through the capped path (checked once per pass)."""
        if max_in_flight is not None:
            return True
        return bool(self._run("caps_in_force")[0]["any_job_limits"])

    def claim_batch(
        self, batch_size: int, *, capped: bool = False, max_in_flight: int | None = None,
        actor: str = "dispatcher", controller: str = DEFAULT_CONTROLLER,
        controller_max_in_flight: int | None = None, counted_controllers: Sequence[str] | None = None,
    ) -> list[ClaimedJob]:
        """Claim up to ``batch_size`` eligible rows of ``controller`` (its rows only: the claim index leads with
        the controller, so another controller's backlog is never read).

        Uncapped: ONE statement. Capped (``controller_max_in_flight`` needs it too): the same statement shape
        after a transaction-scoped lock, so concurrent claimers see each other's claims and no cap is ever
        exceeded: one round trip where the session's blocks take that lock themselves (``locking_blocks``).
        ``counted_controllers``: the configured controllers, whose rows in flight ``max_in_flight`` counts (a
        removed controller's stranded rows hold no one back); None: every controller's.
        """
        params = dict(batch_size=batch_size, lease_seconds=self.lease_seconds, actor=actor, controller=controller)
        capped_params = dict(max_in_flight=max_in_flight, controller_max_in_flight=controller_max_in_flight,
                             controllers=None if counted_controllers is None else ",".join(counted_controllers))
        for attempt in range(CLAIM_ATTEMPTS):
            try:
                if not capped and controller_max_in_flight is None:
                    rows = self._run("claim_batch", **params)
                elif self.db.locking_blocks:
                    # One round trip: the block takes the caps lock before it reads (three fewer than below).
                    rows = self._run("claim_batch_capped", **capped_params, **params)
                else:
                    # The lock goes with BEGIN (one round trip), then the claim, then COMMIT.
                    with self.db.transaction(opening=self._statements["lock_caps"]):
                        rows = self._run("claim_batch_capped", **capped_params, **params)
                return [_claimed(r) for r in rows]
            except DatabaseBusy:
                # Claims of several controllers run side by side (a thread each); InnoDB may pick one as a
                # deadlock victim. A busy claim was rolled back whole (nothing claimed): claiming again at once
                # costs less than ending the pass, which would hold this controller's rows back a second.
                if attempt == CLAIM_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ fenced transitions
    def mark_triggered(
        self, job: ClaimedJob | ExpiredLease, queue_id: int | None, *, event: str = "triggered",
        actor: str = "dispatcher", detail: str | None = None, build_number: int | None = None,
        build_url: str | None = None,
    ) -> bool:
        """Record the queue item (and build) Jenkins has for the dispatch; False when the row is no longer ours.
        ``queue_id`` None: Jenkins named no queue item (the reconciler adopting a build that names none, for a row
        that never learnt its own); give ``detail`` then."""
        rows = self._run(
            "mark_triggered", id=job.id, dispatch_id=job.dispatch_id, queue_id=queue_id,
            build_number=build_number, build_url=build_url, lease_seconds=self.lease_seconds,
            event=event, actor=actor, detail=detail or f"Jenkins queue item {queue_id}",
        )
        return bool(rows)

    def mark_triggered_many(self, accepted: list[tuple[ClaimedJob, int]], *, actor: str = "dispatcher") -> dict[int, bool]:
        """Record several (job, queue_id) at once; returns the ids that were still ours to record, each with
        whether an operator asked to cancel it while its trigger was in flight."""
        if not accepted:
            return {}
        # One JSON document rather than several arrays: the driver encodes arrays slowly.
        rows = self._run(
            "mark_triggered_many",
            accepted=json.dumps([
                {"id": job.id, "dispatch_id": job.dispatch_id, "queue_id": queue_id,
                 "detail": f"Jenkins queue item {queue_id}"}
                for job, queue_id in accepted
            ]),
            lease_seconds=self.lease_seconds,
            actor=actor,
        )
        return {r["id"]: r["cancel_requested"] for r in rows}

    def record_progress(
        self, job_id: int, dispatch_id: str, *, build_number: int | None = None, build_url: str | None = None,
        queue_id: int | None = None, started: bool = False, event: str = "started", actor: str = "webhook",
        detail: str | None = None, job_path: str | None = None, job_leaf: str | None = None,
        only_build: int | None = None,
    ) -> bool:
        """``job_path`` (or only ``job_leaf``, the last segment): change the row only if it is that job's;
        ``only_build``: only if the row's build, once known, is that one."""
        rows = self._run(
            "record_progress", id=job_id, dispatch_id=dispatch_id, build_number=build_number,
            build_url=build_url, queue_id=queue_id, started=started, event=event, actor=actor, detail=detail,
            job_path=job_path, job_leaf=job_leaf, only_build=only_build,
        )
        return bool(rows)

    def settle(
        self, job_id: int, dispatch_id: str, status: str, *, result: str | None = None,
        error: str | None = None, build_number: int | None = None, build_url: str | None = None,
        actor: str = "dispatcher", job_path: str | None = None, job_leaf: str | None = None,
        only_build: int | None = None,
    ) -> Settled | None:
        """The row settled, with its timings, or None when the fence left it as it was. ``job_path`` /
        ``job_leaf`` / ``only_build`` as in ``record_progress``."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"settle needs a final status, got {status!r}")
        rows = self._run(
            "settle", id=job_id, dispatch_id=dispatch_id, status=status, result=result, error=error,
            build_number=build_number, build_url=build_url, actor=actor, job_path=job_path, job_leaf=job_leaf,
            only_build=only_build,
        )
        if not rows:
            return None
        return Settled(rows[0]["id"], _seconds(rows[0]["queue_wait_seconds"]), _seconds(rows[0]["build_seconds"]))

    def settle_many(self, outcomes: list[Settlement], *, actor: str = "dispatcher") -> set[int]:
        """Settle several rows in one statement, each fenced on its own; returns the ids settled."""
        if not outcomes:
            return set()
        rows = self._run(
            "settle_many",
            outcomes=json.dumps([
                {"id": o.job_id, "dispatch_id": o.dispatch_id, "status": o.status, "result": o.result,
                 "error": o.error}
                for o in outcomes
            ]),
            actor=actor,
        )
        return {r["id"] for r in rows}

    def retry_later(
        self, job_id: int, dispatch_id: str, delay_seconds: float, error: str, *, actor: str = "dispatcher"
    ) -> str | None:
        """Back off after a transient error (``error`` goes into the history and ``last_error``). Returns the
        new status ('pending'; 'failed' once attempts are spent; 'cancelled' when an operator asked while
        the trigger was in flight), None if fenced out."""
        if not error or not error.strip():
            raise ValueError("a backoff needs a reason (it goes into the job's history)")
        rows = self._run(
            "retry_later", id=job_id, dispatch_id=dispatch_id, delay_seconds=float(delay_seconds),
            error=error, actor=actor,
        )
        return rows[0]["status"] if rows else None

    def release(self, job_id: int, dispatch_id: str, reason: str, *, actor: str = "dispatcher") -> bool:
        """Back to pending, no attempt spent (its trigger was never sent); cancelled instead when an operator
        asked while it was in flight. ``reason`` says why, in the history and in ``last_error``."""
        if not reason or not reason.strip():
            raise ValueError("a release needs a reason (it goes into the job's history)")
        rows = self._run("release", id=job_id, dispatch_id=dispatch_id, reason=reason, actor=actor)
        return bool(rows)

    def take_expired_leases(self, limit: int = 100, controller: str = DEFAULT_CONTROLLER) -> list[ExpiredLease]:
        """Take up to ``limit`` rows of ``controller`` whose lease expired, renewing each lease for this
        reconciler."""
        for attempt in range(CLAIM_ATTEMPTS):
            try:
                rows = self._run("take_expired_leases", limit=limit, lease_seconds=self.lease_seconds,
                                 controller=controller)
                break
            except DatabaseBusy:
                # As a claim (claim_batch): beside other controllers' passes InnoDB may pick this as a deadlock victim
                # (seen in CI); it was rolled back, and at worst a lease it renewed waits one more lease.
                if attempt == CLAIM_ATTEMPTS - 1:
                    raise
        return [
            ExpiredLease(
                id=r["id"], job_name=r["job_name"], parameters=_json(r["parameters"]), attempts=r["attempts"],
                max_attempts=r["max_attempts"], dispatch_id=r["dispatch_id"],
                jenkins_queue_id=r["jenkins_queue_id"], build_number=r["build_number"], build_url=r["build_url"],
                claimed_at=r["claimed_at"], lease_expires_at=r["lease_expires_at"], resends=r["resends"],
                cancel_requested=r["cancel_requested"],
            )
            for r in rows
        ]

    def record_resend(self, row: ExpiredLease, *, max_resends: int, quiet_seconds: float,
                      actor: str = "reconciler") -> int | None:
        """Count one more re-send (no attempt spent: Jenkins never showed the earlier one). None when the
        re-sends are used up, or when the lease this reconciler was handed is no longer the row's."""
        rows = self._run(
            "record_resend", id=row.id, dispatch_id=row.dispatch_id, lease=row.lease_expires_at,
            lease_seconds=self.lease_seconds, max_resends=max_resends, quiet_seconds=float(quiet_seconds),
            actor=actor,
        )
        return rows[0]["resends"] if rows else None

    def resend_not_taken(self, job_id: int, dispatch_id: str, reason: str, *, sent: bool,
                         actor: str = "reconciler") -> bool:
        """A re-send Jenkins did not take keeps its row processing under the same dispatch id (see the SQL);
        ``sent`` False (a Jenkins-wide failure) gives the re-send back."""
        return bool(self._run("resend_not_taken", id=job_id, dispatch_id=dispatch_id, reason=reason, sent=sent,
                              actor=actor))

    def request_cancel(self, job_id: int, dispatch_id: str, reason: str, *, actor: str = "operator") -> bool:
        """Record a cancel for a processing row whose trigger is in flight (False: it is no longer so)."""
        return bool(self._run("request_cancel", id=job_id, dispatch_id=dispatch_id, reason=reason, actor=actor))

    def recently_finished_watched(self, window_seconds: float, controller: str = DEFAULT_CONTROLLER) -> list[WatchedRow]:
        """Final rows of ``controller`` settled within the window that a request of their dispatch may still reach in
        Jenkins: re-sent rows, and (``cancelled_in_flight``) rows cancelled while their trigger was on its way with
        nothing found in Jenkins, until a late arrival of theirs is handled. id, job_name, dispatch_id,
        cancelled_in_flight and, for those, claimed_at."""
        return cast(list[WatchedRow], self._run("recently_finished_watched", window=float(window_seconds),
                                                controller=controller))

    def queue_ids_between(self, low: int, high: int) -> set[int]:
        """Jenkins queue ids our rows hold strictly between ``low`` and ``high``."""
        return {r["queue_id"] for r in self._run("queue_ids_between", low=low, high=high)}

    def record_note(self, job_id: int, dispatch_id: str, event: str, detail: str) -> None:
        """History only (the row is unchanged): what the reconciler saw or did in Jenkins for this dispatch."""
        self._run("record_note", id=job_id, dispatch_id=dispatch_id, event=event, detail=detail)

    # ------------------------------------------------------------------ operator
    def get(self, job_id: int) -> Job:
        """One row by id; NotFound when there is none."""
        rows = self._run("get_job", id=job_id)
        if not rows:
            raise NotFound(f"no job with id {job_id}")
        row = cast(Job, rows[0])
        row["parameters"] = _json(row["parameters"])
        return row

    def events(self, job_id: int) -> list[JobEvent]:
        """A row's history, oldest first."""
        return cast(list[JobEvent], self._run("job_events", id=job_id))

    def find_by_dispatch_id(self, dispatch_id: str) -> FoundJob | None:
        """The row a dispatch id names, or None."""
        rows = cast(list[FoundJob], self._run("get_job_by_dispatch_id", dispatch_id=dispatch_id))
        return rows[0] if rows else None

    def find_by_queue_id(self, job_name: str, queue_id: int) -> FoundJob | None:
        """The row of ``job_name`` holding Jenkins queue item ``queue_id``, or None."""
        rows = cast(list[FoundJob], self._run("get_job_by_queue_id", job_name=job_name, queue_id=queue_id))
        return rows[0] if rows else None

    def was_dispatched(self, dispatch_id: str) -> bool:
        """Whether some claim ever drew this dispatch id (its history has the claimed event)."""
        return bool(self._run("was_dispatched", dispatch_id=dispatch_id))

    def cancel_pending(self, job_id: int, reason: str = "cancelled by operator", *, actor: str = "operator") -> bool:
        """Cancel a pending row; False when it is no longer pending."""
        return bool(self._run("cancel_pending", id=job_id, reason=reason, actor=actor))

    def retry_final(self, job_id: int, reason: str = "retried by operator", *, actor: str = "operator",
                    unchanged_since: datetime | None = None) -> None:
        """``unchanged_since``: the row's ``updated_at`` when it was selected; a row changed since then (retried
        and finished again, say) is left alone (Conflict)."""
        try:
            rows = self._run("retry_final", id=job_id, reason=reason, actor=actor,
                             updated_at=unchanged_since.isoformat() if unchanged_since else None)
        except InvalidInput as exc:
            raise Conflict(f"job {job_id} cannot be retried: {exc}") from None
        if not rows:
            row = self.get(job_id)  # raises NotFound
            if row["status"] in FINAL_STATUSES:
                raise Conflict(f"job {job_id} changed since it was selected (it is {row['status']} again); "
                               "nothing done")
            raise Conflict(f"job {job_id} is {row['status']}: only completed, failed or cancelled jobs can be retried")

    def jobs_matching(
        self, *, final: bool, status: str | None = None, job_name: str | None = None,
        since: datetime | None = None, error_like: str | None = None, parameters: dict[str, str] | None = None,
        limit: int = 1000, controller: str | None = None,
    ) -> tuple[list[MatchedJob], int]:
        """Final (``final``) or unfinished rows the filters select, by id, at most ``limit`` of them; and how
        many match in all. ``error_like``, ``parameters`` and ``controller``: as in ``list_jobs``."""
        rows = self._run(
            "select_jobs_matching", final=final, status=status, job_name=job_name, controller=controller,
            since=_moment(since), **_parameter_slots(parameters),
            error_pattern=like_contains(error_like) if error_like is not None else None, limit=limit,
        )
        total = rows[0]["total"] if rows else 0
        return [cast(MatchedJob, {k: v for k, v in r.items() if k != "total"}) for r in rows], total

    def list_jobs(
        self, *, status: str | None = None, job_name: str | None = None, since: datetime | str | None = None,
        before_id: int | None = None, limit: int = 50, error_like: str | None = None,
        parameters: dict[str, str] | None = None, controller: str | None = None,
    ) -> list[Job]:
        """Rows newest first (every column ``get`` reads), filtered by status, job, time and id, at most ``limit``.
        ``error_like``: ``last_error`` contains this text, ignoring case; ``parameters``: each named parameter, as text,
        equals the value given (at most ``MAX_PARAMETER_FILTERS``, keys of letters, digits, ``_``, ``-``, ``.``)."""
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
        filters = dict(status=status, job_name=job_name, since=_moment(since), before_id=before_id, limit=limit,
                       controller=controller)
        rows = cast(list[Job], self._run("list_jobs", **filters, **_parameter_slots(parameters),
                                         error_pattern=like_contains(error_like) if error_like is not None else None))
        for row in rows:
            row["parameters"] = _json(row["parameters"])
        return rows

    def oldest_pending(self) -> OldestPending | None:
        """The pending row scheduled earliest (paused or not), or None when nothing is pending."""
        rows = cast(list[OldestPending], self._run("oldest_pending_job"))
        return rows[0] if rows else None

    def finished_per_hour(self, hours: int) -> list[HourCounts]:
        """Rows finished per hour (``hour``: its start, UTC), completed / failed / cancelled, over the current
        hour and the ``hours - 1`` before it; hours with none are absent."""
        if hours < 1:
            raise InvalidInput("hours must be 1 or more")
        return cast(list[HourCounts], self._run("finished_per_hour", hours=hours))

    def stats_per_bucket(self, window_seconds: int, bucket_seconds: int) -> list[Row]:
        """Builds started, completed, failed and cancelled per bucket of ``bucket_seconds`` (a multiple of 300) over
        the last ``window_seconds``, from the five-minute aggregate the write path keeps (``bucket_epoch``: the
        bucket's start in seconds since 1970); buckets with none are absent."""
        _check_buckets(window_seconds, bucket_seconds)
        return self._run("stats_per_bucket", window=window_seconds, bucket=bucket_seconds)

    def depth_per_bucket(self, window_seconds: int, bucket_seconds: int) -> list[Row]:
        """The most pending and processing rows the dispatchers' gauges saw per bucket (as ``stats_per_bucket``)."""
        _check_buckets(window_seconds, bucket_seconds)
        return self._run("depth_per_bucket", window=window_seconds, bucket=bucket_seconds)

    def timing_bins(self, window_seconds: int) -> dict[str, dict[int, int]]:
        """Queue wait and build duration of the rows finished in the last ``window_seconds`` (whole hours, the
        current one included) as histogram counts: metric ('wait', 'build') → bin → rows (bins: timeline.bin_of)."""
        found: dict[str, dict[int, int]] = {"wait": {}, "build": {}}
        for r in self._run("timing_bins", window=window_seconds):
            found[r["metric"]][int(r["bin"])] = int(r["n"])
        return found

    def recent_timings(self, limit: int) -> list[Row]:
        """The latest ``limit`` finished rows, one row per job (spelled exactly): job_name, finished (how many),
        waits and builds (their queue waits and build durations in seconds, None where the build never started)."""
        return self._run("recent_timings", limit=limit)

    def prune(self, older_than_days: float, batch: int = 1000) -> int:
        """Delete finished rows older than the cutoff in bounded batches; returns how many went."""
        if older_than_days < 0:
            raise InvalidInput("the age must not be negative")
        total = 0
        while True:
            deleted = self._run("prune_batch", days=float(older_than_days), batch=batch)[0]["deleted"]
            total += deleted
            if deleted < batch:
                return total

    def prune_aggregates(self, older_than_seconds: int) -> int:
        """Delete the time page's aggregate rows of buckets that started more than ``older_than_seconds`` ago (the
        page's longest window: it never shows them); returns how many rows went."""
        if older_than_seconds < 0:
            raise InvalidInput("the age must not be negative")
        return int(self._run("prune_aggregates", seconds=int(older_than_seconds))[0]["deleted"])

    def set_limit(self, job_name: str, max_in_flight: int, controller: str = DEFAULT_CONTROLLER, *,
                  changed_by: str | None = None) -> LimitSet:
        """Set a job's cap of rows in flight on ``controller`` (0 holds it back), recorded in the caps' history
        with ``changed_by``: whether it changed, and the cap it replaced. A cap the job already has (under any
        spelling of its name) changes nothing and records nothing."""
        _refuse(job_name_error(job_name), _named("max_in_flight", inputs.CAP.error(max_in_flight)))
        rows = self._run("set_limit", job_name=job_name, max_in_flight=max_in_flight, controller=controller,
                         changed_by=changed_by)
        return LimitSet(changed=True, previous=rows[0]["previous"]) if rows else LimitSet(False, max_in_flight)

    def remove_limit(self, job_name: str, controller: str = DEFAULT_CONTROLLER, *,
                     changed_by: str | None = None) -> bool:
        """Remove a job's cap on ``controller`` (recorded in the caps' history; its rate, if any, stays); False when
        it had none."""
        return bool(self._run("remove_limit", job_name=job_name, controller=controller, changed_by=changed_by))

    def set_rate(self, job_name: str, per_minute: int, controller: str = DEFAULT_CONTROLLER, *,
                 changed_by: str | None = None) -> LimitSet:
        """Set a job's rate on ``controller``: no set of dispatchers starts more than ``per_minute`` of its rows in
        any 60 s (enforced by the capped claim, as caps are). Its cap, if any, stays. Recorded in the caps' history
        with ``changed_by``: whether it changed, and the rate it replaced. A rate the job already has changes
        nothing and records nothing (a cap of 0, not a rate, holds a job back)."""
        _refuse(job_name_error(job_name), _named("per_minute", inputs.RATE.error(per_minute)))
        rows = self._run("set_rate", job_name=job_name, per_minute=per_minute, controller=controller,
                         changed_by=changed_by)
        return LimitSet(changed=True, previous=rows[0]["previous"]) if rows else LimitSet(False, per_minute)

    def remove_rate(self, job_name: str, controller: str = DEFAULT_CONTROLLER, *,
                    changed_by: str | None = None) -> bool:
        """Remove a job's rate on ``controller`` (recorded in the caps' history; its cap, if any, stays); False when
        it had none."""
        return bool(self._run("remove_rate", job_name=job_name, controller=controller, changed_by=changed_by))

    def limit_of(self, job_name: str, controller: str = DEFAULT_CONTROLLER) -> int | None:
        """A job's cap on ``controller``, under any spelling of its name; None when it has none."""
        rows = self._run("limit_of", job_name=job_name, controller=controller)
        return rows[0]["max_in_flight"] if rows else None

    def limit_history(self, limit: int = 20) -> list[LimitChange]:
        """The latest cap and rate changes, newest first: controller, job_name, kind ('cap' or 'rate'), previous
        and new cap (previous, max_in_flight) or rate (previous_per_minute, per_minute; None: none), changed_by,
        at."""
        return cast(list[LimitChange], self._run("limit_history", limit=limit))

    def pending_count(self, job_name: str | None) -> int:
        """Pending rows of ``job_name`` (every spelling), or of every job for None: what a pause holds back."""
        return int(self._run("pending_of", job_name=_pause_key(job_name))[0]["pending"])

    def limits(self) -> list[Limit]:
        """Every job's limits (with its controller): its cap with its rows in flight, its rate with its starts of the
        last minute (either None when it has none)."""
        return cast(list[Limit], self._run("list_limits"))

    def fail_unknown_controllers(self, known: list[str], *, actor: str = "dispatcher") -> list[Row]:
        """Fail the pending rows naming a controller not in ``known`` (nothing is sent anywhere); id and
        controller of each. One cheap read (a skip scan over the controllers with pending rows) when every
        controller is known, whatever the backlog."""
        unknown = [row["controller"] for row in self._run("pending_controllers") if row["controller"] not in known]
        failed: list[Row] = []
        for controller in unknown:
            failed += self._run("fail_rows_of_unknown_controller", controller=controller, actor=actor)
        return failed

    def stats_per_controller(self) -> list[Row]:
        """Per controller with unfinished rows: pending, due and in_flight."""
        return self._run("stats_per_controller")

    # ------------------------------------------------------------------ pauses
    def pause(self, job_name: str | None, *, reason: str | None = None, paused_by: str | None = None,
              controller: str | None = None) -> PauseResult:
        """Pause ``job_name`` (None: every job) on ``controller`` (None: on every controller; a controller with
        no job: that whole controller, for maintenance). Once this returns, no claim takes a pending row it
        holds back; rows already claimed carry on. Pausing a paused job keeps the pause in force (``created``
        False). A pause on every controller and one on a single controller are two pauses."""
        key = _pause_key(job_name)
        if job_name is not None and (error := job_name_error(job_name)):
            raise InvalidInput(error)  # as enqueue: no row of it could ever be dispatched
        try:
            rows = self._run("pause_job", job_name=key, paused_by=paused_by, reason=reason, controller=controller)
        except DatabaseError as exc:
            if exc.constraint:
                raise InvalidInput(_constraint_message(exc)) from exc
            raise
        if not rows:  # a concurrent pause of this job committed after the statement's snapshot: look again
            return self.pause(job_name, reason=reason, paused_by=paused_by, controller=controller)
        row = rows[0]
        return PauseResult(**vars(_pause(row)), created=row["created"], pending=row["pending"])

    def resume(self, job_name: str | None, *, controller: str | None = None) -> ResumeResult:
        """Lift the pause of ``job_name`` (None: the pause of everything; each job's own pause stays) given for
        ``controller`` (None: the pause of every controller; a controller's own pauses stay, and the other way
        round). Two round trips: the resume, then the pauses left."""
        key = _pause_key(job_name)
        row = self._run("resume_job", job_name=key, controller=controller)[0]
        return ResumeResult(job_name=job_name, resumed=row["resumed"] > 0, pending=row["pending"],
                            still_paused=self.pauses(), controller=controller)

    def pauses(self) -> list[Pause]:
        """Every pause in force, the pause of everything first."""
        return [_pause(r) for r in self._run("list_pauses")]

    def waiting_context(self, rows: Sequence[tuple[str, str]]) -> WaitingContext:
        """Caps, rates and in-flight counts of the (controller, job_name) pairs of ``rows``, the rows in flight on
        their controllers, every pause, and the total in flight: one statement for a whole page of rows (see
        ``waiting.why_waiting``)."""
        wanted = [{"controller": controller, "job_name": job_name} for controller, job_name in sorted(set(rows))]
        row = self._run("waiting_context", wanted=json.dumps(wanted))[0]
        jobs = row["jobs"] or []
        jenkins = row["jenkins"] or {}
        pauses = [_pause(p) for p in row["pauses"] or []]
        return WaitingContext(
            caps={(j["controller"], j["job_name"]): j["cap"] for j in jobs if j["cap"] is not None},
            in_flight={(j["controller"], j["job_name"]): int(j["in_flight"]) for j in jobs},
            paused_as={j["job_name"]: j["paused_as"] for j in jobs if j.get("paused_as") is not None},
            paused_on={j["job_name"]: j["paused_on"] for j in jobs if j.get("paused_on") is not None},
            rates={(j["controller"], j["job_name"]): RateWindow(
                       per_minute=j["rate"], started=int(j["started"]),
                       next_start_seconds=(None if j.get("next_start_seconds") is None
                                           else float(j["next_start_seconds"])))
                   for j in jobs if j.get("rate") is not None},
            controllers_in_flight={name: int(n) for name, n in (row["controllers_in_flight"] or {}).items()},
            total_in_flight=row["total_in_flight"],
            live_dispatchers=int(row["live_dispatchers"]),
            pauses=[p for p in pauses if p.controller is None],
            controller_pauses=[p for p in pauses if p.controller is not None],
            dispatchers=sorted(
                (dict(d, controllers=json.loads(d["controllers"]) if isinstance(d["controllers"], str)
                      else d["controllers"]) for d in row.get("dispatchers") or []),
                key=lambda d: float(d["last_pass_seconds"])),
            jenkins_unavailable_since=_timestamp(jenkins.get("since")),
            jenkins_reason=jenkins.get("reason"),
        )

    def stats(self) -> Stats:
        """The queue at a glance: rows pending, due and processing, expired leases, the last hour's outcomes, ages."""
        return cast(Stats, self._run("stats")[0])

    def gauges(self) -> Gauges:
        """Jobs processing; the age of the oldest due pending job; seconds until the next pending job is
        due and until the next lease expires (each None when there is none)."""
        return cast(Gauges, self._run("gauges")[0])

    def stats_per_job(self) -> list[JobStats]:
        """Per job: pending and in-flight rows, the oldest due row's age and the last hour's outcomes."""
        rows = self._run("stats_per_job")
        for row in rows:  # a JSON array, aggregated in no order on MySQL
            row["paused_on"] = sorted(row["paused_on"] or [])
        return cast(list[JobStats], rows)

    def in_flight_counts(self) -> dict[str, int]:
        """Processing rows per job, every spelling of its name together under one of them (the demo's summary; the
        tests' cap samplers)."""
        return {r["job_name"]: r["n"] for r in self._run("in_flight_counts")}

    # ------------------------------------------------------------------ doctor
    def server_identity(self) -> ServerIdentity:
        """The session's user, database and the server's version."""
        return cast(ServerIdentity, self._run("server_identity")[0])

    def applied_migrations(self) -> dict[int, str]:
        """Version → name of each migration `migrate` applied; raises SchemaMissing before the first."""
        return {r["version"]: r["name"] for r in self._run("applied_migrations")}

    def oldest_transaction(self) -> OldestTransaction:
        """pid, user_name, application_name, state and age (``seconds``) of the oldest transaction open in this
        database besides ours (all None when none is), and ``hidden_sessions``: sessions we may not see into."""
        return cast(OldestTransaction, self._run("oldest_transaction")[0])

    def waiting_job_names(self, limit: int) -> list[WaitingJobName]:
        """Up to ``limit`` job names of pending or processing rows, most rows first: job_name, waiting (rows),
        job_names (how many distinct names in all)."""
        return cast(list[WaitingJobName], self._run("waiting_job_names", limit=limit))

    # ------------------------------------------------------------------ dispatcher heartbeats
    def record_heartbeat(
        self, *, dispatcher_id: str, kind: str, host: str, pid: int, started_at: datetime,
        stale_after_seconds: float, outcome: str, detail: str | None, passes: int,
        jenkins_ok: bool | None = None, jenkins_reason: str | None = None,
        controllers: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Upsert one dispatcher's row after a pass (and drop rows not seen for a day). ``jenkins_ok``: what
        the pass learned about Jenkins (None: not asked; the known state stands). ``controllers``: the ones it
        serves, each with its breaker's state (None: the recorded ones stand)."""
        self._run(
            "record_heartbeat", id=dispatcher_id, kind=kind, host=host, pid=pid, started_at=started_at,
            stale_after_seconds=float(stale_after_seconds), outcome=outcome, detail=detail, passes=passes,
            jenkins_ok=jenkins_ok, jenkins_reason=jenkins_reason,
            controllers=None if controllers is None else json.dumps(controllers, default=str),
        )

    def dispatchers(self) -> list[Dispatcher]:
        """Dispatchers seen in the last day, the most recent pass first, each with ``live`` and the age of
        its last pass (``last_pass_seconds``)."""
        return cast(list[Dispatcher], self._run("dispatchers"))

    def jenkins_outage(self) -> JenkinsOutage | None:
        """Since when (``since``), why (``reason``) and by whom (``dispatcher_id``) Jenkins is seen failing as a
        whole, by the live dispatcher that asked it last; None while it answers, or no live one asked."""
        rows = cast(list[JenkinsOutage], self._run("jenkins_outage"))
        return rows[0] if rows and rows[0]["since"] is not None else None

    # ------------------------------------------------------------------ the cutover (docs/cutover.md)
    def cutover_window(self) -> CutoverWindow | None:
        """The window in which the results of the worker that ran before jenkins-dispatch still count for the jobs
        it held at the upgrade: upgraded_at, window_seconds, window_ends_at, seconds_left (negative once closed)
        and ``held`` (its jobs still processing); None when the table was never upgraded while it held jobs."""
        rows = cast(list[CutoverWindow], self._run("cutover_window"))
        return rows[0] if rows else None


    # ------------------------------------------------------------------ the pruner duty
    # (dispatching/duties/pruner.py; the statements under "Pruning (the pruner duty)" at the end of queries.sql)
    def take_duty(self, name: str, holder: str, hold_seconds: float) -> DutyTurn:
        """Take duty ``name``'s turn for ``holder`` until ``hold_seconds`` from now if it is due, or renew it if
        ``holder`` has it (one statement, a compare-and-set: of several dispatchers racing, one takes it)."""
        row = self._run("take_duty", duty=name, holder=holder, hold_seconds=float(hold_seconds))[0]
        due_in = row["due_in_seconds"]
        return DutyTurn(taken=bool(row["taken"]), due_in_seconds=None if due_in is None else float(due_in))

    def duty_done(self, name: str, holder: str, every_seconds: float) -> bool:
        """Hand duty ``name``'s turn back, due again in ``every_seconds``; False when ``holder`` no longer held it."""
        return bool(self._run("duty_done", duty=name, holder=holder, every_seconds=float(every_seconds)))

    def prune_one_batch(self, older_than_seconds: float, batch: int) -> int:
        """Delete up to ``batch`` final rows (and their history) finished more than ``older_than_seconds`` ago, in
        one statement (``prune``'s); returns how many went."""
        return int(self._run("prune_batch", days=float(older_than_seconds) / 86400, batch=batch)[0]["deleted"])


@dataclass(frozen=True)
class DutyTurn:
    """What ``take_duty`` answered: whether the caller holds the turn, and when the duty is due (None: no such duty)."""
    taken: bool
    due_in_seconds: float | None
