"""The parsers' shape and what an argument may be: each is checked before anything is read or stored, and a bad
one is argparse's one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .. import inputs, moments
from ..errors import InvalidInput
from ..jenkins.jobs import JsonNumber, job_name_error
from ..store.schedules import check_name
from .output import EXIT_BAD_INPUT


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


def command_adder(commands):
    """``command(name, func, help)``: a subcommand of ``commands`` that runs ``func``, with --json, its help as its
    description."""
    def command(name, func, help_text):
        p = commands.add_parser(name, help=help_text, description=help_text)
        add_json_option(p)
        p.set_defaults(func=func)
        return p
    return command


def add_text_filters(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The filters on a job's error and parameters, the same for `ls`, `retry` and `cancel` (and the page)."""
    p.add_argument("--error-like", metavar="TEXT",
                   help=f"{prefix}last_error contains TEXT, ignoring case (%% and _ match themselves)")
    p.add_argument("--param", action="append", type=parse_key_value, metavar="KEY=VALUE",
                   help=f"{prefix}the parameter KEY, as text, equals VALUE (repeatable, up to 3)")


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
    from ..operating.bulk import parse_key_value as split

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
concurrency_key = refusing(lambda text: inputs.row_key_error("concurrency", text), "concurrency key")
fairness_key = refusing(lambda text: inputs.row_key_error("fairness", text), "fairness key")
controller_name = refusing(inputs.controller_name_error, "controller")
schedule_name = read_by(check_name, "schedule name")
age_days = read_by(lambda text: inputs.number(text, inputs.AGE_DAYS), "number of days")


def non_negative_float(text: str) -> float:
    """An argument that must be a number, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value
