"""What a command hands back: JSON for scripts, tables for people, and the exit codes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from ..jenkins.jobs import JsonNumber
from ..operating.display import cell, clip, fit_widths, one_line

EXIT_FAILED = 1  # the operation failed: database or Jenkins unavailable, a pass stopped by Jenkins
EXIT_BAD_INPUT = 2  # bad input or configuration: nothing changed


def _plain(value):
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def json_text(value, level: int = 0) -> str:
    """``value`` as JSON indented by two spaces, as ``json.dumps(indent=2)`` writes it (dates as text, decimals
    as numbers), but a parameter's number (JsonNumber) written as its digits: 1.50 stays 1.50."""
    if isinstance(value, JsonNumber):
        return str(value)
    inner, outer = "  " * (level + 1), "  " * level
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k))}: {json_text(v, level + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{outer}}}"
    if isinstance(value, list | tuple) and value:
        return "[\n" + ",\n".join(f"{inner}{json_text(v, level + 1)}" for v in value) + f"\n{outer}]"
    return json.dumps(value, default=_plain)


def print_json(data) -> None:
    """Print ``data`` as indented JSON (dates and decimals as text), for ``--json``."""
    print(json_text(data))


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], empty: str = "(none)", *, width: int | None = None,
                flexible: Sequence[str] = ()) -> None:
    """Print ``rows`` as a table of ``columns`` for people, or ``empty`` when there are none. With ``width``, the
    ``flexible`` columns give up characters (their cells cut with '…') until each line fits in it."""
    if not rows:
        print(empty)
        return
    cells = [[one_line(cell(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    if width is not None:
        widths = fit_widths(widths, [c in flexible for c in columns], [len(c) for c in columns], width)
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(clip(v, w).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def with_controller(columns: list[str], told_apart: bool) -> list[str]:
    """``columns`` with the controller's after the job's when rows of several controllers may be listed."""
    at = columns.index("job_name") + 1
    return columns[:at] + ["controller"] + columns[at:] if told_apart else columns
