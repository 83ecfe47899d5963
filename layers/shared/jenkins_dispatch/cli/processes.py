"""The long-running and one-shot processes: `dispatch` (one pass), `serve` (the dispatcher and the webhook) and
`ui` (the web page)."""

from __future__ import annotations

import argparse
import sys

from .. import inputs
from ..config import SERVE_HOST, SERVE_INTERVAL_SECONDS, SERVE_PORT, UI_PORT, UI_REFRESH_SECONDS
from .arguments import non_negative_float, whole
from .context import Context
from .output import EXIT_FAILED, print_json

SERVE_INTERVAL_LONGEST = 86_400  # a pass at least once a day; a wait of 1e300 s overflows the clock (OverflowError)


def interval_seconds(text: str) -> float:
    """``serve --interval``: a number of seconds, at least 0.1 (and at most a day: the loop must wake)."""
    value = non_negative_float(text)
    if value < 0.1:
        raise argparse.ArgumentTypeError(f"expected at least 0.1 seconds, got {text}")
    if value > SERVE_INTERVAL_LONGEST:
        raise argparse.ArgumentTypeError(f"expected at most {SERVE_INTERVAL_LONGEST} seconds, got {text}")
    return value


def cmd_dispatch(ctx: Context, args) -> int:
    """`dispatch`: run one pass now; exit 1 when Jenkins stopped it or a controller's lane failed."""
    from ..dispatching.dispatcher import run_pass
    from ..dispatching.heartbeat import Heartbeat
    from ..observability import metrics

    summary = run_pass(ctx.settings, max_jobs=args.max_jobs, heartbeat=Heartbeat("cli"))
    metrics.clear_metrics()  # CloudWatch EMF lines are for Lambda and serve, not for a command's output
    print_json(summary)
    for name, reason in summary.get("controller_errors", {}).items():
        print(f"jenkins-dispatch: error: controller {name}: {reason}", file=sys.stderr)
    if summary.get("jenkins_unavailable"):
        print(f"jenkins-dispatch: error: the pass stopped: {summary['stopped_because']}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_FAILED if summary.get("controller_errors") else 0


def cmd_serve(ctx: Context, args) -> None:
    """`serve`: the dispatcher loop and the webhook in this process, until SIGTERM / SIGINT."""
    from ..serve import serve

    serve(ctx.settings, host=args.host, port=args.port, interval=args.interval, ui=args.ui)


def cmd_ui(ctx: Context, args) -> None:
    """`ui`: the operator's web page, until SIGTERM / SIGINT."""
    from ..ui.server import run_ui

    run_ui(ctx.settings, args.host, args.port, read_only=args.read_only, refresh_seconds=args.refresh)


def add_process_commands(command) -> None:
    """`dispatch`, `serve` and `ui`, through ``command`` (``arguments.command_adder``)."""
    p = command("dispatch", cmd_dispatch, "run one dispatcher pass and print its summary as JSON")
    p.add_argument("--max-jobs", type=whole(inputs.HOW_MANY), metavar="N", help="trigger at most N jobs")

    p = command("serve", cmd_serve, "run the dispatcher (woken by new work) and the webhook over plain HTTP")
    p.add_argument("--interval", type=interval_seconds, default=SERVE_INTERVAL_SECONDS, metavar="S",
                   help="a pass at least every S seconds even without news")
    p.add_argument("--port", type=whole(inputs.PORT), default=SERVE_PORT, help="webhook and /healthz port")
    p.add_argument("--host", default=SERVE_HOST, help="address to listen on")
    p.add_argument("--ui", action="store_true",
                   help="also serve the web page (as `ui`) on the same address; requires UI_TOKEN")

    p = command("ui", cmd_ui, "serve the operator's web page (overview, jobs, levers); loopback only unless "
                              "UI_TOKEN (or UI_TOKEN_SECRET_ARN) is set")
    p.add_argument("--host", default=SERVE_HOST, help="address to listen on (any but loopback requires UI_TOKEN)")
    p.add_argument("--port", type=whole(inputs.PORT), default=UI_PORT, help="port (0: any free one)")
    p.add_argument("--read-only", action="store_true", help="show everything, change nothing (no levers)")
    p.add_argument("--refresh", type=whole(inputs.SECONDS), default=UI_REFRESH_SECONDS, metavar="S",
                   help="pages reload themselves every S seconds while open (0: never)")
