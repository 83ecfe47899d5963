"""What an operator asks of one job: everything about it, and cancelling it (in Jenkins too)."""

from __future__ import annotations

from .config import Settings
from .errors import Conflict, DispatchError
from .queue import FINAL_STATUSES, Queue


def jenkins_links(settings: Settings, row: dict) -> dict[str, str]:
    links: dict[str, str] = {}
    if row.get("build_url"):
        links["build"] = row["build_url"]
    if settings.jenkins is not None:
        from .jenkins_answers import job_path, job_path_error

        base = settings.jenkins.url
        if job_path_error(row["job_name"]) is None:  # a row written with plain SQL may name no Jenkins item
            links["job"] = base + job_path(row["job_name"])
        if row.get("jenkins_queue_id") is not None and not row.get("build_url"):
            links["queue_item"] = f"{base}queue/item/{row['jenkins_queue_id']}/api/json"
    return links


def job_details(queue: Queue, job_id: int, settings: Settings) -> dict:
    row = queue.get(job_id)
    return {"job": row, "links": jenkins_links(settings, row), "history": queue.events(job_id)}


def cancel_job(queue: Queue, job_id: int, settings: Settings, reason: str = "cancelled by operator") -> dict:
    """Pending: cancelled at once. Processing: the Jenkins queue item is cancelled or the build stopped
    first, then the row is settled 'cancelled' (fenced, so a build finishing meanwhile wins)."""
    row = queue.get(job_id)
    if row["status"] in FINAL_STATUSES:
        raise Conflict(f"job {job_id} is already {row['status']}")
    if row["status"] == "pending":
        if queue.cancel_pending(job_id, reason):
            return {"id": job_id, "status": "cancelled", "message": f"job {job_id} cancelled (it was pending)"}
        row = queue.get(job_id)  # it was claimed meanwhile: cancel it in Jenkins below
        if row["status"] != "processing":
            raise Conflict(f"job {job_id} is now {row['status']}; nothing cancelled")

    jenkins_note = stop_in_jenkins(settings, row)
    if not queue.settle(job_id, row["dispatch_id"], "cancelled", error=f"{reason}; {jenkins_note}", actor="operator"):
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling ({jenkins_note})")
    return {"id": job_id, "status": "cancelled", "jenkins": jenkins_note,
            "message": f"job {job_id} cancelled: {jenkins_note}"}


def stop_in_jenkins(settings: Settings, row: dict) -> str:
    """Cancel the row's Jenkins queue item, or stop its build; says what was done."""
    from .dispatcher import jenkins_client
    from .jenkins import CancelResult, SearchInconclusive

    with jenkins_client(settings) as client:
        number = row.get("build_number")
        queue_id = row.get("jenkins_queue_id")
        if number is None and queue_id is not None:
            result = client.cancel_queue_item(queue_id)
            if result is CancelResult.CANCELLED:
                return f"cancelled Jenkins queue item {queue_id}"
            if result is CancelResult.NOT_PERMITTED:
                raise DispatchError(f"Jenkins refused to cancel queue item {queue_id}: the user lacks the Cancel permission")
            queue_id = None  # it already started, or Jenkins forgot it: look for the build
        if number is None:
            try:
                found = client.find_by_dispatch_id(row["job_name"], row["dispatch_id"])
            except SearchInconclusive as exc:
                raise DispatchError(
                    f"cannot cancel job {row['id']} in Jenkins: its queue item or build cannot be found ({exc}); "
                    f"cancel or stop it in Jenkins by hand"
                ) from None
            if found is None:
                return "nothing found in Jenkins to stop"
            if found.build_number is None:
                if client.cancel_queue_item(found.queue_id) is CancelResult.CANCELLED:
                    return f"cancelled Jenkins queue item {found.queue_id}"
                raise DispatchError(f"could not cancel Jenkins queue item {found.queue_id}; try again")
            if not found.building:
                return f"Jenkins build #{found.build_number} had already finished ({found.result})"
            number = found.build_number
        client.stop_build(row["job_name"], number)
        return f"asked Jenkins to stop build #{number}"
