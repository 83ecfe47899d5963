"""The queue at a glance for the web page's overview: the same reads `stats` makes (counts, per-controller and
per-job caps, pauses, dispatchers), plus the oldest pending job with why it waits, Jenkins as last seen and the
recent hours' outcomes. A handful of statements, each on a partial index or a bounded window of finished_at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config import DEFAULT_CONTROLLER, Settings
from ..store.queue import Pause
from ..store.reports import Reports
from ..store.rows import Dispatcher, JenkinsOutage
from .operator import Caps, why_rows_wait
from .waiting import UNKNOWN_CONTROLLER_STATE, controller_health, not_configured_text

THROUGHPUT_HOURS = 12


@dataclass(frozen=True)
class JenkinsHealth:
    """Jenkins as the live dispatchers last found it. ``state``: up · down · unknown (no live dispatcher)."""

    state: str
    since: datetime | None = None
    reason: str | None = None
    seen_by: str | None = None


def jenkins_health(outage: JenkinsOutage | None, dispatchers: Sequence[Dispatcher]) -> JenkinsHealth:
    """Pure: the outage a live dispatcher recorded wins; else up when some dispatcher is live, else unknown."""
    if outage is not None:
        return JenkinsHealth("down", outage["since"], outage.get("reason"), outage.get("dispatcher_id"))
    live = [d for d in dispatchers if d["live"]]
    if live:
        return JenkinsHealth("up", seen_by=live[0]["id"])
    return JenkinsHealth("unknown")


def hourly(rows: Sequence[Mapping[str, Any]], hours: int, now: datetime) -> list[dict[str, Any]]:
    """Pure: one entry per hour of the window, oldest first, hours without outcomes as zeros."""
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    found = {r["hour"].astimezone(UTC): r for r in rows}
    window = []
    for back in range(hours - 1, -1, -1):
        hour = current - timedelta(hours=back)
        row = found.get(hour, {})
        window.append({"hour": hour, **{k: int(row.get(k) or 0) for k in ("completed", "failed", "cancelled")}})
    return window


def controller_rows(per_controller: Sequence[Mapping[str, Any]], configured: Mapping[str, int | None],
                    paused: set[str], breakers: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Pure: `stats`' per-controller lines (and the page's): every configured controller (``configured``: name →
    its own cap, None for none), every controller some unfinished row names and every one paused as a whole
    (``paused``: a pause outlives the rows and the configuration, and must be seen to be lifted), each with its
    pending, due and in-flight rows, its cap, its state (a name no configuration knows, paused, or ok) and its
    breaker as the live dispatchers recorded it (``breakers``, waiting.controller_health; "unknown" when none
    did), and for one not configured what that means for its rows (``note``)."""
    counts = {r["controller"]: r for r in per_controller}
    rows = []
    for name in sorted(set(configured) | set(counts) | paused):
        found = counts.get(name, {})
        state = ("not configured" if configured and name not in configured
                 else "paused" if name in paused else "ok")
        pending, in_flight = found.get("pending", 0), found.get("in_flight", 0)
        rows.append({"controller": name, "pending": pending, "due": found.get("due", 0),
                     "in_flight": in_flight, "cap": configured.get(name), "state": state,
                     "jenkins": dict((breakers or {}).get(name) or UNKNOWN_CONTROLLER_STATE),
                     # What its state means for its rows, when it is not configured (None otherwise).
                     "note": not_configured_text(name, in_flight=in_flight, pending=pending)
                     if state == "not configured" else None})
    return rows


def controllers_of(queue: Reports, settings: Settings, pauses: Sequence[Pause],
                   dispatchers: Sequence[Dispatcher]) -> list[dict[str, Any]]:
    """Each controller's line, as `stats` and the page show it: its rows (one read), its cap (as the live dispatchers
    recorded it, else as configured here: ``Caps.recorded_by``), whether a pause holds it back as a whole, and its
    breaker as the live dispatchers recorded it."""
    return controller_rows(queue.stats_per_controller(), Caps.of(settings).recorded_by(dispatchers).per_controller,
                           {p.controller for p in pauses if p.job_name is None and p.controller},
                           controller_health(dispatchers))


def controllers_on_the_page(rows: Sequence[Mapping[str, Any]], pauses: Sequence[Pause]) -> list[dict[str, Any]]:
    """Pure: the overview's controllers, each with the pause holding it back as a whole (None: none) — or none at
    all when there is only the default controller and nothing pauses it (as `stats`, which then shows none; a
    pause of the default controller alone is shown, else the page would hide what holds every row back)."""
    whole = {p.controller: p for p in pauses if p.job_name is None and p.controller is not None}
    if not whole and all(r["controller"] == DEFAULT_CONTROLLER for r in rows):
        return []
    return [dict(r, pause=whole.get(r["controller"])) for r in rows]


def with_rates(per_job: Sequence[Mapping[str, Any]], limits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pure: the overview's jobs (the default controller's, as their caps), each with its rate (``rate``, None: none)
    and its starts of the last minute (``started_last_minute``, counted only while it has a rate). A job with a
    limits row is listed under the name that row was given, so the names match as they are."""
    rates = {r["job_name"]: r for r in limits
             if r["controller"] == DEFAULT_CONTROLLER and r["per_minute"] is not None}
    return [dict(j, rate=rates[j["job_name"]]["per_minute"] if j["job_name"] in rates else None,
                 started_last_minute=int(rates[j["job_name"]]["started_last_minute"]) if j["job_name"] in rates
                 else 0)
            for j in per_job]


def other_controllers_limits(limits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pure: the caps and rates of controllers other than the default, whose jobs' table (and levers) the overview
    does not hold: by controller, then job, as `limits ls` lists them."""
    return sorted((dict(r) for r in limits if r["controller"] != DEFAULT_CONTROLLER),
                  key=lambda r: (r["controller"], r["job_name"].lower()))


def queue_overview(queue: Reports, settings: Settings, hours: int = THROUGHPUT_HOURS) -> dict[str, Any]:
    """Everything the overview shows, as plain data."""
    totals = queue.stats()
    limits = queue.limits()
    per_job = with_rates(queue.stats_per_job(), limits)
    pauses: list[Pause] = queue.pauses()
    paused_controllers = [p for p in pauses if p.job_name is None and p.controller is not None]
    dispatchers = queue.dispatchers()
    controllers = controllers_of(queue, settings, pauses, dispatchers)
    outage = queue.jenkins_outage()
    oldest = queue.oldest_pending()
    waiting = None
    if oldest is not None:
        [reason] = why_rows_wait(queue, [oldest], Caps.of(settings))
        waiting = reason.as_dict() if reason else None
    throughput = hourly(queue.finished_per_hour(hours), hours, datetime.now(UTC))
    return {
        "totals": totals,
        "jobs": per_job,
        "other_controllers_limits": other_controllers_limits(limits),
        "global_cap": settings.max_in_flight,
        "everything_paused": next((p for p in pauses if p.job_name is None and p.controller is None), None),
        "paused_jobs": [p for p in pauses if p.job_name is not None],
        # Whole controllers paused for maintenance (`pause --controller C`).
        "paused_controllers": paused_controllers,
        "controllers": controllers_on_the_page(controllers, pauses),
        "dispatchers": dispatchers,
        "jenkins": jenkins_health(outage, dispatchers),
        "oldest_pending": oldest,
        "oldest_waiting": waiting,
        "throughput": throughput,
    }
