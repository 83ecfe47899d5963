"""The command tree and ``main``: parse, run the command, map its errors to exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from ..config import Settings, load_settings
from ..errors import OPERATION_FAILED, DispatchError
from . import keys, limits, maintenance, pauses, processes, queue, reports, schedules
from .arguments import OneLineParser, command_adder
from .context import Context
from .output import EXIT_BAD_INPUT, EXIT_FAILED

DESCRIPTION = "`jenkins-dispatch`: the operator's command line. Tables for people, `--json` for scripts."
def environment_help() -> str:
    """The environment variables every command reads, with their defaults: from config's own table."""
    from ..config import ENVIRONMENT

    width = max(len(v.name) for v in ENVIRONMENT)
    default_width = max(len(v.shown_default()) for v in ENVIRONMENT)
    lines = ["environment variables (default in the second column; - means unset):"]
    lines += [f"  {v.name.ljust(width)}  {v.shown_default().ljust(default_width)}  {v.meaning}"
              + (f" [{v.minimum:g} to {v.maximum:g}]" if v.maximum is not None else "") for v in ENVIRONMENT]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command, its options and help; the commands in the order `--help` lists them."""
    parser = OneLineParser(
        prog="jenkins-dispatch", description=DESCRIPTION,
        epilog="exit codes: 0 success; 1 the operation failed (database or Jenkins unavailable, schema not applied, "
               "a dispatch pass stopped by Jenkins); 2 bad input or configuration (nothing changed)\n\n"
               + environment_help())
    parser.add_argument("--version", action="version", version=f"jenkins-dispatch {__version__}")
    parser.add_argument("--json", action="store_true", default=False, help="machine-readable output")
    sub = parser.add_commands("command")
    command = command_adder(sub)
    maintenance.add_migrate_command(command)
    queue.add_job_commands(command)
    reports.add_stats_command(command)
    pauses.add_pause_and_resume(command)
    queue.add_cancel_and_retry(command)
    maintenance.add_prune_command(command)
    limits.add_limits_commands(sub)
    keys.add_keys_commands(sub)
    schedules.add_schedule_commands(sub)
    processes.add_process_commands(command)
    maintenance.add_doctor_command(command)
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

    from ..observability import logger

    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(_Stderr())


def main(argv: Sequence[str] | None = None, settings_loader: Callable[[], Settings] = load_settings) -> int:
    """Run one command; return its exit code (0, 1 operation failed, 2 bad input, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    if args.func is None:
        parser, commands = args.missing_command
        parser.error(f"choose a command: {', '.join(commands.choices)}")
    if args.func not in (processes.cmd_serve, processes.cmd_ui):  # services log to stdout
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
