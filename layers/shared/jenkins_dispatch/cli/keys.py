"""`keys derive|rm|ls`: the keys a job's rows are given from their parameters when their INSERT leaves them out
(docs/concurrency-keys.md), so that an application's plain INSERT gets its concurrency and fairness keys without a
change to its SQL."""

from __future__ import annotations

from .. import inputs
from ..errors import InvalidInput
from .arguments import add_json_option, job_name, refusing
from .context import Context, operator_name
from .output import print_json, print_table

concurrency_template = refusing(lambda text: inputs.key_template_error("concurrency", text), "concurrency key template")
fairness_template = refusing(lambda text: inputs.key_template_error("fairness", text), "fairness key template")


def cmd_keys_derive(ctx: Context, args) -> None:
    """`keys derive JOB [--key TEMPLATE] [--fair TEMPLATE]`: JOB's rule, replacing the one it had."""
    if args.key is None and args.fair is None:
        raise InvalidInput("give --key TEMPLATE, --fair TEMPLATE or both (deploy:{ENV}: the parameter ENV)")
    ctx.queue.set_key_rule(args.job, concurrency_template=args.key, fairness_template=args.fair,
                           changed_by=operator_name())
    if args.json:
        print_json({"job_name": args.job, "concurrency_template": args.key, "fairness_template": args.fair})
        return
    given = [f"{what} {template}" for what, template in (("concurrency key", args.key), ("fairness key", args.fair))
             if template is not None]
    print(f"{args.job}: rows inserted without keys get {' and '.join(given)}, from their parameters "
          "(rows already queued keep theirs)")


def cmd_keys_rm(ctx: Context, args) -> None:
    """`keys rm JOB`: JOB's rows are given no keys any more (rows already queued keep theirs)."""
    removed = ctx.queue.remove_key_rule(args.job)
    if args.json:
        print_json({"job_name": args.job, "removed": removed, "changed": removed})
    else:
        print(f"{args.job}: no key rule now" if removed else f"{args.job} had no key rule; nothing changed")


def cmd_keys_ls(ctx: Context, args) -> None:
    """`keys ls`: every job's key rule."""
    rules = ctx.queue.key_rules()
    if args.json:
        print_json(rules)
        return
    print_table(rules, ["job_name", "concurrency_template", "fairness_template", "changed_by", "updated_at"],
                empty="no key rules: rows get the keys their INSERT sets")


def add_keys_commands(sub) -> None:
    """`keys derive|rm|ls` under the top-level parser's commands ``sub``."""
    text = "the keys a job's rows get from their parameters when their INSERT leaves them out"
    keys = sub.add_parser("keys", help=text, description=text)
    add_json_option(keys)
    keys_sub = keys.add_commands("keys_command")
    text = ("JOB's rows inserted without a concurrency or fairness key get one from a template: {NAME} is the "
            "row's parameter NAME, {job} its job name (--key 'deploy:{ENV}'); a row without that parameter gets "
            "none; replaces JOB's rule, on every controller")
    p = keys_sub.add_parser("derive", help=text, description=text)
    p.add_argument("job", type=job_name, metavar="JOB", help="the job's name (any spelling: compared ignoring case)")
    p.add_argument("--key", type=concurrency_template, metavar="TEMPLATE", help="the concurrency key's template")
    p.add_argument("--fair", type=fairness_template, metavar="TEMPLATE", help="the fairness key's template")
    add_json_option(p)
    p.set_defaults(func=cmd_keys_derive)
    p = keys_sub.add_parser("rm", help="remove JOB's key rule (rows already queued keep their keys)")
    p.add_argument("job", metavar="JOB", help="the job's name")
    add_json_option(p)
    p.set_defaults(func=cmd_keys_rm)
    p = keys_sub.add_parser("ls", help="list every job's key rule")
    add_json_option(p)
    p.set_defaults(func=cmd_keys_ls)
