"""Values as people read them, the same on the command line and the web page: moments (UTC, to the second),
durations (``3h05m``), ages and table cells. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from ..jenkins.jobs import dumps_parameters

NOTHING = "-"  # what a cell with no value shows


def when(moment: datetime) -> str:
    """A moment as people read it in this tool: UTC, to the second. A time no datetime can hold (``OddTime``: past
    the year 9999, BC, a MySQL zero date) is shown as the database wrote it."""
    if not isinstance(moment, datetime):
        return str(moment)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``: rounded down, never negative."""
    seconds = max(int(seconds), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600:02d}h"


def duration_exact(seconds: float) -> str:
    """``41s``, ``3m12s``, ``2h05m``, ``2d04h``: to the second under an hour (a job's wait and build, where the
    seconds tell), rounded down, never negative."""
    seconds = max(int(seconds), 0)
    if 120 <= seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return duration(seconds)


def ago(moment: datetime | None, now: datetime) -> str:
    """A moment relative to ``now`` (``3m ago``); '-' for none; a time no datetime holds, as ``when`` shows it."""
    if moment is None:
        return NOTHING
    if not isinstance(moment, datetime):
        return when(moment)
    return f"{duration((now - moment).total_seconds())} ago"


def iso(moment: datetime | None) -> str:
    """A moment for a machine (``<time datetime>``): ISO 8601 in UTC; '' for none or a time no datetime holds."""
    return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else ""


GLANCE = 80  # characters of a row's parameters the job list shows before '…'


def parameters_at_a_glance(parameters: Any) -> str:
    """A row's parameters in one short line, ``ENV=prod VERSION=1.4.1``, cut with '…' past ``GLANCE``; '-' for
    none. Values as ``cell`` writes them (numbers as written)."""
    if not isinstance(parameters, Mapping) or not parameters:
        return NOTHING
    line = " ".join(f"{k}={v if isinstance(v, str) else cell(v)}" for k, v in parameters.items())
    return line if len(line) <= GLANCE else line[:GLANCE - 1] + "…"


def waited_and_ran(row: Mapping[str, Any], now: datetime) -> str:
    """How long a row waited (from when it was due to its build's start, or until now) and ran (its build's start
    to its end, or until now), from its row alone (the list has no history): ``waited 41s, ran 3m12s``; '-' for a
    row that never waited (not yet due) and never ran."""
    due, started, finished = row.get("scheduled_at"), row.get("started_at"), row.get("finished_at")
    created = row.get("created_at")
    if not isinstance(due, datetime) or (isinstance(created, datetime) and created > due):
        due = created
    parts = []
    if isinstance(started, datetime):
        if isinstance(due, datetime):
            parts.append(f"waited {duration_exact((started - due).total_seconds())}")
        end = finished if isinstance(finished, datetime) else now
        parts.append(f"ran {duration_exact((end - started).total_seconds())}"
                     + ("" if isinstance(finished, datetime) else " so far"))
    elif isinstance(due, datetime) and due <= now and row.get("status") in ("pending", "processing"):
        parts.append(f"waiting {duration_exact((now - due).total_seconds())}")
    return ", ".join(parts) or NOTHING


def age(seconds: float | None) -> str:
    """A duration in seconds as ``duration`` shows it; '-' when unknown."""
    return NOTHING if seconds is None else duration(seconds)


def moment(value: datetime | None) -> str:
    """A moment as ``when`` shows it, or '-' for none."""
    return NOTHING if value is None else when(value)


def field(value: Any) -> str:
    """A value in a list of named fields (a job's page): as ``cell``, but a moment says its zone, as the history
    beside it does: no column heading says which time it is."""
    return when(value) if isinstance(value, datetime) else cell(value)


def cell(value: Any) -> str:
    """A value in a table or a field list: moments in UTC to the second (the column says which time it is, so
    the zone is left out, as in the command line's tables), '-' for nothing, numbers without trailing zeros,
    structures as compact JSON (non-ASCII kept readable), anything else as its text."""
    if value is None:
        return NOTHING
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal | float):
        return f"{float(value):g}"
    if isinstance(value, dict | list):  # parameters: numbers as written (JsonNumber), never through a float
        return dumps_parameters(_readable(value))
    return str(value)


def _readable(value: Any) -> Any:
    """Inside a structure: what compact JSON cannot hold (a moment, say) as its text."""
    if isinstance(value, dict):
        return {k: _readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return str(value)


ELLIPSIS = "…"


def one_line(text: str) -> str:
    """A cell's text on one line: runs of whitespace (an error's newlines) as one space."""
    return " ".join(text.split())


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut shown by a final '…'."""
    return text if len(text) <= width else text[:max(width - 1, 0)] + ELLIPSIS


def limit_change(change: Mapping[str, Any]) -> tuple[str, str]:
    """A cap or rate change of the caps' history (``limit_history``), from what to what: a cap as its number, a
    rate as N/min, no limit as 'none' (a cap of 0 is a cap: it holds the job back)."""
    def shown(n: int | None, unit: str) -> str:
        return "none" if n is None else f"{n}{unit}"

    if change["kind"] == "rate":
        return shown(change["previous_per_minute"], "/min"), shown(change["per_minute"], "/min")
    return shown(change["previous"], ""), shown(change["max_in_flight"], "")


def fit_widths(widths: list[int], flexible: list[bool], minimums: list[int], total: int, gap: int = 2) -> list[int]:
    """Column widths whose table (columns ``gap`` apart) fits in ``total`` characters: the widest flexible
    column gives up a character at a time, never below its minimum; the others keep theirs. When even the
    minimums do not fit, the table is as narrow as they allow."""
    fitted = list(widths)
    while sum(fitted) + gap * (len(fitted) - 1) > total:
        shrinkable = [i for i, f in enumerate(fitted) if flexible[i] and f > minimums[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: fitted[i])
        fitted[widest] -= 1
    return fitted
