"""Statement coverage per engine (tests/statement_coverage.py) as a run of pytest reports it: a small suite of
its own, in a child pytest configured as this one is (tests/conftest.py's pytest_configure), whose two tests run
one named statement each on the real PostgreSQL. Run whole it fails, naming every statement that never ran;
run in part it only counts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jenkins_dispatch.store import statements

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.conftest import pytest_configure  # noqa: F401 (the suite's own: the markers, the coverage)
"""

# Each test runs one named statement, in the test process, through the package's own Queue.
TEST_MODULE = """
import os

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from tests.stores import Queue


def test_{name}():
    with Database(parse_database_url(os.environ["DATABASE_URL"])) as db:
        Queue(db).{call}
"""
RUN = {"queue_fingerprint": "fingerprint()", "claim_plan": "claim_plan(None)"}


@pytest.fixture
def small_suite(tmp_path, database_url):
    """A folder holding the small suite; DATABASE_URL (migrated PostgreSQL) is in the environment."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, call in RUN.items():
        (tmp_path / f"test_{name}.py").write_text(TEST_MODULE.format(name=name, call=call))
    return tmp_path


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # the child imports tests.conftest as a module
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-v", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def never_ran(output: str, engine: str) -> set[str]:
    found = re.search(rf"^statement coverage: never ran on {engine}: (.*)$", output, re.M)
    assert found, output
    return set(found.group(1).split(", "))


@pytest.mark.parametrize("workers", [["-n", "2", "--dist", "load"], ["-p", "no:xdist"]],
                         ids=["two-workers", "one-process"])
def test_a_run_of_the_whole_suite_fails_naming_each_statement_never_run(small_suite, workers) -> None:
    proc = run_pytest(small_suite, *workers)
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "2 passed" in output, output  # every test passed: the coverage alone fails the run
    if "-n" in workers:  # round robin: one test on each worker, whose records the controller unites
        assert re.search(r"\[gw0\].* PASSED", output) and re.search(r"\[gw1\].* PASSED", output), output
    defined = set(statements.load("postgresql"))
    assert re.search(rf"^statements: .*\b2/{len(defined)} on postgresql\b", output, re.M), output
    assert never_ran(output, "postgresql") == defined - set(RUN) - set(statements.not_run(statements.load("postgresql")))
    assert "or say why it never runs there in a line above its SQL: -- not run on this engine: WHY" in output


@pytest.mark.parametrize("part", [["-k", "fingerprint"], ["test_claim_plan.py"]], ids=["deselected", "one-file"])
def test_a_run_of_part_of_the_suite_counts_without_failing(small_suite, part) -> None:
    proc = run_pytest(small_suite, "-p", "no:xdist", *part)
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.OK, output
    assert re.search(r"^statements: .*\b1/\d+ on postgresql\b.*\(part of the suite ran: not checked\)$", output, re.M), output
    assert "statement coverage:" not in output
