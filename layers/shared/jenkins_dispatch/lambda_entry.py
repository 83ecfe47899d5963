"""The dispatcher function's entry on Lambda: what ``functions/dispatcher/app.py`` hands its invocation to.

Lambda glue only: the invocation's time left, its container's heartbeat (kept between warm invocations), and
which of the two ways to run (one pass, or a dispatch loop until the time is nearly up). The pass and the loop
themselves live in ``dispatching/``, which knows nothing of Lambda.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import runtime
from .dispatching.dispatch_loop import DispatchLoop
from .dispatching.dispatcher import run_pass
from .dispatching.duties.pruner import Pruner
from .dispatching.heartbeat import Heartbeat
from .dispatching.wakeup import work_signal

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from .config import Settings

# A continuous invocation still runs a full pass (the reconciler's turn) at least this often.
LAMBDA_INTERVAL_SECONDS = 10.0


def run_invocation(context: LambdaContext, max_jobs: int | None = None) -> dict[str, Any]:
    """One invocation of the dispatcher function, its event already parsed (functions/dispatcher/app.py).

    DISPATCHER_MODE=continuous (the template's default): keep dispatching, woken by new work, until the
    invocation's time is nearly up, so the next scheduled invocation takes over without a gap.
    DISPATCHER_MODE=single, or a manual invoke's ``max_jobs``: one pass.
    """
    settings = runtime.settings()
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is not None:
        settings.check_pass_budget(remaining() / 1000, "the dispatcher function's time left (DispatcherTimeoutSeconds)")
    db = runtime.database()
    if settings.dispatcher_mode == "single" or max_jobs is not None or remaining is None:
        return run_pass(settings, max_jobs=max_jobs, remaining_ms=remaining, db=db,
                        heartbeat=_lambda_heartbeat(context, None), pruner=_lambda_pruner(settings))
    loop = DispatchLoop(settings, db, work_signal(db, poll_seconds=settings.poll_seconds), interval=LAMBDA_INTERVAL_SECONDS,
                        heartbeat=_lambda_heartbeat(context, LAMBDA_INTERVAL_SECONDS), pruner=_lambda_pruner(settings))
    return loop.run(seconds_left=lambda: remaining() / 1000)


# This container's pruner, kept between warm invocations like its heartbeat: it remembers when the pruner is due
# again, so an invocation asks the database only then (a fresh container asks once).
_pruners: list[Pruner] = []


def _lambda_pruner(settings: Settings) -> Pruner:
    """This container's pruner (PRUNE_FINISHED_AFTER), made on first use."""
    if not _pruners:
        _pruners.append(Pruner(settings.prune_finished_after_seconds))
    return _pruners[0]


# This container's heartbeats, by instance: a module global on purpose, since a warm container keeps its
# modules between invocations, and so its heartbeat row counts every pass it ran.
_heartbeats: dict[str | None, Heartbeat] = {}


def _lambda_heartbeat(context: LambdaContext, interval: float | None) -> Heartbeat:
    """This container's heartbeat (its log stream names it), kept between warm invocations: one row per
    container, its passes adding up."""
    function = getattr(context, "function_name", None)
    stream = getattr(context, "log_stream_name", None)
    instance = f"{function}/{stream}" if isinstance(function, str) and isinstance(stream, str) else None
    beat = _heartbeats.get(instance)
    if beat is None:
        beat = _heartbeats[instance] = Heartbeat("lambda", interval=interval, instance=instance)
    return beat
