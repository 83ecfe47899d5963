"""`schedule add|set|ls|rm|pause|resume`: recurring jobs, one row enqueued per tick of a cron expression
(docs/schedules.md)."""

from __future__ import annotations

from .. import inputs
from ..config import DEFAULT_CONTROLLER
from ..operating.display import when
from .arguments import (
    add_json_option,
    command_adder,
    concurrency_key,
    controller_name,
    fairness_key,
    job_name,
    parse_key_value,
    schedule_name,
    whole,
)
from .context import Context, operator_name
from .output import print_json, print_table, with_controller


def _schedules(ctx: Context):
    from ..store.schedules import Schedules

    return Schedules(ctx.db)


def cmd_schedule_add(ctx: Context, args) -> None:
    """`schedule add NAME JOB --cron EXPR`: enqueue JOB at each tick of EXPR, on a controller configured here."""
    from ..operating.scheduling import add_schedule

    parameters = dict(args.param or [])
    ctx.configured(args.controller)
    result = add_schedule(_schedules(ctx), args.name, args.job, parameters, cron=args.cron, timezone=args.timezone,
                          priority=args.priority, controller=args.controller, no_overlap=args.no_overlap,
                          concurrency_key=args.key, fairness_key=args.fair)
    if args.json:
        print_json({"name": result.name, "changed": result.changed, "next_tick": result.next_tick,
                    "no_overlap": args.no_overlap})
    else:
        print(f"schedule {result.name}: {args.job} at '{' '.join(args.cron.split())}' ({args.timezone}); "
              f"next tick {when(result.next_tick) if result.next_tick else '-'}"
              + ("; no overlap: a tick is skipped while the previous run is in flight" if args.no_overlap else ""))


def cmd_schedule_ls(ctx: Context, args) -> None:
    """`schedule ls`: every schedule with its state, next tick and last tick."""
    from ..jenkins.controllers import controllers_told_apart
    from ..operating.scheduling import list_schedules

    rows = list_schedules(_schedules(ctx))
    if args.json:
        print_json(rows)
        return
    shown = [dict(r, next_tick=r["next_tick"] if r["enabled"] else None,
                  last_row=None if r["last_job_id"] is None else f"{r['last_job_id']} {r['last_status'] or 'pruned'}",
                  no_overlap="yes" if r["no_overlap"] else "no")
             for r in rows]
    columns = ["name", "job_name", "cron", "timezone", "state", "next_tick", "last_tick", "last_row", "no_overlap",
               "skipped_ticks"]
    print_table(shown, with_controller(columns, controllers_told_apart(ctx.controllers, rows)), empty="no schedules")


def cmd_schedule_rm(ctx: Context, args) -> None:
    """`schedule rm NAME`: delete the schedule (rows it enqueued stay)."""
    from ..operating.scheduling import remove_schedule

    remove_schedule(_schedules(ctx), args.name)
    if args.json:
        print_json({"name": args.name, "removed": True})
    else:
        print(f"schedule {args.name} removed (rows it enqueued stay in the queue)")


def cmd_schedule_pause(ctx: Context, args) -> None:
    """`schedule pause NAME`: no more ticks until resumed."""
    from ..operating.scheduling import pause_schedule

    result = pause_schedule(_schedules(ctx), args.name, paused_by=operator_name())
    if args.json:
        print_json({"name": result.name, "paused": True, "changed": result.changed})
    elif result.changed:
        print(f"schedule {args.name} paused: no tick is enqueued until `jenkins-dispatch schedule resume "
              f"{args.name}` (ticks missed meanwhile are not caught up)")
    else:
        print(f"schedule {args.name} was already paused; nothing changed")


def cmd_schedule_set(ctx: Context, args) -> None:
    """`schedule set NAME [--cron EXPR] [--timezone TZ] [--priority N] [--no-overlap | --overlap]`: in place."""
    from ..operating.scheduling import change_schedule

    schedules = _schedules(ctx)
    result = change_schedule(schedules, args.name, cron=args.cron, timezone=args.timezone, priority=args.priority,
                             no_overlap=args.no_overlap)
    now = schedules.get(result.name) or {}
    if args.json:
        print_json({"name": result.name, "changed": result.changed,
                    **{key: now.get(key) for key in ("cron", "timezone", "priority", "no_overlap", "next_tick")}})
        return
    if not result.changed:
        print(f"schedule {result.name}: already so; nothing changed")
        return
    overlap = ("no overlap: a tick is skipped while the previous run is pending or processing" if now.get("no_overlap")
               else "overlap allowed: every tick enqueues a row")
    print(f"schedule {result.name}: '{now.get('cron')}' ({now.get('timezone')}), priority {now.get('priority')}, "
          f"{overlap}; next tick {when(result.next_tick) if result.next_tick else '-'}")


def cmd_schedule_resume(ctx: Context, args) -> None:
    """`schedule resume NAME`: ticks again from the next one."""
    from ..operating.scheduling import resume_schedule

    result = resume_schedule(_schedules(ctx), args.name)
    if args.json:
        print_json({"name": result.name, "paused": False, "changed": result.changed, "next_tick": result.next_tick})
    elif result.changed:
        print(f"schedule {result.name} resumed: next tick {when(result.next_tick) if result.next_tick else '-'}")
    else:
        print(f"schedule {result.name} was not paused; nothing changed")


def add_schedule_commands(sub) -> None:
    """`schedule add|set|ls|rm|pause|resume` under the top-level parser's commands ``sub``."""
    text = "recurring jobs: each tick of a cron expression enqueues one row, whatever the number of dispatchers"
    schedule = sub.add_parser("schedule", help=text, description=text)
    add_json_option(schedule)
    command = command_adder(schedule.add_commands("schedule_command"))

    p = command("add", cmd_schedule_add, "enqueue JOB at each tick of a standard five-field cron expression")
    p.add_argument("name", type=schedule_name, metavar="NAME",
                   help="the schedule's name: letters, digits, '_', '-', '.' (at most 200)")
    p.add_argument("job", type=job_name, metavar="JOB", help="Jenkins job path, folders separated by / (team/app/deploy)")
    p.add_argument("--cron", required=True, metavar="EXPR",
                   help="minute hour day-of-month month day-of-week, e.g. '0 3 * * 1-5' (required)")
    p.add_argument("-p", "--param", action="append", type=parse_key_value, metavar="KEY=VALUE",
                   help="a build parameter of every row (repeatable)")
    p.add_argument("--timezone", default="UTC", metavar="TZ",
                   help="IANA zone the expression is read in (Europe/Berlin); daylight-saving changes tick "
                        "neither twice nor never")
    p.add_argument("--priority", type=whole(inputs.PRIORITY), default=0, help="each row's priority (higher runs first)")
    p.add_argument("--controller", type=controller_name, default=DEFAULT_CONTROLLER, metavar="C",
                   help="the controller its rows go to (one configured here)")
    p.add_argument("--no-overlap", action="store_true",
                   help="skip a tick while the previous run of this schedule is still pending or processing "
                        "(counted in skipped_ticks; the next tick after it finished enqueues as usual)")
    p.add_argument("--key", type=concurrency_key, metavar="K", help="each row's concurrency key (enqueue --key)")
    p.add_argument("--fair", type=fairness_key, metavar="F", help="each row's fairness key (enqueue --fair)")
    p = command("set", cmd_schedule_set, "change NAME in place (its ticks, skips and last row stay), from its "
                                         "next tick on")
    p.add_argument("name", metavar="NAME", help="the schedule's name")
    p.add_argument("--cron", metavar="EXPR", help="a new expression; the next tick becomes its first after now")
    p.add_argument("--timezone", metavar="TZ", help="a new IANA zone to read the expression in")
    p.add_argument("--priority", type=whole(inputs.PRIORITY), help="the priority of the rows it enqueues from now on")
    overlap = p.add_mutually_exclusive_group()
    overlap.add_argument("--no-overlap", dest="no_overlap", action="store_true", default=None,
                         help="skip a tick while the previous run is still pending or processing")
    overlap.add_argument("--overlap", dest="no_overlap", action="store_false", default=None,
                         help="enqueue every tick, whatever is in flight (the default of `schedule add`)")
    command("ls", cmd_schedule_ls, "every schedule: state, next tick, last tick and its row, no overlap, skips")
    p = command("rm", cmd_schedule_rm, "delete a schedule (the rows it enqueued stay)")
    p.add_argument("name", metavar="NAME", help="the schedule's name")
    p = command("pause", cmd_schedule_pause, "enqueue no tick of NAME until `schedule resume`")
    p.add_argument("name", metavar="NAME", help="the schedule's name")
    p = command("resume", cmd_schedule_resume,
                "enqueue NAME's ticks again, from the next one (ticks missed while paused are not caught up)")
    p.add_argument("name", metavar="NAME", help="the schedule's name")
