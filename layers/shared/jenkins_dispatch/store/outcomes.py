"""What every store that learns a dispatch's outcome shares: the row by id or by dispatch id, its progress
and its settle, each fenced by the dispatch id. The dispatcher's store (``dispatcher.py``: the reconciler), the
webhook's (``webhook.py``) and the levers (``levers.py``: an operator's cancel) are ``Outcomes``.
"""

from __future__ import annotations

from typing import cast

from ..errors import NotFound
from .queue import FINAL_STATUSES, Settled
from .rows import FoundJob, Job
from .runner import Store, parameters_of, seconds_of


class Outcomes(Store):
    """A dispatch's row and its fenced progress and settle, on one database session."""

    def get(self, job_id: int) -> Job:
        """One row by id; NotFound when there is none."""
        rows = self._run("get_job", id=job_id)
        if not rows:
            raise NotFound(f"no job with id {job_id}")
        row = cast(Job, rows[0])
        row["parameters"] = parameters_of(row["parameters"])
        return row

    def find_by_dispatch_id(self, dispatch_id: str) -> FoundJob | None:
        """The row a dispatch id names, or None."""
        rows = cast(list[FoundJob], self._run("get_job_by_dispatch_id", dispatch_id=dispatch_id))
        return rows[0] if rows else None

    def record_progress(
        self, job_id: int, dispatch_id: str, *, build_number: int | None = None, build_url: str | None = None,
        queue_id: int | None = None, started: bool = False, event: str = "started", actor: str = "webhook",
        detail: str | None = None, job_path: str | None = None, job_leaf: str | None = None,
        only_build: int | None = None,
    ) -> bool:
        """``job_path`` (or only ``job_leaf``, the last segment): change the row only if it is that job's;
        ``only_build``: only if the row's build, once known, is that one."""
        rows = self._run(
            "record_progress", id=job_id, dispatch_id=dispatch_id, build_number=build_number,
            build_url=build_url, queue_id=queue_id, started=started, event=event, actor=actor, detail=detail,
            job_path=job_path, job_leaf=job_leaf, only_build=only_build,
        )
        return bool(rows)

    def settle(
        self, job_id: int, dispatch_id: str, status: str, *, result: str | None = None,
        error: str | None = None, build_number: int | None = None, build_url: str | None = None,
        actor: str = "dispatcher", job_path: str | None = None, job_leaf: str | None = None,
        only_build: int | None = None,
    ) -> Settled | None:
        """The row settled, with its timings, or None when the fence left it as it was. ``job_path`` /
        ``job_leaf`` / ``only_build`` as in ``record_progress``."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"settle needs a final status, got {status!r}")
        rows = self._run(
            "settle", id=job_id, dispatch_id=dispatch_id, status=status, result=result, error=error,
            build_number=build_number, build_url=build_url, actor=actor, job_path=job_path, job_leaf=job_leaf,
            only_build=only_build,
        )
        if not rows:
            return None
        return Settled(rows[0]["id"], seconds_of(rows[0]["queue_wait_seconds"]), seconds_of(rows[0]["build_seconds"]))
