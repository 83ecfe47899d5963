"""Pruning the finished history (``pruning.sql``): final rows and their history in bounded batches, and the time
page's aggregates past its window. Shared by the operator's ``prune`` (``levers.py``) and the dispatchers' pruner
duty (``dispatcher.py``; ``dispatching/duties/pruner.py``), which are both ``Pruning``.
"""

from __future__ import annotations

from ..errors import InvalidInput
from .runner import Store


class Pruning(Store):
    """Deleting what no one reads any more, on one database session."""

    def prune(self, older_than_days: float, batch: int = 1000) -> int:
        """Delete finished rows older than the cutoff in bounded batches; returns how many went."""
        if older_than_days < 0:
            raise InvalidInput("the age must not be negative")
        total = 0
        while True:
            deleted = self._run("prune_batch", days=float(older_than_days), batch=batch)[0]["deleted"]
            total += deleted
            if deleted < batch:
                return total


    def prune_aggregates(self, older_than_seconds: int) -> int:
        """Delete the time page's aggregate rows of buckets that started more than ``older_than_seconds`` ago (the
        page's longest window: it never shows them); returns how many rows went."""
        if older_than_seconds < 0:
            raise InvalidInput("the age must not be negative")
        return int(self._run("prune_aggregates", seconds=int(older_than_seconds))[0]["deleted"])


    def prune_one_batch(self, older_than_seconds: float, batch: int) -> int:
        """Delete up to ``batch`` final rows (and their history) finished more than ``older_than_seconds`` ago, in
        one statement (``prune``'s); returns how many went."""
        return int(self._run("prune_batch", days=float(older_than_seconds) / 86400, batch=batch)[0]["deleted"])
