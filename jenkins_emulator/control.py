"""The control API under ``/_emulator/``: how a test or another process steers a running emulator and reads its
state and counters (the endpoints are listed in the package docstring).

Owns what each endpoint does and answers; ``JenkinsEmulator``'s Python methods for tests call the same functions.
Must not route Jenkins URLs or check credentials (no auth here: never expose an emulator beyond localhost).
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from .faults import Faults
from .model import Jenkins, Job
from .views import Response, build_json, json_response, queue_item_json

PREFIX = "/_emulator/"


def counters_json(jenkins: Jenkins) -> dict[str, Any]:
    """Triggers per DISPATCH_ID and per parameter value, items (and when each job's were created: the rate
    Jenkins saw), builds, peaks in flight, notifications, and the requests answered 503 during a restart window."""
    with jenkins.lock:
        counters = jenkins.counters
        return {
            "trigger_requests": counters["trigger_requests"],
            "items_created": counters["items_created"],
            "merged_requests": counters["merged_requests"],
            "builds_started": counters["builds_started"],
            "triggers_by_dispatch_id": dict(counters["triggers_by_dispatch_id"]),
            "triggers_by_parameter": {k: dict(v) for k, v in counters["triggers_by_parameter"].items()},
            "peak_in_flight": counters["peak_in_flight"],
            "peak_in_flight_by_job": dict(counters["peak_in_flight_by_job"]),
            "in_flight": jenkins.in_flight(),
            "in_flight_by_job": {path: jenkins.in_flight(job) for path, job in jenkins.jobs.items()},
            "notifications": dict(jenkins.notifier.counters),
            "unavailable_answers": counters["unavailable_answers"],
            "items_created_at_by_job": {path: list(times) for path, times in counters["items_created_at_by_job"].items()},
        }


def state_json(jenkins: Jenkins, faults: Faults, base_url: str) -> dict[str, Any]:
    """Settings, users, faults, the queue, jobs with their builds, and the counters."""
    with jenkins.lock:
        return {
            "base_url": base_url,
            "settings": asdict(jenkins.settings),
            "quieting_down": jenkins.quieting_down,
            "users": {name: {"permissions": account["permissions"].as_spec()} for name, account in jenkins.users.items()},
            "faults": [asdict(f) for f in faults.snapshot()],
            "queue": [queue_item_json(jenkins, i) for i in sorted(jenkins.items.values(), key=lambda i: i.id)],
            "jobs": {
                path: {
                    **{f.name: getattr(job, f.name) for f in fields(job) if f.name not in ("builds", "parameters")},
                    "parameters": [asdict(d) for d in job.parameters],
                    "builds": [build_json(jenkins, b) for b in sorted(job.builds.values(), key=lambda b: b.number)],
                }
                for path, job in jenkins.jobs.items()
            },
            "counters": counters_json(jenkins),
        }


def set_user(jenkins: Jenkins, name: str, **changes: Any) -> dict[str, Any]:
    """Add a user or change its api_token, password or permissions; answers its name and permissions."""
    account = jenkins.set_user(name, **changes)
    return {"name": name, "permissions": account["permissions"].as_spec()}


def restart(jenkins: Jenkins, faults: Faults, window_seconds: float = 1.0, kind: str = "restarting") -> None:
    """Answer 503 for ``window_seconds`` (kind "restarting" or "starting"), then come back like a restarted
    Jenkins: new session id and cookie name, crumbs invalid, left items forgotten."""
    faults.be_unavailable(window_seconds, kind)
    jenkins.restart()


def control_answer(jenkins: Jenkins, faults: Faults, base_url: str, method: str, path: str, body: bytes) -> Response:
    """The answer to ``method /_emulator/<path>`` with a JSON ``body``: 400 for a bad body, 404 for no endpoint."""
    try:
        payload = json.loads(body) if body.strip() else {}
    except ValueError:
        return json_response({"error": "the body is not JSON"}, 400)
    try:
        if method == "GET" and path in ("state", "counters"):
            return json_response(state_json(jenkins, faults, base_url) if path == "state" else counters_json(jenkins))
        if method != "POST":
            return json_response({"error": f"unknown control endpoint {method} {PREFIX}{path}"}, 404)
        if path == "faults":
            specs = payload if isinstance(payload, list) else [payload]
            added = [faults.add(**spec) for spec in specs]
            return json_response({"faults": [asdict(f) for f in added]})
        if path == "faults/clear":
            faults.clear()
            return json_response({"faults": []})
        if path == "faults/release":
            faults.release_all()
            return json_response({"faults": [asdict(f) for f in faults.snapshot()]})
        if path == "config":
            jenkins.configure(**payload)
            return json_response({"ok": True})
        if path == "users":
            if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
                raise ValueError('a user object needs its "name"')
            return json_response(set_user(jenkins, payload.pop("name"), **payload))
        if path == "jobs":
            known = isinstance(jenkins.find(str(payload.get("path", ""))), Job)  # found whatever its case, as Jenkins does
            job = jenkins.set_job(payload.pop("path"), **payload) if known else jenkins.add_job(payload)
            return json_response({"path": job.path})
        if path == "restart":
            restart(jenkins, faults, float(payload.get("window_seconds", 1.0)), payload.get("kind", "restarting"))
            return json_response({"ok": True})
        if path == "counters/reset":
            jenkins.reset_counters()
            return json_response(counters_json(jenkins))
    except (TypeError, ValueError, KeyError) as exc:
        return json_response({"error": f"{type(exc).__name__}: {exc}"}, 400)
    return json_response({"error": f"unknown control endpoint {method} {PREFIX}{path}"}, 404)
