"""`jenkins-dispatch`: the operator's command line. Tables for people, `--json` for scripts.

Bad input exits 2 with one line on stderr and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from . import __version__, inputs, moments
from .config import (
    DEFAULT_CONTROLLER,
    SERVE_HOST,
    SERVE_INTERVAL_SECONDS,
    SERVE_PORT,
    UI_PORT,
    UI_REFRESH_SECONDS,
    DatabaseSettings,
    Settings,
    load_controllers,
    load_cutover_window,
    load_database_settings,
    load_jenkins_settings,
    load_settings,
    load_tuning,
)
from .errors import OPERATION_FAILED, DispatchError, InvalidInput
from .jenkins.jobs import JsonNumber, job_name_error
from .operating import bulk, timeline
from .operating.display import age, cell, clip, fit_widths, limit_change, one_line, when
from .operating.waiting import held_back
from .store.db import Database, Session
from .store.levers import Levers
from .store.migrations import migrate
from .store.producers import Producers
from .store.queue import STATUSES
from .store.schedules import check_name

EXIT_FAILED = 1  # the operation failed: database or Jenkins unavailable, a pass stopped by Jenkins
EXIT_BAD_INPUT = 2  # bad input or configuration: nothing changed


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default (when it has one worth telling); epilogs keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        untold = action.default is None or action.default is False or action.default is argparse.SUPPRESS
        if action.option_strings and not untold and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; we want exactly one line on stderr."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse's API
        """Exit 2 with one line on stderr, instead of argparse's usage block."""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")

    def add_commands(self, dest: str) -> argparse._SubParsersAction:
        """Subcommands; without one, ``main`` answers "choose a command: ..." (argparse would name ``dest``)."""
        commands = self.add_subparsers(dest=dest, parser_class=OneLineParser, metavar="COMMAND")
        self.set_defaults(func=None, missing_command=(self, commands))
        return commands


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json`` here or on any parser above: SUPPRESS keeps this parser's default from hiding the other's."""
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output (also accepted before the command)")


def environment_help() -> str:
    """The environment variables every command reads, with their defaults: from config's own table."""
    from .config import ENVIRONMENT

    width = max(len(v.name) for v in ENVIRONMENT)
    default_width = max(len(v.shown_default()) for v in ENVIRONMENT)
    lines = ["environment variables (default in the second column; - means unset):"]
    lines += [f"  {v.name.ljust(width)}  {v.shown_default().ljust(default_width)}  {v.meaning}"
              + (f" [{v.minimum:g} to {v.maximum:g}]" if v.maximum is not None else "") for v in ENVIRONMENT]
    return "\n".join(lines)


# --------------------------------------------------------------------------- argument types

def parse_time(text: str) -> datetime:
    """ISO 8601 (no zone means UTC), or relative to now: +30s, +5m, +2h, +1d."""
    try:
        return moments.later(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_since(text: str) -> datetime:
    """A moment in the past: `1h`, `30m`, `2d` mean that long ago, or an ISO 8601 time (``moments.since``)."""
    try:
        return moments.since(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a (key, value) pair: the one reading of enqueue's ``-p`` and the filters' ``--param``
    (the queue checks the key a filter names)."""
    from .operating.bulk import parse_key_value as split

    try:
        return split(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_json_object(text: str) -> dict:
    """``--params`` as a dict: valid JSON, and an object."""
    try:
        value = json.loads(text, parse_float=JsonNumber, parse_int=JsonNumber)  # numbers kept as written
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--params is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--params must be a JSON object")
    if error := inputs.parameters_error(value):
        raise argparse.ArgumentTypeError(error)
    return value


def read_by(read: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argument type from a reader that raises InvalidInput (``inputs``, ``store.schedules``): argparse names the
    option or argument in its one line (``argument --priority: …``), exit 2, before anything is read or stored.
    ``name``: the type's name in argparse's own messages."""

    def argument(text: str) -> Any:
        try:
            return read(text)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    argument.__name__ = name
    return argument


def refusing(fault: Callable[[str], str | None], name: str) -> Callable[[str], str]:
    """An argument type that takes the text as it is unless ``fault`` (``inputs``, ``jenkins.jobs``) says why it
    cannot be stored: then argparse's one line names the option, exit 2."""

    def argument(text: str) -> str:
        if error := fault(text):
            raise argparse.ArgumentTypeError(error)
        return text

    argument.__name__ = name
    return argument


def whole(allowed: inputs.Range) -> Callable[[str], int]:
    """A whole number in ``allowed``: the range of the column the value is stored in (``inputs``)."""
    return read_by(lambda text: inputs.whole_number(text, allowed), "whole number")


job_name = refusing(job_name_error, "job name")
dedupe_key = refusing(inputs.dedupe_key_error, "dedupe key")
controller_name = refusing(inputs.controller_name_error, "controller")
schedule_name = read_by(check_name, "schedule name")
age_days = read_by(lambda text: inputs.number(text, inputs.AGE_DAYS), "number of days")
SERVE_INTERVAL_LONGEST = 86_400  # a pass at least once a day; a wait of 1e300 s overflows the clock (OverflowError)


def non_negative_float(text: str) -> float:
    """An argument that must be a number, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def interval_seconds(text: str) -> float:
    """``serve --interval``: a number of seconds, at least 0.1 (and at most a day: the loop must wake)."""
    value = non_negative_float(text)
    if value < 0.1:
        raise argparse.ArgumentTypeError(f"expected at least 0.1 seconds, got {text}")
    if value > SERVE_INTERVAL_LONGEST:
        raise argparse.ArgumentTypeError(f"expected at most {SERVE_INTERVAL_LONGEST} seconds, got {text}")
    return value


# --------------------------------------------------------------------------- output


def _plain(value):
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def json_text(value, level: int = 0) -> str:
    """``value`` as JSON indented by two spaces, as ``json.dumps(indent=2)`` writes it (dates as text, decimals
    as numbers), but a parameter's number (JsonNumber) written as its digits: 1.50 stays 1.50."""
    if isinstance(value, JsonNumber):
        return str(value)
    inner, outer = "  " * (level + 1), "  " * level
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k))}: {json_text(v, level + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{outer}}}"
    if isinstance(value, list | tuple) and value:
        return "[\n" + ",\n".join(f"{inner}{json_text(v, level + 1)}" for v in value) + f"\n{outer}]"
    return json.dumps(value, default=_plain)


def print_json(data) -> None:
    """Print ``data`` as indented JSON (dates and decimals as text), for ``--json``."""
    print(json_text(data))


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], empty: str = "(none)", *, width: int | None = None,
                flexible: Sequence[str] = ()) -> None:
    """Print ``rows`` as a table of ``columns`` for people, or ``empty`` when there are none. With ``width``, the
    ``flexible`` columns give up characters (their cells cut with '…') until each line fits in it."""
    if not rows:
        print(empty)
        return
    cells = [[one_line(cell(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    if width is not None:
        widths = fit_widths(widths, [c in flexible for c in columns], [len(c) for c in columns], width)
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(clip(v, w).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


# --------------------------------------------------------------------------- commands


class Context:
    """Settings and a database session, read and opened only when a command needs them: a command reads the
    settings it uses and no others (`migrate` only the database's, so an unfinished Jenkins setup never stops it)."""

    def __init__(self, settings_loader: Callable[[], Settings]):
        self._load = settings_loader
        self._settings: Settings | None = None
        self._database: DatabaseSettings | None = None
        self._tuning_checked = False
        self._db: Session | None = None

    @property
    def settings(self) -> Settings:
        """Every setting, loaded on first use (commands that need none never fail on them)."""
        if self._settings is None:
            self._settings = self._load()
        return self._settings

    @property
    def controllers(self) -> list[str]:
        """The names of the configured controllers: the settings' when loaded, else JENKINS_URL's and
        JENKINS_CONTROLLERS' alone (a cap or a schedule needs no other setting)."""
        if self._settings is not None:
            return list(self._settings.controllers_by_name())
        return [c.name for c in load_controllers(default=load_jenkins_settings())]

    def configured(self, controller: str, option: str = "--controller") -> str:
        """``controller`` when it is configured here; else InvalidInput naming ``option`` (exit 2): something
        stored for it would hold or feed rows no dispatcher sends."""
        if error := inputs.controller_error(controller, self.controllers):
            raise InvalidInput(f"{option}: {error}")
        return controller

    @property
    def database(self) -> DatabaseSettings:
        """The database settings alone (DATABASE_URL or DB_SECRET_ARN, the DB_* limits)."""
        if self._settings is not None:
            return self._settings.database
        if self._database is None:
            self._database = load_database_settings()
        return self._database

    @property
    def db(self) -> Session:
        """The command's database session, opened on first use."""
        if self._db is None:
            self._db = Database(self.database, application_name="jenkins-dispatch-cli")
        return self._db

    @property
    def queue(self) -> Levers:
        """The levers and reports on the command's session, once the dispatch settings are found valid (not
        Jenkins's): a bad one stops the command before it reads or changes anything."""
        self._check_tuning()
        return Levers(self.db)

    @property
    def producers(self) -> Producers:
        """Enqueuing on the command's session, once the dispatch settings are found valid (as ``queue``)."""
        self._check_tuning()
        return Producers(self.db)

    def _check_tuning(self) -> None:
        if not self._tuning_checked and self._settings is None:
            load_tuning()  # raises ConfigError naming the variable
        self._tuning_checked = True

    def close(self) -> None:
        """Close the session if one was opened."""
        if self._db is not None:
            self._db.close()


def cmd_migrate(ctx: Context, args) -> None:
    """`migrate`: apply the pending migrations."""
    # The database's settings and the cutover window only: nothing else must stop a migration.
    applied = migrate(ctx.db, load_cutover_window())
    if args.json:
        print_json({"applied": applied})
    else:
        print("applied " + ", ".join(applied) if applied else "schema is up to date")


def cmd_enqueue(ctx: Context, args) -> None:
    """`enqueue`: add one job (or find the unfinished one with the same dedupe key)."""
    parameters = dict(args.params or {})
    parameters.update(dict(args.param or []))
    result = ctx.producers.enqueue(
        args.job, parameters, priority=args.priority, scheduled_at=args.at,
        max_attempts=args.max_attempts, dedupe_key=args.dedupe_key, controller=args.controller,
    )
    if args.json:
        print_json({"id": result.id, "created": result.created})
    elif result.created:
        print(f"enqueued job {result.id}")
    else:
        print(f"job {result.id} with dedupe key {args.dedupe_key!r} is already queued; nothing added")


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
    from .jenkins.controllers import links_for
    from .operating.operator import Caps, list_jobs_waiting

    rows = list_jobs_waiting(ctx.queue, Caps.of(ctx.settings), status=args.status, job_name=args.job,
                             since=args.since, error_like=args.error_like, parameters=dict(args.param or []),
                             before_id=args.before, limit=args.limit, controller=args.controller)
    if args.json:  # every field `show --json` has for the job, its links and why it waits (not its history)
        print_json([dict(r, links=links_for(ctx.settings, r)) for r in rows])
        return
    now = datetime.now(UTC)
    shown = [_list_row(r, now) for r in rows]
    if args.wide:
        print_table(shown, WIDE_COLUMNS, empty="no jobs match")
    else:
        print_table(shown, LIST_COLUMNS, empty="no jobs match", width=LIST_WIDTH, flexible=LIST_FLEXIBLE)
    if len(rows) == args.limit:
        print(f"(more: --before {rows[-1]['id']})")


def cmd_show(ctx: Context, args) -> None:
    """`show ID`: one job, its Jenkins links, why it waits and its history."""
    from .operating.operator import job_details  # Jenkins links and history

    details = job_details(ctx.queue, args.id, ctx.settings)
    if args.json:
        print_json(details)
        return
    job = details["job"]
    width = max(len(k) for k in job)
    for key, value in job.items():
        print(f"{key.ljust(width)}  {cell(value)}")
        if key == "status" and details["waiting"]:  # the first thing to know about a pending job
            print(f"{'waiting'.ljust(width)}  {details['waiting']['text']}")
        if key == "status" and details["stranded"]:  # ...and about one whose controller was removed
            print(f"{'stranded'.ljust(width)}  {details['stranded']}")
    for label, link in details["links"].items():
        print(f"{label.ljust(width)}  {link}")
    print()
    print_table(details["history"], ["at", "event", "from_status", "to_status", "actor", "dispatch_id", "detail"],
                empty="no history")


def _pause_text(pause) -> str:
    who = f" by {pause.paused_by}" if pause.paused_by else ""
    why = f": {pause.reason}" if pause.reason else ""
    return f"since {when(pause.paused_at)}{who}{why}"


JENKINS_WORDS = {"ok": "up", "unavailable": "down", "unknown": "-"}


def cmd_stats(ctx: Context, args) -> None:
    """`stats`: counts per status, per controller and per job, pauses and live dispatchers."""
    from .operating.overview import controllers_of  # the web page's reads too

    stats = ctx.queue.stats()
    per_job = ctx.queue.stats_per_job()
    dispatchers = ctx.queue.dispatchers()
    pauses = ctx.queue.pauses()
    controllers = controllers_of(ctx.queue, ctx.settings, pauses, dispatchers)
    if args.json:
        print_json({"totals": stats, "controllers": controllers, "jobs": per_job,
                    "pauses": [p.as_dict() for p in pauses], "dispatchers": dispatchers})
        return
    print(
        f"pending {stats['pending']} (due {stats['due']})  processing {stats['processing']} "
        f"(lease expired {stats['leases_expired']})  oldest pending {age(stats['oldest_pending_seconds'])}"
    )
    print(
        f"last hour: completed {stats['completed_last_hour']}  failed {stats['failed_last_hour']}  "
        f"cancelled {stats['cancelled_last_hour']}   oldest open transaction {age(stats['oldest_transaction_seconds'])}"
    )
    print(dispatchers_line(dispatchers))
    for pause in pauses:
        if pause.job_name is None and pause.controller is None:
            print(f"EVERYTHING IS PAUSED {_pause_text(pause)}: nothing new is dispatched "
                  "(`jenkins-dispatch resume` lifts it)")
        elif pause.job_name is None:
            print(f"CONTROLLER {pause.controller} IS PAUSED {_pause_text(pause)}: none of its rows is dispatched "
                  f"(`jenkins-dispatch resume --controller {pause.controller}` lifts it)")
        else:
            print(f"paused: {_pause_target(pause.job_name, pause.controller)} {_pause_text(pause)}")
    if len(controllers) > 1 or any(c["controller"] != DEFAULT_CONTROLLER for c in controllers):
        # Several controllers: each one's backlog, in flight against its own cap, and whether it is paused.
        print()
        # "jenkins": its breaker as the live dispatchers last found it (their heartbeats; "-": none said).
        print_table([dict(c, in_flight=f"{c['in_flight']}/{c['cap'] if c['cap'] is not None else '-'}",
                          jenkins=JENKINS_WORDS[c["jenkins"]["status"]])
                     for c in controllers], ["controller", "pending", "due", "in_flight", "state", "jenkins"])
        for c in controllers:
            if c["note"]:
                print(c["note"])
            if c["jenkins"]["status"] == "unavailable":
                print(f"controller {c['controller']}: Jenkins unavailable since {c['jenkins']['since']}, as "
                      f"{c['jenkins']['seen_by']} found it: {c['jenkins']['reason']}")
    print()
    rows = [
        dict(r, in_flight=f"{r['in_flight']}/{r['cap'] if r['cap'] is not None else '-'}",
             oldest_pending=age(r["oldest_pending_seconds"]),
             held_back=held_back(paused=r["paused"], cap=r["cap"], in_flight=r["in_flight"], pending=r["pending"],
                                 paused_on=r["paused_on"]))
        for r in per_job
    ]
    print_table(rows, ["job_name", "pending", "in_flight", "held_back", "completed_last_hour", "failed_last_hour",
                       "oldest_pending"], empty="no jobs")


def _operator_name() -> str | None:
    """Who runs this command, for the record of a pause: user@host."""
    import pwd
    import socket

    try:
        return f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"
    except (KeyError, OSError):
        return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _pause_target(job: str | None, controller: str | None) -> str:
    """What a pause holds back, in words: `deploy`, `everything`, `deploy on eu`, `controller eu`."""
    if controller is None:
        return job or "everything"
    return f"{job} on {controller}" if job else f"controller {controller}"


def cmd_pause(ctx: Context, args) -> None:
    """`pause [JOB] [--controller C]`: stop claiming one job (or every job), on one controller or on every
    one, until resumed. A controller given must be configured here: its rows fail at their first pass anyway."""
    if args.controller is not None:
        ctx.configured(args.controller)
    result = ctx.queue.pause(args.job, reason=args.reason, paused_by=_operator_name(), controller=args.controller)
    if args.json:
        print_json(dict(result.as_dict(), created=result.created, changed=result.created, pending=result.pending))
        return
    target = _pause_target(args.job, args.controller)
    resume = ("`jenkins-dispatch resume" + (f" {args.job}" if args.job else "")
              + (f" --controller {args.controller}" if args.controller else "") + "`")
    if result.created:
        waiting = (f"no pending jobs of {target} now; any enqueued will wait" if args.job and result.pending == 0
                   else f"{_plural(result.pending, 'pending job')} wait")
        print(f"paused {target}: {waiting} until {resume}; jobs already in Jenkins continue")
    else:
        print(f"{target} was already paused ({_pause_text(result)}); nothing changed")
        if args.job and result.pending == 0:
            print(f"no pending jobs of {target} now")


def cmd_resume(ctx: Context, args) -> None:
    """`resume [JOB] [--controller C]`: lift a pause (the one given for that controller, or for every one)."""
    result = ctx.queue.resume(args.job, controller=args.controller)
    if args.json:
        print_json({"job_name": args.job, "everything": args.job is None, "controller": args.controller,
                    "resumed": result.resumed, "changed": result.resumed, "pending": result.pending,
                    "still_paused": [p.as_dict() for p in result.still_paused]})
        return
    target = _pause_target(args.job, args.controller)
    if result.resumed:
        print(f"resumed {target}: {_plural(result.pending, 'pending job')} may be dispatched again")
    elif args.job or args.controller:
        print(f"{target} was not paused; nothing changed")
    else:
        print("everything was not paused (no pause of every job was in force); nothing changed")
    if args.job and result.pending == 0:
        print(f"no pending jobs of {target} now")
    for pause in result.still_paused:  # what still holds the same rows back, and how to lift it
        if pause.controller is not None and args.controller is not None and pause.controller != args.controller:
            continue
        if pause.job_name is not None and args.job is not None and pause.job_name.lower() != args.job.lower():
            continue
        if (pause.job_name, pause.controller) == (args.job, args.controller):
            continue
        if args.job is None and args.controller is None and pause.job_name is not None:
            continue  # listed below, together
        how = ("`jenkins-dispatch resume" + (f" {pause.job_name}" if pause.job_name else "")
               + (f" --controller {pause.controller}" if pause.controller else "") + "`")
        print(f"{_pause_target(pause.job_name, pause.controller)} is still paused ({_pause_text(pause)}): {how} "
              "lifts it")
    own = [_pause_target(p.job_name, p.controller) for p in result.still_paused if p.job_name is not None]
    if not args.job and not args.controller and own:
        print(f"still paused on their own: {', '.join(own)} (`jenkins-dispatch resume JOB` lifts each)")


def dispatchers_line(dispatchers: Sequence[Mapping[str, Any]]) -> str:
    """One line: the live dispatchers with the age and outcome of each one's last pass, or plainly none."""

    def last_pass(d: Mapping[str, Any]) -> str:
        detail = f" ({d['last_detail']})" if d.get("last_detail") else ""
        served = sorted(d.get("controllers") or ())
        # The controllers it serves, when that says more than "the default one".
        serves = f" [controllers {', '.join(served)}]" if served and served != [DEFAULT_CONTROLLER] else ""
        return f"{d['id']} {age(d['last_pass_seconds'])} ago: {d['last_outcome']}{detail}{serves}"

    live = [d for d in dispatchers if d["live"]]
    if live:
        return f"dispatchers: {len(live)} live - " + "; ".join(last_pass(d) for d in live)
    if dispatchers:
        return "dispatchers: none live; the last pass was " + last_pass(dispatchers[0])
    return "dispatchers: none live; no dispatcher has passed in the last day"


def cmd_cancel(ctx: Context, args) -> int:
    """`cancel`: one job by id (in Jenkins too), or many by filters through ``bulk``."""
    from .operating.operator import cancel_job

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
    from .operating.operator import retry_job

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
            if args.json:
                print_json({"action": action, "dry_run": not args.yes, "matched": total, "ids": ids})
            else:
                print(bulk.match_line(action, ids, total, args.limit))
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


def _on(controller: str) -> str:
    """" on C" after a job's name, for any controller but the default one (whose name the output never needed)."""
    return "" if controller == DEFAULT_CONTROLLER else f" on {controller}"


def cmd_limits_set(ctx: Context, args) -> None:
    """`limits set JOB [N] [--per-minute M] [--controller C]`: at most N of the job in flight, at most M started in
    any minute, on that controller (one configured here); what is not given stays as it was, and a cap or rate the
    job already has changes nothing (and says so)."""
    if args.n is None and args.per_minute is None:
        raise InvalidInput("give a cap (N, jobs in flight at most) or --per-minute M (starts per minute), or both")
    ctx.configured(args.controller)
    where = _on(args.controller)
    changed = {}
    if args.per_minute is not None:
        changed["rate"] = ctx.queue.set_rate(args.job, args.per_minute, args.controller,
                                             changed_by=_operator_name()).changed
    if args.n is not None:
        changed["cap"] = ctx.queue.set_limit(args.job, args.n, args.controller, changed_by=_operator_name()).changed
    if args.json:
        print_json({"job_name": args.job, "controller": args.controller, "max_in_flight": args.n,
                    "per_minute": args.per_minute, "changed": any(changed.values()),
                    **{f"{kind}_changed": was for kind, was in changed.items()}})
        return
    if args.n is not None and not changed["cap"]:
        print(f"{args.job}{where}: the cap is already {args.n}; nothing changed")
    elif args.n is not None:
        pause = f"pause {args.job}" + (f" --controller {args.controller}" if where else "")
        print(f"{args.job}{where}: at most {args.n} in flight"
              + (" (held back until the cap is raised or removed; to stop a job for a while, `jenkins-dispatch "
                 f"{pause}` says so everywhere)" if args.n == 0 else ""))
    if args.per_minute is not None and not changed["rate"]:
        print(f"{args.job}{where}: the rate is already {args.per_minute} per minute; nothing changed")
    elif args.per_minute is not None:
        print(f"{args.job}{where}: at most {args.per_minute} started in any minute, by all dispatchers together")


def cmd_limits_rm(ctx: Context, args) -> None:
    """`limits rm JOB [--cap | --per-minute] [--controller C]`: remove the job's cap and rate on that controller (or
    only the one named)."""
    removed = {}
    if not args.per_minute:
        removed["cap"] = ctx.queue.remove_limit(args.job, args.controller, changed_by=_operator_name())
    if not args.cap:
        removed["rate"] = ctx.queue.remove_rate(args.job, args.controller, changed_by=_operator_name())
    # none to remove: already as asked, exit 0 and say so
    if args.json:
        print_json({"job_name": args.job, "controller": args.controller, "removed": any(removed.values()),
                    "changed": any(removed.values()), **{f"{kind}_removed": gone for kind, gone in removed.items()}})
        return
    name = f"{args.job}{_on(args.controller)}"
    gone = [kind for kind, was in removed.items() if was]
    asked = " or ".join(removed)
    print(f"{name}: no {' and no '.join(gone)} now" if gone else f"{name} had no {asked}; nothing changed")


def cmd_limits_ls(ctx: Context, args) -> None:
    """`limits ls`: every job's cap with its jobs in flight, its rate with its starts of the last minute."""
    rows = ctx.queue.limits()
    if args.json:
        print_json(rows)
    else:
        print_table(rows, ["job_name", "controller", "max_in_flight", "in_flight", "per_minute", "started_last_minute"],
                    empty="no per-job limits")


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


def cmd_dispatch(ctx: Context, args) -> int:
    """`dispatch`: run one pass now; exit 1 when Jenkins stopped it or a controller's lane failed."""
    from .dispatching.dispatcher import run_pass
    from .dispatching.heartbeat import Heartbeat
    from .observability import metrics

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
    from .serve import serve

    serve(ctx.settings, host=args.host, port=args.port, interval=args.interval, ui=args.ui)


def cmd_ui(ctx: Context, args) -> None:
    """`ui`: the operator's web page, until SIGTERM / SIGINT."""
    from .ui.server import run_ui

    run_ui(ctx.settings, args.host, args.port, read_only=args.read_only, refresh_seconds=args.refresh)


def cmd_doctor(ctx: Context, args) -> int:
    """`doctor`: run every check; exit 1 when one fails."""
    from .operating.doctor import DoctorOptions, failure_line, healthy, render, run_checks

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


# --------------------------------------------------------------------------- parser


def add_text_filters(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The filters on a job's error and parameters, the same for `ls`, `retry` and `cancel` (and the page)."""
    p.add_argument("--error-like", metavar="TEXT",
                   help=f"{prefix}last_error contains TEXT, ignoring case (%% and _ match themselves)")
    p.add_argument("--param", action="append", type=parse_key_value, metavar="KEY=VALUE",
                   help=f"{prefix}the parameter KEY, as text, equals VALUE (repeatable, up to 3)")


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


# --------------------------------------------------------------------------- schedule (docs/schedules.md)
# A self-contained block: the `schedule` commands and their parser (add_schedule_commands, called once from
# build_parser).


def _schedules(ctx: Context):
    from .store.schedules import Schedules

    return Schedules(ctx.db)


def cmd_schedule_add(ctx: Context, args) -> None:
    """`schedule add NAME JOB --cron EXPR`: enqueue JOB at each tick of EXPR, on a controller configured here."""
    from .operating.scheduling import add_schedule

    parameters = dict(args.param or [])
    ctx.configured(args.controller)
    result = add_schedule(_schedules(ctx), args.name, args.job, parameters, cron=args.cron, timezone=args.timezone,
                          priority=args.priority, controller=args.controller, no_overlap=args.no_overlap)
    if args.json:
        print_json({"name": result.name, "changed": result.changed, "next_tick": result.next_tick,
                    "no_overlap": args.no_overlap})
    else:
        print(f"schedule {result.name}: {args.job} at '{' '.join(args.cron.split())}' ({args.timezone}); "
              f"next tick {when(result.next_tick) if result.next_tick else '-'}"
              + ("; no overlap: a tick is skipped while the previous run is in flight" if args.no_overlap else ""))


def cmd_schedule_ls(ctx: Context, args) -> None:
    """`schedule ls`: every schedule with its state, next tick and last tick."""
    from .operating.scheduling import list_schedules

    rows = list_schedules(_schedules(ctx))
    if args.json:
        print_json(rows)
        return
    shown = [dict(r, next_tick=r["next_tick"] if r["enabled"] else None,
                  last_row=None if r["last_job_id"] is None else f"{r['last_job_id']} {r['last_status'] or 'pruned'}",
                  no_overlap="yes" if r["no_overlap"] else "no")
             for r in rows]
    print_table(shown, ["name", "job_name", "cron", "timezone", "state", "next_tick", "last_tick", "last_row",
                        "no_overlap", "skipped_ticks"],
                empty="no schedules")


def cmd_schedule_rm(ctx: Context, args) -> None:
    """`schedule rm NAME`: delete the schedule (rows it enqueued stay)."""
    from .operating.scheduling import remove_schedule

    remove_schedule(_schedules(ctx), args.name)
    if args.json:
        print_json({"name": args.name, "removed": True})
    else:
        print(f"schedule {args.name} removed (rows it enqueued stay in the queue)")


def cmd_schedule_pause(ctx: Context, args) -> None:
    """`schedule pause NAME`: no more ticks until resumed."""
    from .operating.scheduling import pause_schedule

    result = pause_schedule(_schedules(ctx), args.name, paused_by=_operator_name())
    if args.json:
        print_json({"name": result.name, "paused": True, "changed": result.changed})
    elif result.changed:
        print(f"schedule {args.name} paused: no tick is enqueued until `jenkins-dispatch schedule resume "
              f"{args.name}` (ticks missed meanwhile are not caught up)")
    else:
        print(f"schedule {args.name} was already paused; nothing changed")


def cmd_schedule_set(ctx: Context, args) -> None:
    """`schedule set NAME [--cron EXPR] [--timezone TZ] [--priority N] [--no-overlap | --overlap]`: in place."""
    from .operating.scheduling import change_schedule

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
    from .operating.scheduling import resume_schedule

    result = resume_schedule(_schedules(ctx), args.name)
    if args.json:
        print_json({"name": result.name, "paused": False, "changed": result.changed, "next_tick": result.next_tick})
    elif result.changed:
        print(f"schedule {result.name} resumed: next tick {when(result.next_tick) if result.next_tick else '-'}")
    else:
        print(f"schedule {result.name} was not paused; nothing changed")


def command_adder(commands):
    """``command(name, func, help)``: a subcommand of ``commands`` that runs ``func``, with --json, its help as its
    description."""
    def command(name, func, help_text):
        p = commands.add_parser(name, help=help_text, description=help_text)
        add_json_option(p)
        p.set_defaults(func=func)
        return p
    return command


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command, its options and help."""
    parser = OneLineParser(
        prog="jenkins-dispatch", description=__doc__.splitlines()[0],
        epilog="exit codes: 0 success; 1 the operation failed (database or Jenkins unavailable, schema not applied, "
               "a dispatch pass stopped by Jenkins); 2 bad input or configuration (nothing changed)\n\n"
               + environment_help())
    parser.add_argument("--version", action="version", version=f"jenkins-dispatch {__version__}")
    parser.add_argument("--json", action="store_true", default=False, help="machine-readable output")
    sub = parser.add_commands("command")
    command = command_adder(sub)

    command("migrate", cmd_migrate, "apply the database schema (idempotent, safe to run concurrently)")

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

    command("stats", cmd_stats, "queue counts, in flight per job vs cap, pauses, oldest pending age, live dispatchers")

    p = command("pause", cmd_pause,
                "stop dispatching JOB (every job without one) from the next claim of every dispatcher, until "
                "`resume`; jobs already in Jenkins continue. Kept in the database. JOB need not have any row "
                "yet. Pausing a paused job changes nothing (and says so).")
    p.add_argument("job", nargs="?", type=job_name, metavar="JOB", help="exact job_name (default: everything)")
    p.add_argument("--reason", help="why, shown by stats, show and ls")
    p.add_argument("--controller", type=controller_name, metavar="C",
                   help="on this controller only, one configured here (without JOB: the whole controller, for "
                        "maintenance); default: on every controller")

    p = command("resume", cmd_resume,
                "lift the pause of JOB (without JOB: the pause of everything; jobs paused on their own stay "
                "paused); dispatchers wake at once. Resuming a job that is not paused changes nothing.")
    p.add_argument("job", nargs="?", metavar="JOB", help="exact job_name (default: everything)")
    p.add_argument("--controller", metavar="C",
                   help="the pause given for this controller (default: the pause of every controller); "
                        "each is lifted on its own")

    p = command("cancel", cmd_cancel, "cancel pending or processing jobs: those named, or those the filters "
                "select (with --yes)")
    add_bulk_arguments(p, "cancel")
    p.add_argument("--reason", default="cancelled by operator", help="recorded as the job's last_error")

    p = command("retry", cmd_retry, "send completed, failed or cancelled jobs back to pending: those named, or "
                "those the filters select (with --yes)")
    add_bulk_arguments(p, "retry")

    p = command("prune", cmd_prune, "delete finished jobs (and their history) older than N days, and the time "
                "page's aggregates older than its longest window (a week)")
    p.add_argument("--older-than", type=age_days, required=True, metavar="DAYS",
                   help="finished at least DAYS days ago, up to 36500 (required)")
    p.add_argument("--batch", type=whole(inputs.HOW_MANY), default=1000, help="rows deleted per statement")

    limits = sub.add_parser("limits", help="per-job caps on jobs in flight and rates of starts",
                            description="per-job caps on jobs in flight and rates (starts per minute)")
    add_json_option(limits)
    limits_sub = limits.add_commands("limits_command")
    limit_help = ("cap JOB at N in flight (a cap of 0 holds the job back; to stop a job for a while use "
                  "`pause JOB`, which stats, show and ls name), and/or limit how many of it start in any minute "
                  "(--per-minute M); what is not given stays as it was")
    p = limits_sub.add_parser("set", help=limit_help, description=limit_help)
    p.add_argument("job", type=job_name, metavar="JOB", help="exact job_name")
    p.add_argument("n", type=whole(inputs.CAP), nargs="?", metavar="N", help="jobs in flight at most (0: none)")
    p.add_argument("--per-minute", type=whole(inputs.RATE), metavar="M",
                   help="starts at most M of the job in any 60 s, all dispatchers together")
    p.add_argument("--controller", type=controller_name, default=DEFAULT_CONTROLLER, metavar="C",
                   help="the controller whose JOB this limits, one configured here (default: default); the same "
                        "name elsewhere is another job")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_set)
    p = limits_sub.add_parser("rm", help="remove JOB's cap and rate (or only the one named)")
    p.add_argument("job", metavar="JOB", help="exact job_name")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--cap", action="store_true", help="remove only the cap (the rate stays)")
    which.add_argument("--per-minute", action="store_true", help="remove only the rate (the cap stays)")
    p.add_argument("--controller", default=DEFAULT_CONTROLLER, metavar="C",
                   help="the controller whose limits of JOB to remove (default: default)")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_rm)
    p = limits_sub.add_parser("ls", help="list per-job caps and rates")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_ls)
    p = limits_sub.add_parser("history", help="the latest cap and rate changes, newest first, and who made them")
    p.add_argument("--last", type=whole(inputs.HOW_MANY), default=20, metavar="N",
                   help="show the latest N changes (default: 20)")
    add_json_option(p)
    p.set_defaults(func=cmd_limits_history)

    add_schedule_commands(sub)

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

    from .operating.doctor import DEFAULT_MAX_JOBS_CHECKED, DEFAULT_MAX_TRANSACTION_AGE_SECONDS

    p = command("doctor", cmd_doctor, "check the database, schema, Jenkins, the queued jobs and the webhook; "
                                      "exit 0 only if every check passes")
    p.add_argument("--webhook-url", type=http_url, metavar="URL",
                   help="also probe the webhook (serve: http://HOST:PORT/jenkins/notify); the probe changes nothing")
    p.add_argument("--max-transaction-age", type=non_negative_float, default=DEFAULT_MAX_TRANSACTION_AGE_SECONDS,
                   metavar="S", help="fail when a transaction has been open longer than S seconds")
    p.add_argument("--max-jobs", type=whole(inputs.HOW_MANY), default=DEFAULT_MAX_JOBS_CHECKED, metavar="N",
                   help="check at most N job names waiting in the queue, those with the most rows first")
    return parser


class _Stderr:
    """Whatever sys.stderr is at the moment of writing (tests swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def logs_to_stderr() -> None:
    """Commands print their result on stdout (JSON with --json); log lines must not mix into it."""
    import logging

    from .observability import logger

    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(_Stderr())


def main(argv: Sequence[str] | None = None, settings_loader: Callable[[], Settings] = load_settings) -> int:
    """Run one command; return its exit code (0, 1 operation failed, 2 bad input, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    if args.func is None:
        parser, commands = args.missing_command
        parser.error(f"choose a command: {', '.join(commands.choices)}")
    if args.func not in (cmd_serve, cmd_ui):  # services log to stdout
        logs_to_stderr()
    ctx = Context(settings_loader)
    try:
        code = args.func(ctx, args) or 0
        sys.stdout.flush()
    except DispatchError as exc:
        print(f"jenkins-dispatch: error: {exc}", file=sys.stderr)
        return EXIT_FAILED if isinstance(exc, OPERATION_FAILED) else EXIT_BAD_INPUT
    except BrokenPipeError:  # `jenkins-dispatch ls | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        ctx.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
