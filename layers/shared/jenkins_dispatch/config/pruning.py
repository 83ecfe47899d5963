"""PRUNE_FINISHED_AFTER: how long finished jobs are kept before the dispatchers' pruner deletes them (with their
history), or ``off`` (``dispatching/duties/pruner.py``; docs/operating.md, Pruning)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import ConfigError
from .reading import _text

PRUNE_DEFAULT_SECONDS = 30 * 86400.0
# From an hour (late callbacks, and the watch on re-sent rows, look at rows that finished minutes ago) to `prune`'s
# own bound on --older-than.
PRUNE_FINISHED_AFTER_RANGE = (3600.0, 36500 * 86400.0)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_DURATION_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def prune_finished_after(env: Mapping[str, str]) -> float | None:
    """PRUNE_FINISHED_AFTER in seconds (unset or empty: 30 days); None for ``off``; ConfigError in one line naming the
    variable for anything else, or a duration outside an hour to 36,500 days."""
    raw = _text(env, "PRUNE_FINISHED_AFTER").lower()
    if raw == "":
        return PRUNE_DEFAULT_SECONDS
    if raw == "off":
        return None
    match = _DURATION.match(raw)
    seconds = float(match.group(1)) * _DURATION_UNIT_SECONDS[match.group(2)] if match else None
    low, high = PRUNE_FINISHED_AFTER_RANGE
    if seconds is None or not low <= seconds <= high:
        raise ConfigError(f"PRUNE_FINISHED_AFTER must be a duration from 1h to 36500d (e.g. 30d, 12h) or off, "
                          f"got {raw!r}")
    return seconds
