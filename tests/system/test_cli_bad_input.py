"""Issue 33 #4: every command refuses what it cannot honour, as users run it (a subprocess on the real database,
two controllers configured, `default` and `eu`): a controller that is not configured where something is stored
for it, a number its column cannot hold, a control character in a name. Each bad input exits 2 with exactly one
line on stderr that names the option, and the database is as it was. Before, `schedule add … --controller nope`
and `limits set deploy 3 --controller zz` exited 0, `enqueue $'de\\tploy'` stored the tab, and numbers out of range
answered with the database's `value "…" is out of range for type integer (SQLSTATE 22003)`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.schedules import Schedules

from ..cli_process import run_cli
from ..conftest import TABLES

pytestmark = pytest.mark.both_engines

CONTROLLERS = json.dumps({"default": {"url": "http://127.0.0.1:9/", "user": "u", "api_token": "t"},
                          "eu": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t"}})
EVERY_MINUTE = ["--cron", "* * * * *"]
TOO_BIG_INT = "99999999999"  # beyond a 32-bit integer column (priority, attempts, caps, rates)
TOO_BIG_ID = "99999999999999999999"  # beyond a 64-bit bigint (ids, how many to list)

CASES = [
    # (argv, what the one line on stderr names)
    # a controller that is not configured, where something would be stored for it
    (["schedule", "add", "x", "deploy", *EVERY_MINUTE, "--controller", "nope"], "--controller"),
    (["limits", "set", "deploy", "3", "--controller", "zz"], "--controller"),
    (["limits", "set", "deploy", "--per-minute", "3", "--controller", "zz"], "--controller"),
    (["pause", "deploy", "--controller", "zz"], "--controller"),
    (["pause", "--controller", "zz"], "--controller"),
    (["enqueue", "deploy", "--controller", "Not a name!"], "--controller"),
    # numbers the columns cannot hold
    (["enqueue", "deploy", "--priority", TOO_BIG_INT], "--priority"),
    (["enqueue", "deploy", "--priority", "-" + TOO_BIG_INT], "--priority"),
    (["enqueue", "deploy", "--max-attempts", TOO_BIG_INT], "--max-attempts"),
    (["limits", "set", "deploy", TOO_BIG_INT], "argument N:"),
    (["limits", "set", "deploy", "--per-minute", TOO_BIG_INT], "--per-minute"),
    (["schedule", "add", "y", "deploy", *EVERY_MINUTE, "--priority", TOO_BIG_INT], "--priority"),
    (["schedule", "set", "nightly", "--priority", TOO_BIG_INT], "--priority"),
    (["show", TOO_BIG_ID], "argument ID:"),
    (["cancel", TOO_BIG_ID], "argument ID:"),
    (["retry", TOO_BIG_ID], "argument ID:"),
    (["ls", "--limit", TOO_BIG_ID], "--limit"),
    (["ls", "--before", TOO_BIG_ID], "--before"),
    (["cancel", "--status", "pending", "--limit", TOO_BIG_ID], "--limit"),
    (["limits", "history", "--last", TOO_BIG_ID], "--last"),
    (["prune", "--older-than", "1e300"], "--older-than"),
    (["prune", "--older-than", "inf"], "--older-than"),
    (["prune", "--older-than", "30", "--batch", TOO_BIG_ID], "--batch"),
    (["doctor", "--max-jobs", TOO_BIG_ID], "--max-jobs"),
    (["dispatch", "--max-jobs", TOO_BIG_ID], "--max-jobs"),
    (["serve", "--port", "70000"], "--port"),
    (["ui", "--port", "70000"], "--port"),
    # control characters in names (and other text no row, Jenkins or the tables can hold)
    (["enqueue", "de\tploy"], "argument JOB:"),
    (["enqueue", "de\x7fploy"], "argument JOB:"),
    (["enqueue", "de\x85ploy"], "argument JOB:"),  # a C1 control character (NEL)
    (["enqueue", "j" * 1025], "argument JOB:"),
    (["enqueue", "deploy", "-p", "A\tB=1"], "--param"),
    (["enqueue", "deploy", "--params", '{"A\\tB": 1}'], "--params"),
    (["enqueue", "deploy", "--dedupe-key", "a\nb"], "--dedupe-key"),
    (["enqueue", "deploy", "--dedupe-key", "k" * 256], "--dedupe-key"),
    (["limits", "set", "de\tploy", "2"], "argument JOB:"),
    (["limits", "set", "de\tploy", "--per-minute", "2"], "argument JOB:"),
    (["pause", "de\tploy"], "argument JOB:"),
    (["schedule", "add", "a\tb", "deploy", *EVERY_MINUTE], "argument NAME:"),
    (["schedule", "add", "x", "de\tploy", *EVERY_MINUTE], "argument JOB:"),
    (["schedule", "add", "x", "deploy", *EVERY_MINUTE, "-p", "A\tB=1"], "--param"),
]


def _cli(argv: list[str], database_url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JENKINS_")}
    return run_cli(argv, dict(env, DATABASE_URL=database_url, JENKINS_CONTROLLERS=CONTROLLERS))


def _everything(db) -> dict[str, list]:
    """Every table's rows, in a stable order (each table's first column: its id or its key)."""
    return {table: db.run(f"SELECT * FROM {table} ORDER BY 1") for table in TABLES}


@pytest.fixture
def seeded(queue, db):
    """A row, a schedule, a cap and a rate with their history: what a bad input must leave as it is."""
    queue.enqueue("deploy", {"ENV": "prod"})
    queue.set_limit("deploy", 2, changed_by="seed")
    queue.set_rate("deploy", 5, "eu", changed_by="seed")
    queue.pause("build", reason="seed")
    add_schedule(Schedules(db), "nightly", "deploy", cron="0 3 * * *")
    return _everything(db)


@pytest.mark.parametrize(("argv", "names"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_exits_2_with_one_line_naming_the_option_and_stores_nothing(seeded, db, database_url, argv, names):
    proc = _cli(argv, database_url)
    assert proc.returncode == 2, proc
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc
    assert names in proc.stderr, proc.stderr
    assert "SQLSTATE" not in proc.stderr and "(error " not in proc.stderr, proc.stderr  # the database never saw it
    assert _everything(db) == seeded


def test_a_controller_not_configured_is_still_accepted_where_nothing_is_stored_for_it(seeded, queue, db,
                                                                                        database_url):
    """`enqueue --controller nope` keeps its documented behaviour (the row fails at its first pass); lifting a pause
    or removing a cap of a controller no longer configured must stay possible."""
    queue.pause(None, controller="gone")
    queue.set_limit("deploy", 4, "gone")
    assert _cli(["resume", "--controller", "gone"], database_url).returncode == 0
    assert _cli(["limits", "rm", "deploy", "--controller", "gone"], database_url).returncode == 0
    assert queue.pauses()[0].controller is None and queue.limit_of("deploy", "gone") is None
    done = _cli(["enqueue", "deploy", "--controller", "nope"], database_url)
    assert done.returncode == 0, done.stderr
