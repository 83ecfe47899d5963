"""The producers' store: adding rows (``enqueue.sql``), as the CLI's ``enqueue`` does; an application may as
well insert with plain SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .. import inputs
from ..config import DEFAULT_CONTROLLER
from ..errors import InvalidInput
from ..jenkins.jobs import dumps_parameters, job_name_error
from ..moments import from_iso
from .queue import EnqueueResult
from .runner import Store, named, refuse


def _scheduled_at(value: str | datetime | None) -> str | None:
    """A scheduled_at given to ``enqueue``, as the ISO text both dialects read: ISO 8601 (no zone means UTC) up to
    9999-12-31 00:00 UTC (the table refuses later times, which no reader can show)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = from_iso(value)
        except ValueError:
            raise InvalidInput(f"scheduled_at must be a real time: {value!r} is not one (ISO 8601, e.g. "
                               "2026-11-30T12:00:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


class Producers(Store):
    """Adding rows to the queue, on one database session."""

    def enqueue(
        self,
        job_name: str,
        parameters: dict | None = None,
        *,
        priority: int = 0,
        scheduled_at: datetime | str | None = None,
        max_attempts: int = 3,
        dedupe_key: str | None = None,
        actor: str = "operator",
        controller: str = DEFAULT_CONTROLLER,
        concurrency_key: str | None = None,
        fairness_key: str | None = None,
    ) -> EnqueueResult:
        """Add a pending row for ``controller``; with ``dedupe_key``, return the unfinished row with that key
        instead. ``concurrency_key``: the shared resource it holds while in flight (key caps count it);
        ``fairness_key``: the group it waits its turn in."""
        parameters = {} if parameters is None else parameters
        refuse(job_name_error(job_name), inputs.parameters_error(parameters),
                named("priority", inputs.PRIORITY.error(priority)),
                named("max_attempts", inputs.ATTEMPTS.error(max_attempts)),
                None if dedupe_key is None else inputs.dedupe_key_error(dedupe_key),
                None if concurrency_key is None else inputs.row_key_error("concurrency", concurrency_key),
                None if fairness_key is None else inputs.row_key_error("fairness", fairness_key))
        scheduled_at = _scheduled_at(scheduled_at)
        rows = self._run(
            "enqueue",
            job_name=job_name,
            parameters=dumps_parameters(parameters),  # numbers read as JsonNumber (CLI --params) kept as written
            priority=priority,
            scheduled_at=scheduled_at,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            actor=actor,
            controller=controller,
            concurrency_key=concurrency_key,
            fairness_key=fairness_key,
        )
        if not rows and dedupe_key is not None:
            # The duplicate committed after our statement's snapshot: look again with a fresh one.
            rows = [dict(r, created=False) for r in self._run("find_open_by_dedupe_key", dedupe_key=dedupe_key)]
        if not rows:
            # The row holding the key finished in between; enqueue anew.
            return self.enqueue(job_name, parameters, priority=priority, scheduled_at=scheduled_at,
                                max_attempts=max_attempts, dedupe_key=dedupe_key, actor=actor, controller=controller,
                                concurrency_key=concurrency_key, fairness_key=fairness_key)
        return EnqueueResult(id=rows[0]["id"], created=rows[0]["created"])
