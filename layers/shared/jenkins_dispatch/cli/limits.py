"""`limits set|rm|ls|history`: per-job caps on jobs in flight and rates of starts, per controller."""

from __future__ import annotations

from .. import inputs
from ..config import DEFAULT_CONTROLLER
from ..errors import InvalidInput
from ..operating.display import limit_change
from .arguments import add_json_option, concurrency_key, controller_name, job_name, whole
from .context import Context, operator_name
from .output import print_json, print_table


def _on(controller: str) -> str:
    """" on C" after a job's name, for any controller but the default one (whose name the output never needed)."""
    return "" if controller == DEFAULT_CONTROLLER else f" on {controller}"


def cmd_limits_set(ctx: Context, args) -> None:
    """`limits set JOB [N] [--per-minute M] [--controller C]`: at most N of the job in flight, at most M started in
    any minute, on that controller (one configured here); what is not given stays as it was, and a cap or rate the
    job already has changes nothing (and says so). `limits set --key K N`: a key's cap."""
    if args.key is not None:
        _set_key_limit(ctx, args)
        return
    if args.supersede:
        raise InvalidInput("--supersede is a key's: limits set --key K N --supersede")
    if args.job is None:
        raise InvalidInput("give JOB (limits set JOB N) or --key K (limits set --key K N)")
    if args.n is None and args.per_minute is None:
        raise InvalidInput("give a cap (N, jobs in flight at most) or --per-minute M (starts per minute), or both")
    ctx.configured(args.controller)
    where = _on(args.controller)
    changed = {}
    if args.per_minute is not None:
        changed["rate"] = ctx.queue.set_rate(args.job, args.per_minute, args.controller,
                                             changed_by=operator_name()).changed
    if args.n is not None:
        changed["cap"] = ctx.queue.set_limit(args.job, args.n, args.controller, changed_by=operator_name()).changed
    if args.json:
        print_json({"job_name": args.job, "controller": args.controller, "max_in_flight": args.n,
                    "per_minute": args.per_minute, "changed": any(changed.values()),
                    **{f"{kind}_changed": was for kind, was in changed.items()}})
        return
    if args.n is not None:
        print(_cap_line(args, changed["cap"]))
    if args.per_minute is not None and not changed["rate"]:
        print(f"{args.job}{where}: the rate is already {args.per_minute} per minute; nothing changed")
    elif args.per_minute is not None:
        print(f"{args.job}{where}: at most {args.per_minute} started in any minute, by all dispatchers together")


def _set_key_limit(ctx: Context, args) -> None:
    """`limits set --key K N`: at most N rows holding key K in flight, whatever their job or controller. The one
    positional argument is N (argparse gave it the place of JOB)."""
    if args.per_minute is not None or args.controller != DEFAULT_CONTROLLER:
        raise InvalidInput("a key has a cap only, on every controller: limits set --key K N (no --per-minute, no "
                           "--controller)")
    if args.job is None or args.n is not None:
        raise InvalidInput("give the cap: limits set --key K N (N: rows holding K in flight at most, 0: none)")
    try:
        cap = inputs.whole_number(args.job, inputs.CAP)
    except InvalidInput as exc:
        raise InvalidInput(f"N: {exc}") from None
    changed = ctx.queue.set_key_limit(args.key, cap, supersede=args.supersede or False).changed
    newest = {None: "", "pending": "; newest wins: a newer row cancels the older ones waiting",
              "running": "; newest wins: a newer row cancels the older ones waiting and stops those in flight in "
                         "Jenkins"}[args.supersede]
    if args.json:
        print_json({"concurrency_key": args.key, "max_in_flight": cap, "supersede": args.supersede,
                    "changed": changed})
    elif not changed:
        print(f"key {args.key}: the cap is already {cap}{newest}; nothing changed")
    else:
        print(f"key {args.key}: at most {cap} in flight, whatever the job or controller{newest}")


def _cap_line(args, changed: bool) -> str:
    """What `limits set JOB N` did to the cap, and how a cap of 0 differs from a pause."""
    where = _on(args.controller)
    if not changed:
        return f"{args.job}{where}: the cap is already {args.n}; nothing changed"
    pause = f"pause {args.job}" + (f" --controller {args.controller}" if where else "")
    return (f"{args.job}{where}: at most {args.n} in flight"
            + (" (held back until the cap is raised or removed; to stop a job for a while, `jenkins-dispatch "
               f"{pause}` says so everywhere)" if args.n == 0 else ""))


def cmd_limits_rm(ctx: Context, args) -> None:
    """`limits rm JOB [--cap | --per-minute] [--controller C]`: remove the job's cap and rate on that controller (or
    only the one named). `limits rm --key K`: a key's cap."""
    if args.key is not None:
        _remove_key_limit(ctx, args)
        return
    if args.job is None:
        raise InvalidInput("give JOB (limits rm JOB) or --key K (limits rm --key K)")
    removed = {}
    if not args.per_minute:
        removed["cap"] = ctx.queue.remove_limit(args.job, args.controller, changed_by=operator_name())
    if not args.cap:
        removed["rate"] = ctx.queue.remove_rate(args.job, args.controller, changed_by=operator_name())
    # none to remove: already as asked, exit 0 and say so
    if args.json:
        print_json({"job_name": args.job, "controller": args.controller, "removed": any(removed.values()),
                    "changed": any(removed.values()), **{f"{kind}_removed": gone for kind, gone in removed.items()}})
        return
    name = f"{args.job}{_on(args.controller)}"
    gone = [kind for kind, was in removed.items() if was]
    asked = " or ".join(removed)
    print(f"{name}: no {' and no '.join(gone)} now" if gone else f"{name} had no {asked}; nothing changed")


def _remove_key_limit(ctx: Context, args) -> None:
    if args.job is not None or args.cap or args.per_minute or args.controller != DEFAULT_CONTROLLER:
        raise InvalidInput("give JOB or --key K, not both: a key has a cap only, on every controller")
    removed = ctx.queue.remove_key_limit(args.key)
    if args.json:
        print_json({"concurrency_key": args.key, "removed": removed, "changed": removed})
    else:
        print(f"key {args.key}: no cap now" if removed else f"key {args.key} had no cap; nothing changed")


def cmd_limits_ls(ctx: Context, args) -> None:
    """`limits ls`: every job's cap with its jobs in flight, its rate with its starts of the last minute; then every
    key's cap with its rows in flight and waiting (in --json, after the jobs' rows, each with concurrency_key
    where a job's has job_name and controller)."""
    rows = ctx.queue.limits()
    keys = ctx.queue.key_limits()
    if args.json:
        print_json([*rows, *keys])
        return
    if rows or not keys:
        print_table(rows, ["job_name", "controller", "max_in_flight", "in_flight", "per_minute", "started_last_minute"],
                    empty="no per-job limits")
    if keys:
        if rows:
            print()
        print_table([dict(k, supersede="running" if k["stop_running"] else "pending" if k["supersede"] else "no")
                     for k in keys],
                    ["concurrency_key", "max_in_flight", "supersede", "in_flight", "pending"])


def cmd_limits_history(ctx: Context, args) -> None:
    """`limits history [--last N]`: the latest cap and rate changes, newest first, with who made each."""
    rows = ctx.queue.limit_history(args.last)
    if args.json:
        print_json(rows)
        return
    shown = [{**r, "limit": r["kind"], "from": old, "to": new}
             for r in rows for old, new in [limit_change(r)]]
    print_table(shown, ["at", "job_name", "controller", "limit", "from", "to", "changed_by"],
                empty="no cap or rate has been changed")


def add_limits_commands(sub) -> None:
    """`limits set|rm|ls|history` under the top-level parser's commands ``sub``."""
    limits = sub.add_parser("limits", help="per-job caps on jobs in flight and rates of starts",
                            description="per-job caps on jobs in flight and rates (starts per minute)")
    add_json_option(limits)
    limits_sub = limits.add_commands("limits_command")
    limit_help = ("cap JOB at N in flight (a cap of 0 holds the job back; to stop a job for a while use "
                  "`pause JOB`, which stats, show and ls name), and/or limit how many of it start in any minute "
                  "(--per-minute M); what is not given stays as it was")
    p = limits_sub.add_parser("set", help=limit_help, description=limit_help)
    p.add_argument("job", type=job_name, nargs="?", metavar="JOB", help="exact job_name")
    p.add_argument("n", type=whole(inputs.CAP), nargs="?", metavar="N", help="jobs in flight at most (0: none)")
    p.add_argument("--per-minute", type=whole(inputs.RATE), metavar="M",
                   help="starts at most M of the job in any 60 s, all dispatchers together")
    p.add_argument("--controller", type=controller_name, default=DEFAULT_CONTROLLER, metavar="C",
                   help="the controller whose JOB this limits, one configured here (default: default); the same "
                        "name elsewhere is another job")
    p.add_argument("--key", type=concurrency_key, metavar="K",
                   help="cap the rows holding concurrency key K instead, whatever their job or controller: "
                        "limits set --key K N")
    p.add_argument("--supersede", nargs="?", const="pending", choices=("pending", "running"),
                   help="with --key: newest wins, a newer row of K cancels (superseded) the older ones still "
                        "waiting, at the next claim; `--supersede running` also stops those in flight in Jenkins; "
                        "without it, a key's rows all wait their turn")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_set)
    p = limits_sub.add_parser("rm", help="remove JOB's cap and rate (or only the one named), or key K's cap (--key K)")
    p.add_argument("job", nargs="?", metavar="JOB", help="exact job_name")
    p.add_argument("--key", metavar="K", help="remove the cap of concurrency key K instead")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--cap", action="store_true", help="remove only the cap (the rate stays)")
    which.add_argument("--per-minute", action="store_true", help="remove only the rate (the cap stays)")
    p.add_argument("--controller", default=DEFAULT_CONTROLLER, metavar="C",
                   help="the controller whose limits of JOB to remove (default: default)")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_rm)
    p = limits_sub.add_parser("ls", help="list per-job caps and rates, then the keys' caps")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_ls)
    p = limits_sub.add_parser("history", help="the latest cap and rate changes, newest first, and who made them")
    p.add_argument("--last", type=whole(inputs.HOW_MANY), default=20, metavar="N",
                   help="show the latest N changes (default: 20)")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_history)
