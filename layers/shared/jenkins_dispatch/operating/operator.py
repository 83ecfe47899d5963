"""What an operator asks of one job: everything about it, and cancelling it (in Jenkins too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import Conflict, DispatchError
from ..jenkins.controllers import controller_name, controllers_told_apart, is_configured, links_for
from ..store.levers import Levers
from ..store.queue import FINAL_STATUSES
from ..store.reports import Reports
from .story import job_story
from .transitions import ALREADY, CANCEL, RETRY, verdict
from .waiting import JenkinsOutage, Waiting, controller_health, jenkins_outage_for, stranded_text, why_waiting


@dataclass(frozen=True)
class Caps:
    """The caps a pending row is held to besides its job's: MAX_IN_FLIGHT and each controller's own max_in_flight
    (by name; None: none). ``Caps()``: none."""

    global_cap: int | None = None
    per_controller: Mapping[str, int | None] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> Caps:
        """The caps as configured here: every controller by name, with its own cap or None."""
        return cls(settings.max_in_flight, {name: c.max_in_flight for name, c in settings.controllers_by_name().items()})

    def recorded_by(self, dispatchers: Sequence[Mapping[str, Any]]) -> Caps:
        """The caps the live dispatchers hold rows to, as their heartbeats recorded them (``Reports.dispatchers`` or
        ``WaitingContext.dispatchers``): the controllers they serve, and for each the loosest of their caps (a row
        waits only while no dispatcher may claim it; None, no cap, is the loosest). Whoever asks (a CLI, the page)
        may run with other settings than the dispatchers: these caps (its own) count only while no live dispatcher
        recorded any."""
        recorded = [controllers for d in dispatchers if d.get("live")
                    for controllers in [d.get("controllers") or {}]
                    if controllers and all("max_in_flight" in state for state in controllers.values())]
        if not recorded:
            return self
        served: dict[str, list[int | None]] = {}
        global_caps: list[int | None] = []
        for controllers in recorded:
            for name, state in controllers.items():
                served.setdefault(name, []).append(state.get("own_max_in_flight"))
                global_caps.append(state.get("max_in_flight"))
        return Caps(_loosest(global_caps), {name: _loosest(caps) for name, caps in served.items()})


def _loosest(caps: Sequence[int | None]) -> int | None:
    """The cap that lets most through: None (no cap) if any has none, else the largest."""
    return None if any(cap is None for cap in caps) else max(cast(list[int], caps))


def why_rows_wait(queue: Reports, rows: Sequence[Mapping[str, Any]], caps: Caps,
                  jenkins_unavailable: JenkinsOutage | None = None) -> list[Waiting | None]:
    """Why each pending row of ``rows`` waits (None for the others): one statement for all of them, none
    when no row is pending. Each row is held to its own controller's job caps, rates and cap (``caps``).
    ``jenkins_unavailable``: Jenkins failing as a whole; by default what the live dispatchers last recorded in
    their heartbeats."""
    keys = [(r.get("controller") or DEFAULT_CONTROLLER, r["job_name"]) for r in rows]
    pending = [key for r, key in zip(rows, keys, strict=True) if r["status"] == "pending"]
    if not pending:
        return [None] * len(rows)
    context = queue.waiting_context(pending)
    keyed = [r["concurrency_key"] for r in rows if r["status"] == "pending" and r.get("concurrency_key")]
    holds = queue.key_holds(keyed) if keyed else {}
    given = jenkins_unavailable is not None
    if jenkins_unavailable is None and context.jenkins_unavailable_since is not None:
        jenkins_unavailable = JenkinsOutage(since=context.jenkins_unavailable_since,
                                            reason=context.jenkins_reason or "no reason recorded")
    # Each row waits for its own controller's Jenkins, as the live dispatchers recorded it (a caller's outage wins).
    health = {} if given else controller_health(context.dispatchers)
    now = datetime.now(UTC)
    caps = caps.recorded_by(context.dispatchers)
    configured = list(caps.per_controller)
    counted = context.counted_in_flight(configured)
    return [
        why_waiting(r, now, job_cap=context.caps.get((controller, job_name)),
                    job_in_flight=context.in_flight.get((controller, job_name), 0),
                    global_cap=caps.global_cap, total_in_flight=counted,
                    controller_configured=not configured or controller in caps.per_controller,
                    dispatchers_live=context.live_dispatchers,
                    pause=context.pause_of(job_name, controller),
                    jenkins_unavailable=jenkins_outage_for(controller, health, jenkins_unavailable),
                    rate=context.rates.get((controller, job_name)), controller_cap=caps.per_controller.get(controller),
                    controller_in_flight=context.controllers_in_flight.get(controller, 0),
                    key=holds.get(r.get("concurrency_key") or ""))
        for r, (controller, job_name) in zip(rows, keys, strict=True)
    ]


def list_jobs_waiting(queue: Reports, caps: Caps, *, jenkins_unavailable: JenkinsOutage | None = None,
                      **filters: Any) -> list[dict[str, Any]]:
    """``Reports.list_jobs`` (same filters), each row with ``waiting``: why it is not in Jenkins yet (a dict,
    see ``Waiting``), or None when it is not pending. Two statements for the page."""
    rows = queue.list_jobs(**filters)
    reasons = why_rows_wait(queue, rows, caps, jenkins_unavailable)
    return [dict(r, waiting=w.as_dict() if w else None) for r, w in zip(rows, reasons, strict=True)]


def job_details(queue: Levers, job_id: int, settings: Settings,
                jenkins_unavailable: JenkinsOutage | None = None) -> dict[str, Any]:
    """Everything about one job: the row, its story in one sentence (``story.job_story``), its Jenkins links, why it
    waits (None unless pending; see ``waiting.why_waiting``), why it is stranded (None unless it is in flight on a
    controller no longer configured) and its history."""
    row = queue.get(job_id)
    [waiting] = why_rows_wait(queue, [row], Caps.of(settings), jenkins_unavailable)
    stranded = None
    if row["status"] == "processing":
        configured = Caps.of(settings).recorded_by(queue.dispatchers()).per_controller
        if configured and controller_name(row) not in configured:
            stranded = stranded_text(controller_name(row), job_id)
    history = queue.events(job_id)
    named = controllers_told_apart(settings.controllers_by_name(), [row])
    return {"job": row, "story": job_story(row, history, datetime.now(UTC), named), "links": links_for(settings, row),
            "waiting": waiting.as_dict() if waiting else None, "stranded": stranded, "history": history}


def unchanged(job_id: int, status: str) -> dict:
    """The answer to a request for what already holds (``bulk.ALREADY``): nothing changed, and it says so."""
    return {"id": job_id, "status": status, "changed": False,
            "message": f"job {job_id} is already {status}; nothing changed"}


def retry_job(queue: Levers, job_id: int, *, actor: str = "operator", unchanged_since: datetime | None = None) -> dict:
    """A finished job back to pending with fresh attempts; a job already pending is left as it is (and says
    so); one in Jenkins cannot be retried (Conflict). ``unchanged_since``: see ``Levers.retry_final``."""
    try:
        queue.retry_final(job_id, actor=actor, unchanged_since=unchanged_since)
    except Conflict:
        if verdict(RETRY, queue.get(job_id)["status"]) == ALREADY:  # someone retried it first, or it never ended
            return unchanged(job_id, "pending")
        raise
    return {"id": job_id, "status": "pending", "changed": True, "message": f"job {job_id} is pending again"}


def cancel_job(queue: Levers, job_id: int, settings: Settings, reason: str = "cancelled by operator", *,
               actor: str = "operator") -> dict[str, Any]:
    """Pending: cancelled at once. Processing: the Jenkins queue item is cancelled or the build stopped
    first, then the row is settled (fenced, so a build finishing meanwhile wins). A build that had already
    finished settles the row with its real result. A row whose trigger is still in flight (Jenkins shows
    nothing yet) keeps processing with the cancel recorded: the dispatcher or the reconciler cancels it in
    Jenkins as soon as it lands there, then settles it. ``actor``: who the job's history names (the CLI's
    ``operator``, the web page's ``ui``). A job already cancelled is left as it is (``changed`` False)."""
    row = queue.get(job_id)
    if row["status"] in FINAL_STATUSES:
        if verdict(CANCEL, row["status"]) == ALREADY:
            return unchanged(job_id, "cancelled")
        raise Conflict(f"job {job_id} is already {row['status']}: only pending or processing jobs can be cancelled")
    if row["status"] == "pending":
        if queue.cancel_pending(job_id, reason, actor=actor):
            return {"id": job_id, "status": "cancelled", "changed": True,
                    "message": f"job {job_id} cancelled (it was pending)"}
        row = queue.get(job_id)  # it was claimed meanwhile: cancel it in Jenkins below
        if row["status"] != "processing":
            raise Conflict(f"job {job_id} is now {row['status']}; nothing cancelled")

    dispatch_id = row["dispatch_id"]
    assert dispatch_id is not None  # the table's check: a processing row always has its dispatch's id
    if not is_configured(settings, row):
        return _cancel_without_jenkins(queue, row, reason, actor)
    # Jenkins's client only when cancelling, not for `show`.
    from ..dispatching.cancelling import settle_stopped, stop_dispatch
    from ..errors import JenkinsError
    from ..jenkins.controllers import client_for

    with client_for(settings, row) as client:
        try:
            stopped = stop_dispatch(client, row["job_name"], dispatch_id, row.get("jenkins_queue_id"),
                                    row.get("build_number"))
        except JenkinsError:
            raise
        except DispatchError as exc:
            raise DispatchError(f"cannot cancel job {job_id} in Jenkins: {exc}") from None
    if not stopped.found:
        # Its trigger may still be on its way to Jenkins: settling now would orphan the build it creates.
        if queue.request_cancel(job_id, dispatch_id, reason, actor=actor):
            note = ("cancel requested: its trigger is still on its way to Jenkins; it will be cancelled there as "
                    "soon as it lands (or settled cancelled if it never does)")
            return {"id": job_id, "status": "processing", "changed": True, "jenkins": "nothing found in Jenkins yet",
                    "message": f"job {job_id}: {note}"}
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling")
    status = settle_stopped(queue, job_id, dispatch_id, stopped, reason, actor=actor,
                            unstable_is_success=settings.unstable_is_success)
    if status is None:
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling ({stopped.note})")
    message = (f"job {job_id} cancelled: {stopped.note}" if status == "cancelled"
               else f"job {job_id} had already finished: settled {status} ({stopped.note})")
    return {"id": job_id, "status": status, "changed": True, "jenkins": stopped.note, "message": message}


def _cancel_without_jenkins(queue: Levers, row: Mapping[str, Any], reason: str, actor: str) -> dict[str, Any]:
    """Cancel a processing row whose controller is no longer configured: nothing can be asked of or stopped in its
    Jenkins, so the row is settled cancelled, saying so (its build, if any, may still run there)."""
    job_id, controller = row["id"], controller_name(row)
    note = (f"controller {controller!r} is not configured: nothing was cancelled or stopped in its Jenkins "
            "(check it there)")
    if not queue.settle(job_id, row["dispatch_id"], "cancelled", error=f"{reason}; {note}", actor=actor):
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling")
    return {"id": job_id, "status": "cancelled", "changed": True, "jenkins": note,
            "message": f"job {job_id} cancelled: {note}"}
