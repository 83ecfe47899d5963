"""Cancelling one dispatch in Jenkins, then settling its row — the same steps for `cancel` (operator),
the dispatcher (it learns the queue id of a row an operator cancelled while its trigger was in flight)
and the reconciler (it finds such a row after its lease).

Outcomes, and how the row ends:
- a queue item cancelled, or a running build asked to stop → ``cancelled``;
- the build had already finished → settled from the build's real result (``decisions.final_status``),
  saying the cancel came too late;
- nothing in Jenkins once our request for it has ended (after the lease) → ``cancelled``; Jenkins may still act
  on that request later, so the reconciler watches such a row and cancels or stops a late arrival
  (``Reconciler._watch_recently_finished``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DispatchError, SearchInconclusive
from ..jenkins.answers import Finished
from ..jenkins.client import CancelResult, JenkinsClient
from ..store.outcomes import Outcomes
from .decisions import build_error, final_status


@dataclass(frozen=True)
class Stopped:
    """What cancelling one dispatch in Jenkins did, and how its row should end."""
    note: str  # what was done in Jenkins, for the row's last_error and the history
    result: str | None = None  # the build had finished with this result: settle from it, not 'cancelled'
    build_number: int | None = None
    build_url: str | None = None
    found: bool = True  # False: Jenkins shows nothing of this dispatch


def stop_dispatch(client: JenkinsClient, job_name: str, dispatch_id: str, queue_id: int | None,
                  build_number: int | None, since_ms: int | None = None) -> Stopped:
    """Cancel the dispatch's queue item or stop its build, whichever Jenkins has now."""
    if build_number is None and queue_id is not None:
        result = client.cancel_queue_item(queue_id)
        if result is CancelResult.CANCELLED:
            return Stopped(f"cancelled Jenkins queue item {queue_id}")
        if result is CancelResult.NOT_PERMITTED:
            raise DispatchError(f"Jenkins refused to cancel queue item {queue_id}: the user lacks the Cancel permission")
        # It already started, or Jenkins forgot it: look for the build.
    if build_number is None:
        try:
            found = client.find_by_dispatch_id(job_name, dispatch_id, since_ms=since_ms)
        except SearchInconclusive as exc:
            raise DispatchError(f"its queue item or build cannot be found ({exc}); cancel or stop it in Jenkins "
                                "by hand") from None
        if found is None:
            return Stopped("nothing found in Jenkins to stop", found=False)
        if found.build_number is None:
            assert found.queue_id is not None  # found in the queue, not among the builds: an item has its id
            if client.cancel_queue_item(found.queue_id) is CancelResult.CANCELLED:
                return Stopped(f"cancelled Jenkins queue item {found.queue_id}")
            raise DispatchError(f"could not cancel Jenkins queue item {found.queue_id}; try again")
        if not found.building and found.result is not None:
            return Stopped(f"Jenkins build #{found.build_number} had already finished ({found.result})",
                           result=found.result, build_number=found.build_number, build_url=found.build_url)
        build_number = found.build_number
    state = client.build(job_name, build_number)
    if isinstance(state, Finished):
        return Stopped(f"Jenkins build #{build_number} had already finished ({state.result})",
                       result=state.result, build_number=build_number, build_url=state.url)
    client.stop_build(job_name, build_number)
    return Stopped(f"asked Jenkins to stop build #{build_number}", build_number=build_number)


def settle_stopped(queue: Outcomes, row_id: int, dispatch_id: str, stopped: Stopped, reason: str, *, actor: str,
                   unstable_is_success: bool = True) -> str | None:
    """Settle the row as ``stopped`` says; returns the status it reached (None: fenced out)."""
    if stopped.result is not None:
        status = final_status(stopped.result, unstable_is_success)
        error = build_error(stopped.result, stopped.build_number, unstable_is_success)
        note = f"{reason}, but {stopped.note}"
        settled = queue.settle(row_id, dispatch_id, status, result=stopped.result,
                               error=f"{error}; {note}" if error else note,
                               build_number=stopped.build_number, build_url=stopped.build_url, actor=actor)
        return status if settled else None
    settled = queue.settle(row_id, dispatch_id, "cancelled", error=f"{reason}; {stopped.note}",
                           build_number=stopped.build_number, actor=actor)
    return "cancelled" if settled else None
