"""The pruner: final rows (and their history) finished more than PRUNE_FINISHED_AFTER ago are deleted, then the time
page's aggregates past its window, by one dispatcher at a time, under `serve` and in the Lambda function alike.

The turn is a row of ``jenkins_dispatch_duties`` taken with a compare-and-set on its due time (``DispatcherStore.take_duty``:
UPDATE … WHERE due_at <= now()), as the schedules' ticks are taken: of several dispatchers racing, one holds it, the
others learn when it is due again and ask no sooner (in memory: a duty not due costs no statement). The holder deletes
ONE batch a pass (``prune_batch``, which skips rows others lock): a claim or a settle in its dispatcher waits for one
batch at most, never for the whole backlog, and the lane runs its next pass at once while a batch came back full.
Each batch renews the turn; a holder that stopped answering loses it when its hold ends.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

from ...observability import MetricUnit, logger, metrics
from . import PassContext

NAME = "pruner"  # its row in jenkins_dispatch_duties (0020_duties.sql / 0018_duties.sql)
BATCH_ROWS = 1000  # rows a batch deletes at most (with their history): `prune`'s default batch
EVERY_SECONDS = 3600.0  # once the backlog is gone, the next run is due this much later
HOLD_SECONDS = 300.0  # a holder that renews nothing for this long loses its turn (a crash, a lost session)
RECHECK_SECONDS = 60.0  # the soonest a dispatcher that lost the race asks again
# The time page's longest window (operating/timeline.SHOWN_SECONDS; tests/unit/test_duties.py holds the two equal):
# its aggregates older than that are never shown.
AGGREGATES_KEPT_SECONDS = 7 * 86400


def holder_name() -> str:
    """Who holds the turn: this process (host and pid), as the heartbeats name dispatchers."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Pruner:
    """One dispatcher's pruner, kept across its passes (when it is due again is remembered here)."""

    name = NAME
    needs_jenkins = False

    def __init__(self, older_than_seconds: float | None, *, holder: str | None = None, batch: int = BATCH_ROWS,
                 clock: Callable[[], float] = time.monotonic):
        self.older_than_seconds = older_than_seconds  # None: PRUNE_FINISHED_AFTER=off, never due
        self.holder = f"{holder or holder_name()}:{id(self):x}"  # two pruners of one process are two holders
        self.batch = batch
        self.clock = clock
        self._due_at = clock()  # the first pass asks

    def seconds_until_due(self) -> float:
        """When to ask the database again: at once while a batch came back full, else when the row said."""
        if self.older_than_seconds is None:
            return float("inf")
        return self._due_at - self.clock()

    def run(self, context: PassContext) -> dict[str, int]:
        """Take (or renew) the turn; if it is ours, delete one batch, and when that one was not full, the aggregates,
        then hand the turn back. Counts: ``pruned`` rows, ``aggregates_pruned`` rows, ``prune_batches`` run."""
        assert self.older_than_seconds is not None  # never due otherwise
        queue = context.queue
        turn = queue.take_duty(NAME, self.holder, HOLD_SECONDS)
        if not turn.taken:
            wait = EVERY_SECONDS if turn.due_in_seconds is None else turn.due_in_seconds
            self._due_at = self.clock() + max(RECHECK_SECONDS, wait)
            return {}
        deleted = queue.prune_one_batch(self.older_than_seconds, self.batch)
        counts = {"pruned": deleted, "prune_batches": 1}
        if deleted >= self.batch:
            self._due_at = self.clock()  # more to delete: the next pass goes on
        else:
            counts["aggregates_pruned"] = queue.prune_aggregates(AGGREGATES_KEPT_SECONDS)
            queue.duty_done(NAME, self.holder, EVERY_SECONDS)
            self._due_at = self.clock() + EVERY_SECONDS
        if deleted:
            metrics.add_metric(name="RowsPruned", unit=MetricUnit.Count, value=deleted)
            logger.info("pruned finished jobs", extra={"deleted": deleted, "more": deleted >= self.batch,
                                                       "older_than_seconds": self.older_than_seconds})
        return counts
