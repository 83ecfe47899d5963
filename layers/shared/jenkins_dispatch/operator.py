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
        from .jenkins_answers import job_path

        base = settings.jenkins.url
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
    from .jenkins import JenkinsClient

    js = settings.require_jenkins()
    with JenkinsClient(js.url, js.user, js.api_token, js.timeout_seconds, verify_tls=js.verify_tls,
                       search_window=js.search_window) as client:
        if row.get("build_number") is not None:
            client.stop_build(row["job_name"], row["build_number"])
            return f"stopped Jenkins build #{row['build_number']}"
        queue_id = row.get("jenkins_queue_id")
        if queue_id is None:
            found = client.find_by_dispatch_id(row["job_name"], row["dispatch_id"])
            if found is not None and getattr(found, "build_number", None) is not None:
                client.stop_build(row["job_name"], found.build_number)
                return f"stopped Jenkins build #{found.build_number}"
            queue_id = getattr(found, "queue_id", None) if found is not None else None
            if queue_id is None:
                return "nothing found in Jenkins to stop"
        outcome = client.cancel_queue_item(queue_id)
        name = type(outcome).__name__
        if name == "AlreadyStarted":
            raise DispatchError(f"Jenkins queue item {queue_id} already started a build; try cancel again")
        return f"cancelled Jenkins queue item {queue_id} ({name})"
