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
    first, then the row is settled (fenced, so a build finishing meanwhile wins). A build that had already
    finished settles the row with its real result. A row whose trigger is still in flight (Jenkins shows
    nothing yet) keeps processing with the cancel recorded: the dispatcher or the reconciler cancels it in
    Jenkins as soon as it lands there, then settles it."""
    row = queue.get(job_id)
    if row["status"] in FINAL_STATUSES:
        raise Conflict(f"job {job_id} is already {row['status']}")
    if row["status"] == "pending":
        if queue.cancel_pending(job_id, reason):
            return {"id": job_id, "status": "cancelled", "message": f"job {job_id} cancelled (it was pending)"}
        row = queue.get(job_id)  # it was claimed meanwhile: cancel it in Jenkins below
        if row["status"] != "processing":
            raise Conflict(f"job {job_id} is now {row['status']}; nothing cancelled")

    # Jenkins's client only when cancelling, not for `show`.
    from .cancelling import settle_stopped, stop_dispatch
    from .dispatcher import jenkins_client
    from .jenkins import JenkinsError

    with jenkins_client(settings) as client:
        try:
            stopped = stop_dispatch(client, row["job_name"], row["dispatch_id"], row.get("jenkins_queue_id"),
                                    row.get("build_number"))
        except JenkinsError:
            raise
        except DispatchError as exc:
            raise DispatchError(f"cannot cancel job {job_id} in Jenkins: {exc}") from None
    if not stopped.found:
        # Its trigger may still be on its way to Jenkins: settling now would orphan the build it creates.
        if queue.request_cancel(job_id, row["dispatch_id"], reason):
            note = ("cancel requested: its trigger is still on its way to Jenkins; it will be cancelled there as "
                    "soon as it lands (or settled cancelled if it never does)")
            return {"id": job_id, "status": "processing", "jenkins": "nothing found in Jenkins yet", "message":
                    f"job {job_id}: {note}"}
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling")
    status = settle_stopped(queue, job_id, row["dispatch_id"], stopped, reason, actor="operator",
                            unstable_is_success=settings.unstable_is_success)
    if status is None:
        now = queue.get(job_id)
        raise Conflict(f"job {job_id} became {now['status']} while cancelling ({stopped.note})")
    message = (f"job {job_id} cancelled: {stopped.note}" if status == "cancelled"
               else f"job {job_id} had already finished: settled {status} ({stopped.note})")
    return {"id": job_id, "status": status, "jenkins": stopped.note, "message": message}
