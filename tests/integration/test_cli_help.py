"""`--json` before or after the command, against the real database, and the table without it."""

import json

import pytest

from jenkins_dispatch.cli import main


@pytest.mark.parametrize("argv", [
    ["--json", "stats"], ["stats", "--json"], ["--json", "limits", "ls"], ["limits", "ls", "--json"],
    ["limits", "--json", "ls"], ["--json", "ls"], ["--json", "migrate"],
])
def test_json_before_or_after_the_command(capsys, queue, argv):
    assert main(argv) == 0
    json.loads(capsys.readouterr().out)


def test_without_json_the_output_is_a_table(capsys, queue):
    assert main(["limits", "ls"]) == 0
    assert capsys.readouterr().out.strip() == "no per-job limits"
