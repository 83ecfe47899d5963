"""The queue's commands: `enqueue`, `ls`, `show`, and `cancel` / `retry` of one job, several, or those filters
select (through ``operating.bulk``)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from .. import inputs
from ..config import DEFAULT_CONTROLLER
from ..operating import bulk
from ..operating.display import age, cell
from ..store.queue import STATUSES
from .arguments import (
    add_text_filters,
    concurrency_key,
    controller_name,
    dedupe_key,
    fairness_key,
    job_name,
    parse_json_object,
    parse_key_value,
    parse_since,
    parse_time,
    whole,
)
from .context import Context
from .output import EXIT_FAILED, print_json, print_table, with_controller


def cmd_enqueue(ctx: Context, args) -> None:
    """`enqueue`: add one job (or find the unfinished one with the same dedupe key)."""
    parameters = dict(args.params or {})
    parameters.update(dict(args.param or []))
    result = ctx.producers.enqueue(
        args.job, parameters, priority=args.priority, scheduled_at=args.at,
        max_attempts=args.max_attempts, dedupe_key=args.dedupe_key, controller=args.controller,
        concurrency_key=args.key, fairness_key=args.fair,
    )
    if args.json:
        print_json({"id": result.id, "created": result.created})
    elif result.created:
        print(f"enqueued job {result.id}")
    else:
        print(f"job {result.id} with dedupe key {args.dedupe_key!r} is already queued; nothing added")


ROW_KEYS = ("concurrency_key", "fairness_key")  # in `show` when the row has them
LIST_WIDTH = 120  # `ls` fits a line this long; `ls --wide` shows every column whole
LIST_COLUMNS = ["id", "job_name", "status", "attempts", "build", "result", "updated", "waiting", "last_error"]
LIST_FLEXIBLE = ["job_name", "waiting", "last_error"]  # cut (with '…') so that the line fits; whole in --wide
WIDE_COLUMNS = ["id", "job_name", "status", "priority", "attempts", "scheduled_at", "dispatch_id", "build_number",
                "jenkins_result", "updated_at", "waiting", "last_error"]


def _list_row(row: dict, now: datetime) -> dict:
    """A row of `ls` as people read it: attempts of the allowed, the build, how long ago it changed."""
    updated = row["updated_at"]
    return dict(row, attempts=f"{row['attempts']}/{row['max_attempts']}",
                build=None if row["build_number"] is None else f"#{row['build_number']}", result=row["jenkins_result"],
                updated=f"{age((now - updated).total_seconds())} ago" if isinstance(updated, datetime) else updated,
                waiting=row["waiting"] and row["waiting"]["text"])


def cmd_ls(ctx: Context, args) -> None:
    """`ls`: list jobs, newest first, each pending one with why it waits and each with its last error."""
    from ..jenkins.controllers import controllers_told_apart, links_for
    from ..operating.operator import Caps, list_jobs_waiting

    rows = list_jobs_waiting(ctx.queue, Caps.of(ctx.settings), status=args.status, job_name=args.job,
                             since=args.since, error_like=args.error_like, parameters=dict(args.param or []),
                             before_id=args.before, limit=args.limit, controller=args.controller)
    if args.json:  # every field `show --json` has for the job, its links and why it waits (not its history)
        print_json([dict(r, links=links_for(ctx.settings, r)) for r in rows])
        return
    now = datetime.now(UTC)
    shown = [_list_row(r, now) for r in rows]
    told_apart = controllers_told_apart(ctx.controllers, rows)
    if args.wide:
        print_table(shown, with_controller(WIDE_COLUMNS, told_apart), empty="no jobs match")
    else:
        print_table(shown, with_controller(LIST_COLUMNS, told_apart), empty="no jobs match", width=LIST_WIDTH,
                    flexible=LIST_FLEXIBLE)
    if len(rows) == args.limit:
        print(f"(more: --before {rows[-1]['id']})")


def cmd_show(ctx: Context, args) -> None:
    """`show ID`: one job, its Jenkins links, why it waits and its history."""
    from ..operating.operator import job_details  # Jenkins links and history

    details = job_details(ctx.queue, args.id, ctx.settings)
    if args.json:
        print_json(details)
        return
    # The keys are left out when the row has none: most rows have none, and two lines of "-" say nothing.
    job = {k: v for k, v in details["job"].items() if k not in ROW_KEYS or v is not None}
    width = max(len(k) for k in job)
    for key, value in job.items():
        print(f"{key.ljust(width)}  {cell(value)}")
        if key == "status":  # in one sentence: what became of it, how long it waited and ran
            print(f"{'story'.ljust(width)}  {details['story']}")
        if key == "status" and details["waiting"]:  # the first thing to know about a pending job
            print(f"{'waiting'.ljust(width)}  {details['waiting']['text']}")
        if key == "status" and details["stranded"]:  # ...and about one whose controller was removed
            print(f"{'stranded'.ljust(width)}  {details['stranded']}")
    for label, link in details["links"].items():
        print(f"{label.ljust(width)}  {link}")
    print()
    print_table(details["history"], ["at", "event", "from_status", "to_status", "actor", "dispatch_id", "detail"],
                empty="no history")


def cmd_cancel(ctx: Context, args) -> int:
    """`cancel`: one job by id (in Jenkins too), or many by filters through ``bulk``."""
    from ..operating.operator import cancel_job

    if not _one_id(args):
        return run_bulk(ctx, args, bulk.CANCEL)
    outcome = cancel_job(ctx.queue, args.ids[0], ctx.settings, reason=args.reason)
    if args.json:
        print_json(outcome)
    else:
        print(outcome["message"])
    return 0


def cmd_retry(ctx: Context, args) -> int:
    """`retry`: one final job by id back to pending, or many by filters through ``bulk``."""
    from ..operating.operator import retry_job

    if not _one_id(args):
        return run_bulk(ctx, args, bulk.RETRY)
    outcome = retry_job(ctx.queue, args.ids[0])
    if args.json:
        print_json(outcome)
    else:
        print(outcome["message"])
    return 0


def _filters(args) -> bulk.Filters:
    return bulk.Filters(status=args.status, job_name=args.job, since=args.since, error_like=args.error_like,
                        parameters=dict(args.param or []), controller=args.controller)


def _one_id(args) -> bool:
    """`retry 5` / `cancel 5`: one job, answered as it always was (its refusal is the command's error)."""
    return len(args.ids) == 1 and not _filters(args).given()


def run_bulk(ctx: Context, args, action: str) -> int:
    """Several ids: acted on at once. Filters: say what they match, and act only with --yes. Exit 1 when a
    row failed (the database or Jenkins); rows that changed meanwhile are skipped, not failures."""
    filters = _filters(args)
    bulk.check_request(action, args.ids, filters)
    if args.ids:
        targets = [bulk.Target(job_id) for job_id in dict.fromkeys(args.ids)]
        total = len(targets)
    else:
        selection = bulk.select_targets(ctx.queue, action, filters, args.limit)
        targets, total = selection.rows, selection.total
        if not args.yes or not targets:
            ids = [t.id for t in targets]
            groups = bulk.breakdown(targets)
            if args.json:
                print_json({"action": action, "dry_run": not args.yes, "matched": total, "ids": ids,
                            "by_job": [{"job_name": job, "controller": controller, "jobs": n}
                                       for job, controller, n in groups]})
            else:
                print(bulk.match_line(action, ids, total, args.limit))
                if line := bulk.breakdown_line(groups, bulk.controllers_named(groups, ctx.controllers)):
                    print(line)
            return 0

    def progress(outcome: bulk.Outcome) -> None:
        if not args.json and (line := bulk.progress_line(outcome)) is not None:
            print(line, flush=True)

    outcomes = bulk.act(ctx.queue, ctx.settings, action, targets, progress=progress,
                        **({"reason": args.reason} if action == bulk.CANCEL else {}))
    if args.json:
        print_json(bulk.report(action, outcomes, total))
    else:
        print(bulk.summary_line(action, outcomes, total))
    if failure := bulk.failure_line(action, outcomes):
        sys.stdout.flush()
        print(f"jenkins-dispatch: error: {failure}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def add_bulk_arguments(p: argparse.ArgumentParser, action: str) -> None:
    """Job ids, or filters that select jobs for ``action`` (shown until --yes)."""
    eligible = ", ".join(bulk.ELIGIBLE_STATUSES[action])
    p.add_argument("ids", nargs="*", type=whole(inputs.ID), metavar="ID",
                   help=f"jobs to {action} at once (no --yes needed); or none, and filters")
    p.add_argument("--status", choices=STATUSES, metavar="STATUS", help=f"filter: jobs in this status ({eligible})")
    p.add_argument("--job", metavar="NAME", help="filter: exact job_name")
    p.add_argument("--controller", metavar="NAME", help="filter: jobs of this Jenkins controller")
    p.add_argument("--since", type=parse_since, metavar="TIME",
                   help="filter: changed at or after TIME: 1h, 30m, 2d (that long ago) or ISO 8601")
    add_text_filters(p, "filter: ")
    p.add_argument("--limit", type=whole(inputs.HOW_MANY), default=bulk.DEFAULT_LIMIT, metavar="N",
                   help="with filters: act on at most the first N matching jobs, by id")
    p.add_argument("--yes", action="store_true",
                   help=f"with filters: {action} the jobs they match (without it: say which, change nothing)")


def add_job_commands(command) -> None:
    """`enqueue`, `ls` and `show`, through ``command`` (``arguments.command_adder``)."""
    p = command("enqueue", cmd_enqueue, "queue a Jenkins job")
    p.add_argument("job", type=job_name, metavar="JOB", help="Jenkins job path, folders separated by / (team/app/deploy)")
    p.add_argument("-p", "--param", action="append", type=parse_key_value, metavar="KEY=VALUE",
                   help="a build parameter (repeatable)")
    p.add_argument("--params", type=parse_json_object, metavar="JSON", help="build parameters as a JSON object")
    p.add_argument("--priority", type=whole(inputs.PRIORITY), default=0, help="higher runs first")
    p.add_argument("--at", type=parse_time, metavar="TIME", help="not before: ISO 8601 or +5m")
    p.add_argument("--max-attempts", type=whole(inputs.ATTEMPTS), default=3, help="dispatch attempts allowed")
    p.add_argument("--dedupe-key", type=dedupe_key, metavar="K",
                   help="at most one unfinished job per key (at most 255 characters)")
    p.add_argument("--controller", type=controller_name, default=DEFAULT_CONTROLLER, metavar="NAME",
                   help="the Jenkins controller that runs it (JENKINS_CONTROLLERS; default: default)")
    p.add_argument("--key", type=concurrency_key, metavar="K",
                   help="its concurrency key: a shared resource (deploy:prod) that `limits set --key K N` caps, "
                        "whatever the job or controller")
    p.add_argument("--fair", type=fairness_key, metavar="F",
                   help="its fairness key: a group (a team) that waits its turn beside the others, not behind them")

    p = command("ls", cmd_ls, "list jobs, newest first")
    p.add_argument("--status", choices=STATUSES, help="only jobs in this status")
    p.add_argument("--job", help="exact job_name")
    p.add_argument("--since", type=parse_since, metavar="TIME",
                   help="changed at or after TIME: 1h, 30m, 2d (that long ago) or ISO 8601")
    add_text_filters(p)
    p.add_argument("--limit", type=whole(inputs.HOW_MANY), default=50, help="at most this many jobs")
    p.add_argument("--before", type=whole(inputs.ID), metavar="ID", help="page: jobs with a smaller id")
    p.add_argument("-w", "--wide", action="store_true",
                   help=f"every column, nothing cut (by default the table fits {LIST_WIDTH} columns)")
    p.add_argument("--controller", metavar="NAME", help="only jobs of this Jenkins controller")

    p = command("show", cmd_show, "every field of a job, its Jenkins links and its history")
    p.add_argument("id", type=whole(inputs.ID), metavar="ID", help="the job's id")


def add_cancel_and_retry(command) -> None:
    """`cancel` and `retry`, through ``command`` (``arguments.command_adder``)."""
    p = command("cancel", cmd_cancel, "cancel pending or processing jobs: those named, or those the filters "
                "select (with --yes)")
    add_bulk_arguments(p, "cancel")
    p.add_argument("--reason", default="cancelled by operator", help="recorded as the job's last_error")

    p = command("retry", cmd_retry, "send completed, failed or cancelled jobs back to pending: those named, or "
                "those the filters select (with --yes)")
    add_bulk_arguments(p, "retry")
