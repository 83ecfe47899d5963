"""The queue at a glance for the web page's overview: the same reads `stats` makes (counts, per-job caps,
pauses, dispatchers), plus the oldest pending job with why it waits, Jenkins as last seen and the recent
hours' outcomes. A handful of statements, each on a partial index or a bounded window of finished_at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config import Settings
from ..store.queue import Pause, Queue
from ..store.rows import Dispatcher, JenkinsOutage
from .operator import why_rows_wait

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


def queue_overview(queue: Queue, settings: Settings, hours: int = THROUGHPUT_HOURS) -> dict[str, Any]:
    """Everything the overview shows, as plain data."""
    totals = queue.stats()
    per_job = queue.stats_per_job()
    pauses: list[Pause] = queue.pauses()
    dispatchers = queue.dispatchers()
    outage = queue.jenkins_outage()
    oldest = queue.oldest_pending()
    waiting = None
    if oldest is not None:
        [reason] = why_rows_wait(queue, [oldest], settings.max_in_flight)
        waiting = reason.as_dict() if reason else None
    throughput = hourly(queue.finished_per_hour(hours), hours, datetime.now(UTC))
    return {
        "totals": totals,
        "jobs": per_job,
        "global_cap": settings.max_in_flight,
        "everything_paused": next((p for p in pauses if p.job_name is None and p.controller is None), None),
        "paused_jobs": [p for p in pauses if p.job_name is not None],
        # Whole controllers paused for maintenance (`pause --controller C`): for the page to show.
        "paused_controllers": [p for p in pauses if p.job_name is None and p.controller is not None],
        "dispatchers": dispatchers,
        "jenkins": jenkins_health(outage, dispatchers),
        "oldest_pending": oldest,
        "oldest_waiting": waiting,
        "throughput": throughput,
    }
