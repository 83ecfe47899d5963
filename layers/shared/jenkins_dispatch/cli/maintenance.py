"""The schema and the house: `migrate`, `prune` and `doctor`."""

from __future__ import annotations

import argparse
import re
import sys

from .. import inputs
from ..config import load_cutover_window
from ..operating import timeline
from ..store.migrations import migrate
from .arguments import age_days, non_negative_float, whole
from .context import Context
from .output import EXIT_FAILED, print_json


def cmd_migrate(ctx: Context, args) -> None:
    """`migrate`: apply the pending migrations."""
    # The database's settings and the cutover window only: nothing else must stop a migration.
    applied = migrate(ctx.db, load_cutover_window())
    if args.json:
        print_json({"applied": applied})
    else:
        print("applied " + ", ".join(applied) if applied else "schema is up to date")


def cmd_prune(ctx: Context, args) -> None:
    """`prune`: delete final jobs (and their history) older than the given days, and the time page's aggregates
    older than its longest window (the page never shows them; the finished rows' age does not matter to them)."""
    deleted = ctx.queue.prune(args.older_than, batch=args.batch)
    aggregates = ctx.queue.prune_aggregates(timeline.SHOWN_SECONDS)
    if args.json:
        print_json({"deleted": deleted, "aggregates_deleted": aggregates})
    else:
        print(f"deleted {deleted} finished jobs older than {args.older_than:g} days, and {aggregates} rows of the "
              f"time page's aggregates older than {timeline.SHOWN_SECONDS // 86_400} days")


def cmd_doctor(ctx: Context, args) -> int:
    """`doctor`: run every check; exit 1 when one fails."""
    from ..operating.doctor import DoctorOptions, failure_line, healthy, render, run_checks

    checks = run_checks(DoctorOptions(webhook_url=args.webhook_url, max_transaction_age_seconds=args.max_transaction_age,
                                      max_jobs_checked=args.max_jobs))
    ok = healthy(checks)
    if args.json:
        print_json({"ok": ok, "checks": [c.as_dict() for c in checks]})
    else:
        print(render(checks))
    if ok:
        return 0
    sys.stdout.flush()  # the report, then its verdict under it
    print(f"jenkins-dispatch: error: {failure_line(checks)}", file=sys.stderr)
    return EXIT_FAILED


def http_url(text: str) -> str:
    """``--webhook-url``: an http(s) URL (never echoed back: it may carry a token)."""
    if not re.match(r"^https?://[^/\s]+", text):  # not echoed: a URL may carry a token
        raise argparse.ArgumentTypeError("expected an http:// or https:// URL")
    return text


def add_migrate_command(command) -> None:
    """`migrate`, through ``command`` (``arguments.command_adder``)."""
    command("migrate", cmd_migrate, "apply the database schema (idempotent, safe to run concurrently)")


def add_prune_command(command) -> None:
    """`prune`, through ``command`` (``arguments.command_adder``)."""
    p = command("prune", cmd_prune, "delete finished jobs (and their history) older than N days, and the time "
                "page's aggregates older than its longest window (a week)")
    p.add_argument("--older-than", type=age_days, required=True, metavar="DAYS",
                   help="finished at least DAYS days ago, up to 36500 (required)")
    p.add_argument("--batch", type=whole(inputs.HOW_MANY), default=1000, help="rows deleted per statement")


def add_doctor_command(command) -> None:
    """`doctor`, through ``command`` (``arguments.command_adder``)."""
    from ..operating.doctor import DEFAULT_MAX_JOBS_CHECKED, DEFAULT_MAX_TRANSACTION_AGE_SECONDS

    p = command("doctor", cmd_doctor, "check the database, schema, Jenkins, the queued jobs and the webhook; "
                                      "exit 0 only if every check passes")
    p.add_argument("--webhook-url", type=http_url, metavar="URL",
                   help="also probe the webhook (serve: http://HOST:PORT/jenkins/notify); the probe changes nothing")
    p.add_argument("--max-transaction-age", type=non_negative_float, default=DEFAULT_MAX_TRANSACTION_AGE_SECONDS,
                   metavar="S", help="fail when a transaction has been open longer than S seconds")
    p.add_argument("--max-jobs", type=whole(inputs.HOW_MANY), default=DEFAULT_MAX_JOBS_CHECKED, metavar="N",
                   help="check at most N job names waiting in the queue, those with the most rows first")
