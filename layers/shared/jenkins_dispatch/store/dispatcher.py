"""The dispatcher's store: what a dispatcher pass does to rows. It claims pending rows and records their
triggers under a lease (``claim.sql``, ``settle.sql``), backs off, releases and settles them, takes expired
leases and records the reconciler's re-sends and notes (``leases.sql``), fails the rows of unknown controllers,
records its heartbeat and gauges (``heartbeats.sql``), and takes the pruner duty's turn to prune (``Pruning``,
``pruning.sql``). The only store that carries the lease.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from ..config import DEFAULT_CONTROLLER, default_of
from ..errors import DatabaseBusy
from .db import Row, Session
from .outcomes import Outcomes
from .pruning import Pruning
from .queue import CapsInForce, ClaimedJob, ClaimPlan, DutyTurn, ExpiredLease, Settlement
from .rows import Fingerprint, Gauges, WatchedRow
from .runner import parameters_of, pause_before_rerun

CLAIM_ATTEMPTS = 3  # a claim the database refused as busy is tried again, up to this many times in all


def _claimed(row: Row) -> ClaimedJob:
    return ClaimedJob(
        id=row["id"],
        job_name=row["job_name"],
        parameters=parameters_of(row["parameters"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        dispatch_id=row["dispatch_id"],
    )


class DispatcherStore(Outcomes, Pruning):
    """A dispatcher's operations on one database session, under its lease."""

    def __init__(self, db: Session, lease_seconds: int = default_of("LEASE_SECONDS")):
        super().__init__(db)
        self.lease_seconds = lease_seconds  # what a claim, a trigger's record and a reconciler's take hand out

    def fingerprint(self) -> Fingerprint:
        """Marks that move when anything a pass would act on changes (rows inserted, any transition, caps,
        pauses): one cheap read, the polling dispatcher's question between passes. Compare two for equality."""
        return cast(Fingerprint, self._run("queue_fingerprint")[0])

    def claim_plan(self, max_in_flight: int | None, controller: str = DEFAULT_CONTROLLER) -> ClaimPlan:
        """Which claim ``controller``'s lane needs, asked once per pass in one round trip: the keyed one while any
        concurrency key is capped, else the capped one while any job is capped or ``max_in_flight`` is set, else
        none; in fair-share order while a pending row of ``controller`` has a fairness key (otherwise the seed's
        order exactly, at no cost)."""
        row = self._run("claim_plan", controller=controller)[0]
        if row["any_keys"]:
            caps = CapsInForce.KEYED
        else:
            caps = CapsInForce.CAPPED if row["any_job_limits"] or max_in_flight is not None else CapsInForce.NONE
        return ClaimPlan(caps, bool(row["any_fair"]))

    def claim_batch(
        self, batch_size: int, *, capped: bool | CapsInForce = False, max_in_flight: int | None = None,
        actor: str = "dispatcher", controller: str = DEFAULT_CONTROLLER,
        controller_max_in_flight: int | None = None, counted_controllers: Sequence[str] | None = None,
        fair: bool = False,
    ) -> list[ClaimedJob]:
        """Claim up to ``batch_size`` eligible rows of ``controller`` (its rows only: the claim index leads with
        the controller, so another controller's backlog is never read).

        Uncapped: ONE statement. Capped (``controller_max_in_flight`` needs it too): the same statement shape
        after a transaction-scoped lock, so concurrent claimers see each other's claims and no cap is ever
        exceeded: one round trip where the session's blocks take that lock themselves (``locking_blocks``).
        ``capped``: what ``claim_plan`` answered (its caps); CAPPED takes the capped claim, which leaves every row of a capped
        concurrency key alone; any other true value (KEYED, True) the keyed one, which holds the keys' caps too.
        ``counted_controllers``: the configured controllers, whose rows in flight ``max_in_flight`` counts (a
        removed controller's stranded rows hold no one back); None: every controller's.
        ``fair``: what ``claim_plan`` answered; the same claim, in fair-share order (its ``_fair`` variant).
        """
        params = dict(batch_size=batch_size, lease_seconds=self.lease_seconds, actor=actor, controller=controller)
        capped_params = dict(max_in_flight=max_in_flight, controller_max_in_flight=controller_max_in_flight,
                             controllers=None if counted_controllers is None else ",".join(counted_controllers))

        def claim_capped() -> list[Row]:
            if capped is CapsInForce.CAPPED:
                if fair:
                    return self._run("claim_batch_capped_fair", **capped_params, **params)
                return self._run("claim_batch_capped", **capped_params, **params)
            if fair:
                return self._run("claim_batch_keyed_fair", **capped_params, **params)
            return self._run("claim_batch_keyed", **capped_params, **params)

        def claim() -> list[Row]:
            if not capped and controller_max_in_flight is None:
                if fair:
                    return self._run("claim_batch_fair", **params)
                return self._run("claim_batch", **params)
            if self.db.locking_blocks:
                # One round trip: the block takes the caps lock before it reads (three fewer than below).
                return claim_capped()
            # The lock goes with BEGIN (one round trip), then the claim, then COMMIT.
            with self.db.transaction(opening=self._statements["lock_caps"]):
                return claim_capped()

        return [_claimed(r) for r in self._tried_again_when_busy(claim)]

    def _tried_again_when_busy(self, take: Callable[[], list[Row]]) -> list[Row]:
        """``take()``, run again when the database refused it as busy, up to CLAIM_ATTEMPTS times in all. Claims
        and lease takes of several controllers run side by side (a thread each), and InnoDB may pick one as a
        deadlock victim (seen in CI). Rolled back whole, it took nothing: trying again costs less than ending the
        pass, which would hold this controller's rows back a second. A victim first waits the runner's pause, so
        as not to close the same cycle again."""
        for attempt in range(CLAIM_ATTEMPTS):
            try:
                return take()
            except DatabaseBusy as exc:
                if attempt == CLAIM_ATTEMPTS - 1:
                    raise
                if exc.victim:
                    time.sleep(pause_before_rerun(attempt + 1))
        raise AssertionError("unreachable")

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
        # At worst a lease it renewed and then lost to a rollback waits one more lease.
        rows = self._tried_again_when_busy(lambda: self._run(
            "take_expired_leases", limit=limit, lease_seconds=self.lease_seconds, controller=controller))
        return [
            ExpiredLease(
                id=r["id"], job_name=r["job_name"], parameters=parameters_of(r["parameters"]), attempts=r["attempts"],
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

    def fail_unknown_controllers(self, known: list[str], *, actor: str = "dispatcher") -> list[Row]:
        """Fail the pending rows naming a controller not in ``known`` (nothing is sent anywhere); id and
        controller of each. One cheap read (a skip scan over the controllers with pending rows) when every
        controller is known, whatever the backlog."""
        unknown = [row["controller"] for row in self._run("pending_controllers") if row["controller"] not in known]
        failed: list[Row] = []
        for controller in unknown:
            failed += self._run("fail_rows_of_unknown_controller", controller=controller, actor=actor)
        return failed

    def gauges(self) -> Gauges:
        """Jobs processing; the age of the oldest due pending job; seconds until the next pending job is
        due and until the next lease expires (each None when there is none)."""
        return cast(Gauges, self._run("gauges")[0])

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

    def take_duty(self, name: str, holder: str, hold_seconds: float) -> DutyTurn:
        """Take duty ``name``'s turn for ``holder`` until ``hold_seconds`` from now if it is due, or renew it if
        ``holder`` has it (one statement, a compare-and-set: of several dispatchers racing, one takes it)."""
        row = self._run("take_duty", duty=name, holder=holder, hold_seconds=float(hold_seconds))[0]
        due_in = row["due_in_seconds"]
        return DutyTurn(taken=bool(row["taken"]), due_in_seconds=None if due_in is None else float(due_in))

    def duty_done(self, name: str, holder: str, every_seconds: float) -> bool:
        """Hand duty ``name``'s turn back, due again in ``every_seconds``; False when ``holder`` no longer held it."""
        return bool(self._run("duty_done", duty=name, holder=holder, every_seconds=float(every_seconds)))
