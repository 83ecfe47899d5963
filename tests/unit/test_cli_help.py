"""The CLI's parser (issue 12 item 9): the defaults shown are those in force, every option shows its default,
`--json` before the command is not overridden after it, a group without its command says which to choose."""

import argparse

import pytest

from jenkins_dispatch import config
from jenkins_dispatch.cli.main import build_parser
from jenkins_dispatch.config import load_settings

from ..cli_helpers import exit_code


def subparsers_of(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for inner_name, inner in subparsers_of(sub):
                    yield f"{name} {inner_name}", inner


@pytest.mark.parametrize("name, attribute", [
    ("BATCH_SIZE", "batch_size"), ("LEASE_SECONDS", "lease_seconds"), ("MAX_RESENDS", "max_resends"),
    ("TIME_MARGIN_SECONDS", "time_margin_seconds"), ("DISPATCHER_MODE", "dispatcher_mode"),
    ("WEBHOOK_DB_POOL_SIZE", "webhook_db_pool_size"), ("MAX_PARALLEL_TRIGGERS", "max_parallel_triggers"),
])
def test_the_defaults_shown_are_the_defaults_in_force(name, attribute):
    [variable] = [v for v in config.ENVIRONMENT if v.name == name]
    settings = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db"})
    assert getattr(settings, attribute) == variable.default


def test_every_option_shows_its_default_and_every_positional_has_help():
    for name, sub in subparsers_of(build_parser()):
        text = sub.format_help()
        for action in sub._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name}: positional {action.dest} has no help"
            untold = action.default is None or action.default is False or action.default is argparse.SUPPRESS
            if action.option_strings and not untold:
                assert f"(default: {action.default})" in " ".join(text.split()), (name, action.dest)


def test_every_json_option_leaves_the_one_before_the_command_alone():
    """A subcommand's own `--json` default would overwrite `jenkins-dispatch --json CMD`'s True."""
    for name, sub in subparsers_of(build_parser()):
        for action in sub._actions:
            if "--json" in action.option_strings:
                assert action.default is argparse.SUPPRESS, name


@pytest.mark.parametrize("argv, prog, choices", [
    (["limits"], "jenkins-dispatch limits", ["set", "rm", "ls"]),
    ([], "jenkins-dispatch", ["migrate", "enqueue", "ls", "stats", "retry", "cancel", "limits"]),
    (["--json"], "jenkins-dispatch", ["migrate", "stats"]),
])
def test_a_group_without_its_command_says_which_to_choose(capsys, argv, prog, choices):
    assert exit_code(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"{prog}: error: choose a command:"), err
    assert all(choice in err for choice in choices), err
    assert "required" not in err
