"""The webhook's store: finding the row a Jenkins notification names (by its dispatch id, or by its job and
queue id), whether a dispatch id was ever drawn, and, through ``Outcomes``, its progress and settle.
"""

from __future__ import annotations

from typing import cast

from .outcomes import Outcomes
from .rows import FoundJob


class WebhookStore(Outcomes):
    """What the webhook reads and changes, on one database session."""

    def find_by_queue_id(self, job_name: str, queue_id: int) -> FoundJob | None:
        """The row of ``job_name`` holding Jenkins queue item ``queue_id``, or None."""
        rows = cast(list[FoundJob], self._run("get_job_by_queue_id", job_name=job_name, queue_id=queue_id))
        return rows[0] if rows else None

    def was_dispatched(self, dispatch_id: str) -> bool:
        """Whether some claim ever drew this dispatch id (its history has the claimed event)."""
        return bool(self._run("was_dispatched", dispatch_id=dispatch_id))
