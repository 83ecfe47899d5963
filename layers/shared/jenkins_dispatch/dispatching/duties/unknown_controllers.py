"""Pending rows that name no configured controller fail, nothing sent: no lane would ever claim them. One lane sweeps
(the first, or the one there is), so the rows are failed once per pass of the dispatcher, not once per controller."""

from __future__ import annotations

from ...config import Settings
from ...errors import DatabaseBusy
from ...observability import logger
from ...store.dispatcher import DispatcherStore
from . import PassContext


def fail_rows_of_unknown_controllers(settings: Settings, queue: DispatcherStore) -> int:
    """Fail the pending rows that name no configured controller (nothing sent); return how many."""
    known = list(settings.controllers_by_name())
    if not known:  # no Jenkins at all: nothing can be told apart (the pass fails on its own)
        return 0
    try:
        failed = queue.fail_unknown_controllers(known)
    except DatabaseBusy as exc:
        # Other controllers' claims run beside this one (their own threads; on MySQL the scan can meet them in a
        # deadlock): housekeeping that the next pass does as well, not a reason to end this one.
        logger.warning("could not fail rows of unknown controllers yet; next pass", extra={"reason": str(exc)})
        return 0
    for row in failed:
        logger.warning("failed: its controller is not configured",
                       extra={"job_id": row["id"], "controller": row["controller"]})
    return len(failed)


class UnknownControllers:
    """The sweep, every pass of the lane that does it."""

    name = "unknown-controller sweep"
    needs_jenkins = False

    def seconds_until_due(self) -> float:
        """Always due: a row naming a controller nobody serves may be inserted at any time."""
        return 0.0

    def run(self, context: PassContext) -> dict[str, int]:
        """The rows failed."""
        return {"failed": fail_rows_of_unknown_controllers(context.settings, context.queue)}
