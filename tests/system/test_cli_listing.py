"""Issue 25 #5, as users run them (the CLI as a subprocess on the real database, both engines): parameters printed
as written, `ls` within 120 columns with the error, the same filters as `retry`/`cancel` and the page, and
`ls --json` carrying everything `show --json` does."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.both_engines


def cli(database_url, *argv, code=0):
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL="http://127.0.0.1:9/", JENKINS_USER="a",
               JENKINS_API_TOKEN="b", POWERTOOLS_LOG_LEVEL="ERROR")
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == code, proc
    return proc.stdout


def test_parameters_print_as_written(database_url, queue):
    """`show` printed a number enqueued as 1.50 as 1.5, and 1e3 or 10 given as a float as 10.0 / 1000.0."""
    cli(database_url, "enqueue", "deploy", "--params", '{"N": 10, "F": 1.50, "A": 10.0, "S": "10", "L": [2.50]}',
        "-p", "V=10")
    shown = cli(database_url, "show", "1")
    [line] = [line for line in shown.splitlines() if line.startswith("parameters ")]
    for written in ('"N":10', '"F":1.50', '"A":10.0', '"S":"10"', '"L":[2.50]', '"V":"10"'):
        assert written in line, line
    as_json = cli(database_url, "show", "1", "--json")
    for written in ('"N": 10', '"F": 1.50', '"A": 10.0', '"S": "10"', '"V": "10"'):
        assert written in as_json, as_json
    assert json.loads(as_json)["job"]["parameters"]["F"] == 1.5  # and a JSON number, not a string
