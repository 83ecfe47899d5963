"""A job's story in one sentence, told first on its page ("built as eu #72, waited 41s, ran 3m12s: SUCCESS"), from
its row and its history. Pure: the moments are read from the history the page already has.

The moments: when it last became pending (its insert, or a retry that sent it back), when Jenkins took its trigger
after that (``triggered``, or ``adopted`` by the reconciler), when its build began (``started``) and when it ended
(the row's ``finished_at``). The wait runs from the first to the second, the build from the third to the fourth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .display import duration_exact

FINAL = ("completed", "failed", "cancelled")
SENT = ("triggered", "adopted")


def phase(row: Mapping[str, Any]) -> str | None:
    """Where a row in flight is (None for the others): claimed and sent but Jenkins has not said it has it yet,
    in Jenkins's queue, or building — `processing` alone does not tell them apart."""
    if row["status"] != "processing":
        return None
    if row.get("build_number") is not None:
        return "building"
    return "queued in Jenkins" if row.get("jenkins_queue_id") is not None else "waiting for Jenkins"


def _moment(events: Sequence[Mapping[str, Any]], names: Sequence[str], after: int) -> datetime | None:
    """The first event among ``names`` after the event with id ``after``: its moment."""
    return next((e["at"] for e in events if e["id"] > after and e["event"] in names), None)


def _became_pending(events: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The event that last made the row pending anew: its insert, or a retry of a final row."""
    return next((e for e in reversed(events)
                 if e["to_status"] == "pending" and (e["from_status"] is None or e["from_status"] in FINAL)), None)


def _span(start: Any, end: Any) -> str | None:
    """The time from ``start`` to ``end``; None when either is unknown, or a time no datetime holds (``OddTime``: a
    MySQL zero date, a year past 9999), which tells no duration."""
    if not isinstance(start, datetime) or not isinstance(end, datetime):
        return None
    return duration_exact((end - start).total_seconds())


def job_story(row: Mapping[str, Any], events: Sequence[Mapping[str, Any]], now: datetime,
              name_controller: bool) -> str:
    """One sentence: what became of the job and how long each part took. ``name_controller``: say which Jenkins
    (when several are configured)."""
    pending = _became_pending(events)
    since = pending["at"] if pending else row.get("created_at")
    after = pending["id"] if pending else 0
    sent = _moment(events, SENT, after)
    started = _moment(events, ("started",), after) or (row.get("started_at") if sent is not None else None)
    finished = row.get("finished_at")
    where = f"{row.get('controller') or 'default'} " if name_controller else ""
    build = f"{where}#{row['build_number']}" if row.get("build_number") is not None else None
    waited = _span(since, sent)
    status = row["status"]
    if status == "pending":
        return f"waiting for {_span(since, now) or 'a moment'}" + (
            f" (attempt {row['attempts'] + 1} of {row['max_attempts']})" if row.get("attempts") else "")
    if status == "processing":
        if sent is None:
            return "being sent to Jenkins" + (f" {where.strip()}" if where else "")
        if build is None or started is None:
            return f"queued in Jenkins{' ' + where.strip() if where else ''} for {_span(sent, now)}, waited {waited}"
        return f"building as {build} for {_span(started, now)}, waited {waited}"
    parts = [f"built as {build}" if build else ("cancelled" if status == "cancelled" else "never built")]
    if waited:
        parts.append(f"waited {waited}")
    elif status == "cancelled" and since is not None and finished is not None:
        parts.append(f"after waiting {_span(since, finished)}")
    if build and (ran := _span(started, finished)):
        parts.append(f"ran {ran}")
    outcome = row.get("jenkins_result") or status
    if build and status == "cancelled":
        outcome = "cancelled"
    return ", ".join(parts) + f": {outcome}"
