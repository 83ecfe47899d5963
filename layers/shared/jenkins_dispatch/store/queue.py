"""The queue's words: the statuses of a row, and the records the stores hand out and take (a claimed row, an
expired lease, a settlement, a pause, what decides why rows wait, a duty's turn, ...). Plain data, no statement: the stores
(``dispatcher.py``, ``webhook.py``, ``levers.py``, ``reports.py``, ...) run the statements and build these; the
shapes of the rows they read as they come are ``rows.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from ..config import DEFAULT_CONTROLLER
from ..moments import from_iso
from .dispatch_ids import LEGACY_PREFIX
from .session import Row

FINAL_STATUSES = ("completed", "failed", "cancelled")
STATUSES = ("pending", "processing", *FINAL_STATUSES)
# Rows the migration found processing under the seed's dispatcher (the format's home: dispatch_ids.py).
LEGACY_DISPATCH_PREFIX = LEGACY_PREFIX
EVERYTHING = "*"  # jenkins_job_pauses.job_name of a pause of every job (Jenkins forbids '*' in item names)
SCHEDULED_AT_LATEST = datetime(9999, 12, 31, tzinfo=UTC)  # the table's bound: later times no reader can hold


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


@dataclass(frozen=True)
class EnqueueResult:
    """The id of an enqueued row, and whether it was new."""
    id: int
    created: bool  # False: an unfinished row with the same dedupe_key already existed


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

    @classmethod
    def from_row(cls, row: Row) -> Pause:
        """A pause as ``list_pauses`` (or a JSON document of pauses) reads it."""
        name = row["job_name"]
        paused_at = row["paused_at"]  # never NULL (the table's); ISO text when read from a JSON document
        return cls(job_name=None if name == EVERYTHING else name,
                   paused_at=from_iso(paused_at) if isinstance(paused_at, str) else paused_at,
                   paused_by=row["paused_by"], reason=row["reason"], controller=row.get("controller"))


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


class CapsInForce(Enum):
    """Which claim a pass needs (``DispatcherStore.claim_plan``): none (the one-statement claim), the capped claim
    (job, controller or global caps), or the keyed one (a concurrency key is capped: the capped claim's work and the
    keys'). False only for NONE, so that it reads as "capped?"."""

    NONE = "none"
    CAPPED = "capped"
    KEYED = "keyed"

    def __bool__(self) -> bool:
        return self is not CapsInForce.NONE


@dataclass(frozen=True)
class ClaimPlan:
    """What a pass's claims take (``DispatcherStore.claim_plan``): which caps, and whether in fair-share order."""

    caps: CapsInForce
    fair: bool


@dataclass(frozen=True)
class KeyHold:
    """A concurrency key's cap as the capped claim keeps it: its rows in flight on every controller, the first few of
    them (by id), and, where newest wins, its newest pending row (the older ones are superseded at the next claim)."""

    cap: int
    in_flight: int
    holders: tuple[int, ...] = ()
    newest: int | None = None


@dataclass(frozen=True)
class WaitingContext:
    """What decides why pending rows wait, read once for a page of rows (``Reports.waiting_context``). Caps, rates
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


@dataclass(frozen=True)
class LimitSet:
    """What setting a job's cap (or rate) did: ``changed`` False when it already was that (nothing written,
    nothing recorded in the caps' history); ``previous`` the cap (rate) it had, None for none."""

    changed: bool
    previous: int | None


@dataclass(frozen=True)
class DutyTurn:
    """What ``take_duty`` answered: whether the caller holds the turn, and when the duty is due (None: no such duty)."""
    taken: bool
    due_in_seconds: float | None
