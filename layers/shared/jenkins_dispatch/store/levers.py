"""The levers' store: what an operator changes. Pauses of jobs and controllers, cancels and retries of rows
(one by one, or a bulk selection), caps and rates with their history (``levers.sql``), and pruning the finished history (``Pruning``, shared with the
dispatchers' pruner duty). An operator acts on what the reports show and settles a row it cancels without Jenkins,
so the levers are ``Reports`` and ``Outcomes`` too.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from .. import inputs
from ..config import DEFAULT_CONTROLLER
from ..errors import Conflict, InvalidInput
from ..jenkins.jobs import job_name_error
from .db import DatabaseError
from .filters import like_contains, parameter_slots, time_filter
from .outcomes import Outcomes
from .pruning import Pruning
from .queue import EVERYTHING, FINAL_STATUSES, LimitSet, Pause, PauseResult, ResumeResult
from .reports import Reports
from .rows import MatchedJob
from .runner import constraint_message, named, refuse


def _pause_key(job_name: str | None) -> str:
    """The stored name of a pause of ``job_name`` (None: everything), refusing names no job can have."""
    if job_name is None:
        return EVERYTHING
    if not isinstance(job_name, str) or not job_name.strip():
        raise InvalidInput("job name must not be empty")
    if job_name.strip() == EVERYTHING:
        raise InvalidInput(f"{EVERYTHING!r} is reserved: give no job name to pause or resume everything")
    return job_name


class Levers(Reports, Outcomes, Pruning):
    """An operator's changes to the queue, on one database session."""

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
                raise InvalidInput(constraint_message(exc)) from exc
            raise
        if not rows:  # a concurrent pause of this job committed after the statement's snapshot: look again
            return self.pause(job_name, reason=reason, paused_by=paused_by, controller=controller)
        row = rows[0]
        return PauseResult(**vars(Pause.from_row(row)), created=row["created"], pending=row["pending"])

    def resume(self, job_name: str | None, *, controller: str | None = None) -> ResumeResult:
        """Lift the pause of ``job_name`` (None: the pause of everything; each job's own pause stays) given for
        ``controller`` (None: the pause of every controller; a controller's own pauses stay, and the other way
        round). Two round trips: the resume, then the pauses left."""
        key = _pause_key(job_name)
        row = self._run("resume_job", job_name=key, controller=controller)[0]
        return ResumeResult(job_name=job_name, resumed=row["resumed"] > 0, pending=row["pending"],
                            still_paused=self.pauses(), controller=controller)

    def request_cancel(self, job_id: int, dispatch_id: str, reason: str, *, actor: str = "operator") -> bool:
        """Record a cancel for a processing row whose trigger is in flight (False: it is no longer so)."""
        return bool(self._run("request_cancel", id=job_id, dispatch_id=dispatch_id, reason=reason, actor=actor))

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
            since=time_filter(since), **parameter_slots(parameters),
            error_pattern=like_contains(error_like) if error_like is not None else None, limit=limit,
        )
        total = rows[0]["total"] if rows else 0
        return [cast(MatchedJob, {k: v for k, v in r.items() if k != "total"}) for r in rows], total

    def set_limit(self, job_name: str, max_in_flight: int, controller: str = DEFAULT_CONTROLLER, *,
                  changed_by: str | None = None) -> LimitSet:
        """Set a job's cap of rows in flight on ``controller`` (0 holds it back), recorded in the caps' history
        with ``changed_by``: whether it changed, and the cap it replaced. A cap the job already has (under any
        spelling of its name) changes nothing and records nothing."""
        refuse(job_name_error(job_name), named("max_in_flight", inputs.CAP.error(max_in_flight)))
        rows = self._run("set_limit", job_name=job_name, max_in_flight=max_in_flight, controller=controller,
                         changed_by=changed_by)
        return LimitSet(changed=True, previous=rows[0]["previous"]) if rows else LimitSet(False, max_in_flight)

    def remove_limit(self, job_name: str, controller: str = DEFAULT_CONTROLLER, *,
                     changed_by: str | None = None) -> bool:
        """Remove a job's cap on ``controller`` (recorded in the caps' history; its rate, if any, stays); False when
        it had none."""
        return bool(self._run("remove_limit", job_name=job_name, controller=controller, changed_by=changed_by))

    def set_key_limit(self, concurrency_key: str, max_in_flight: int, *, supersede: bool | str = False) -> LimitSet:
        """Cap the rows holding ``concurrency_key`` in flight, whatever their job or controller (0 holds them
        back); ``supersede``: newest wins, the next claim cancels the key's older pending rows ("running": and asks
        for the cancel of its older rows in flight, which the reconciler stops in Jenkins). Whether it changed, and
        the cap it replaced. A key already so changes nothing."""
        if supersede not in (False, True, "pending", "running"):
            raise InvalidInput(f"supersede: pending or running, got {supersede!r}")
        refuse(inputs.row_key_error("concurrency", concurrency_key),
               named("max_in_flight", inputs.CAP.error(max_in_flight)))
        rows = self._run("set_key_limit", concurrency_key=concurrency_key, max_in_flight=max_in_flight,
                         supersede=bool(supersede), stop_running=supersede == "running")
        return LimitSet(changed=True, previous=rows[0]["previous"]) if rows else LimitSet(False, max_in_flight)

    def remove_key_limit(self, concurrency_key: str) -> bool:
        """Remove the cap of ``concurrency_key``; False when it had none."""
        return bool(self._run("remove_key_limit", concurrency_key=concurrency_key))

    def set_key_rule(self, job_name: str, *, concurrency_template: str | None = None,
                     fairness_template: str | None = None, changed_by: str | None = None) -> None:
        """The keys ``job_name``'s rows are given when their INSERT leaves them out, from their parameters
        (``deploy:{ENV}``: the parameter ENV; ``{job}``: the job name), on every controller, whoever inserts them; it
        replaces the job's rule whole. Rows already queued keep what they have."""
        if concurrency_template is None and fairness_template is None:
            raise InvalidInput("give a concurrency key template, a fairness key template, or both")
        refuse(job_name_error(job_name),
               None if concurrency_template is None else inputs.key_template_error("concurrency", concurrency_template),
               None if fairness_template is None else inputs.key_template_error("fairness", fairness_template))
        self._run("set_key_rule", job_name=job_name, concurrency_template=concurrency_template,
                  fairness_template=fairness_template, changed_by=changed_by)

    def remove_key_rule(self, job_name: str) -> bool:
        """Remove ``job_name``'s key rule (rows queued with derived keys keep them); False when it had none."""
        return bool(self._run("remove_key_rule", job_name=job_name))

    def set_rate(self, job_name: str, per_minute: int, controller: str = DEFAULT_CONTROLLER, *,
                 changed_by: str | None = None) -> LimitSet:
        """Set a job's rate on ``controller``: no set of dispatchers starts more than ``per_minute`` of its rows in
        any 60 s (enforced by the capped claim, as caps are). Its cap, if any, stays. Recorded in the caps' history
        with ``changed_by``: whether it changed, and the rate it replaced. A rate the job already has changes
        nothing and records nothing (a cap of 0, not a rate, holds a job back)."""
        refuse(job_name_error(job_name), named("per_minute", inputs.RATE.error(per_minute)))
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

    def pending_count(self, job_name: str | None) -> int:
        """Pending rows of ``job_name`` (every spelling), or of every job for None: what a pause holds back."""
        return int(self._run("pending_of", job_name=_pause_key(job_name))[0]["pending"])
