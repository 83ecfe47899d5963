"""How long a job waited and how long its build ran, read from its history when the webhook settles it.

`serve` exposes them as Prometheus histograms (``observability.PrometheusSink.observe_job``). They come from
the row's history (``jenkins_job_events``: one index read, after the settle that wrote its last event) rather
than from columns the queue does not keep: the moment Jenkins took the trigger is only in the history.

- queue wait: from the moment the row last became pending by an insert or an operator's retry (``enqueued``,
  ``retried``) to the first trigger Jenkins accepted after it (``triggered``, or ``adopted`` by the
  reconciler). Backoffs after a failed trigger and a delay asked with ``enqueue --at`` count as waiting.
- build duration: from the build's ``started`` notification of the settling dispatch to the settle.

Observed only where Prometheus is on (`serve`): a Lambda webhook reads nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import DispatchError
from ..observability import logger, metrics
from ..store.queue import Queue

BECAME_PENDING = ("enqueued", "retried")
TRIGGERED = ("triggered", "adopted")


def job_timings(events: Iterable[Mapping[str, Any]], dispatch_id: str) -> tuple[float | None, float | None]:
    """(queue wait, build duration) in seconds from a row's history, oldest first; None where the history does
    not tell (no trigger after the last insert or retry; no ``started`` of ``dispatch_id``; no settle)."""
    became_pending: datetime | None = None
    triggered: datetime | None = None
    started: datetime | None = None
    settled: datetime | None = None
    for event in events:
        name, at = event["event"], event["at"]
        if name in BECAME_PENDING:
            became_pending, triggered, started, settled = at, None, None, None
        elif name in TRIGGERED and triggered is None and became_pending is not None:
            triggered = at
        elif name == "started" and event.get("dispatch_id") == dispatch_id and started is None:
            started = at
        elif name == "settled" and event.get("dispatch_id") == dispatch_id:
            settled = at
    wait = (triggered - became_pending).total_seconds() if triggered and became_pending else None
    duration = (settled - started).total_seconds() if settled and started else None
    return (None if wait is not None and wait < 0 else wait,
            None if duration is not None and duration < 0 else duration)


def observe_settled(queue: Queue, job_id: int, dispatch_id: str, job_name: str) -> None:
    """Record a just-settled row's queue wait and build duration in `serve`'s histograms; nothing elsewhere.
    A failed read costs the histograms one sample, never the callback its answer."""
    sink = metrics.prometheus
    if sink is None:
        return
    try:
        wait, duration = job_timings(queue.events(job_id), dispatch_id)
    except DispatchError as exc:
        logger.warning("could not read a settled job's history for the timing histograms",
                       extra={"job_id": job_id, "reason": str(exc)})
        return
    if wait is not None:
        sink.observe_job("QueueWait", job_name, wait)
    if duration is not None:
        sink.observe_job("BuildDuration", job_name, duration)
