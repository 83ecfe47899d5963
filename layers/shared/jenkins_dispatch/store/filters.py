"""How a listing's filters become statement parameters: parameter values (``param_key_N`` / ``param_value_N``
slots), an error text to contain (a LIKE pattern) and a time (a point in time both engines bind). Shared by the
reports' listing (``reports.py``, ``list_jobs``) and the levers' bulk selection (``levers.py``, ``jobs_matching``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ..errors import InvalidInput
from ..moments import from_iso

MAX_PARAMETER_FILTERS = 3  # parameter values a job list filters on at once (slots of list_jobs)
PARAMETER_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")  # parameter names a filter may name (quoted into a JSON path)


def like_contains(text: str) -> str:
    """A LIKE pattern matching any text that contains ``text`` as it is: its ``%``, ``_`` and ``\\`` are
    escaped (the statements say ``ESCAPE '\\'``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def time_filter(value: str | datetime | None) -> datetime | None:
    """A time filter as a datetime, which both dialects bind as a point in time (ISO text without a zone
    means UTC, as on the command line); MySQL cannot read an ISO text's offset."""
    if isinstance(value, str):
        try:
            value = from_iso(value)
        except ValueError:
            raise InvalidInput(f"not a time: {value!r} (use ISO 8601, e.g. 2026-11-30T12:00:00Z)") from None
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def parameter_slots(parameters: dict[str, str] | None) -> dict[str, str | None]:
    """A parameter filter as the statements' slots (``param_key_N``, ``param_value_N``); unused slots are NULL,
    which the statement skips. At most ``MAX_PARAMETER_FILTERS``, keys as ``PARAMETER_KEY`` allows."""
    given = list((parameters or {}).items())
    if len(given) > MAX_PARAMETER_FILTERS:
        raise InvalidInput(f"at most {MAX_PARAMETER_FILTERS} parameter filters at once")
    for key, _ in given:
        if not PARAMETER_KEY.match(key):
            raise InvalidInput(f"bad parameter name {key!r}: use letters, digits, '_', '-' and '.'")
    slots: dict[str, str | None] = {}
    for n in range(1, MAX_PARAMETER_FILTERS + 1):
        slots[f"param_key_{n}"], slots[f"param_value_{n}"] = given[n - 1] if n <= len(given) else (None, None)
    return slots
