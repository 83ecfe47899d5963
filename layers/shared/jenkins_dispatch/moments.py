"""Moments as operators type them: ``1h`` (that long ago), ``+5m`` (that much later) or ISO 8601 (no zone means
UTC). Pure; shared by the command line's ``--since`` / ``--at``, the web page's time filter and the queue's
time arguments (``from_iso``: the one reading of ISO 8601 text in the package)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidInput

_RELATIVE = re.compile(r"^\+?(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)$")
_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
SINCE_USAGE = "a duration like 1h, 30m, 2d (that long ago) or ISO 8601 (2026-01-31T09:00:00Z)"
LATER_USAGE = "ISO 8601 (2026-01-31T09:00:00Z) or a delay like +5m"


def relative_or_iso(text: str, sign: int, usage: str, now: datetime | None = None) -> datetime:
    """``text`` as a duration from ``now`` (``sign`` +1: later, -1: ago) when it looks like one, else ISO 8601
    (no zone means UTC). InvalidInput names the text and ``usage``."""
    text = text.strip()
    match = _RELATIVE.match(text.lstrip("-") if sign < 0 else text)
    if match and not (sign < 0 and text.startswith("+")):
        try:
            return (now or datetime.now(UTC)) + sign * timedelta(
                seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
        except OverflowError:
            raise InvalidInput(f"bad time {text!r}: too far in the {'future' if sign > 0 else 'past'}") from None
    try:
        return from_iso(text)
    except ValueError:
        raise InvalidInput(f"bad time {text!r}: use {usage}") from None


def from_iso(text: str) -> datetime:
    """ISO 8601 text as a point in time: no zone means UTC (``Z`` is UTC too). ValueError when it is not one."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def since(text: str, now: datetime | None = None) -> datetime:
    """A moment in the past: `1h`, `30m`, `2d` mean that long ago (like journalctl and docker logs), or ISO 8601."""
    return relative_or_iso(text, -1, SINCE_USAGE, now)


def later(text: str, now: datetime | None = None) -> datetime:
    """A moment to come: ISO 8601, or relative to now: +30s, +5m, +2h, +1d."""
    return relative_or_iso(text, +1, LATER_USAGE, now)
