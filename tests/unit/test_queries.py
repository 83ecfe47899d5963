"""The named SQL blocks and the code that runs them agree: every ``-- name:`` block in a dialect's
``queries/*.sql`` is run somewhere in the package, and every name the package runs is defined there.

A block nobody runs is dead SQL that still has to be read and migrated; a name that is not defined fails
only when that code path runs. Read from the files, not from the loader, so the check holds whatever the
loader becomes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import jenkins_dispatch

PACKAGE = Path(jenkins_dispatch.__file__).parent
QUERY_FILES = sorted(p for p in PACKAGE.rglob("dialects/*/queries") if p.is_dir())  # a dialect's folder of files
# The one method that runs a block by name: Store._run (runner.py), and any helper of the same name.
RUNNER = "_run"
NAME_HEADER = re.compile(r"^-- (?:name: *(\w+) *|variant: *(\w+) *=.*)$", re.M)  # a statement, or a variant of one


def defined_names(text: str) -> list[str]:
    """The block names one SQL file defines, in order, repeats kept."""
    return [name or variant for name, variant in NAME_HEADER.findall(text)]


def names_run(source: str) -> set[str]:
    """The block names a module's source passes, as a literal, to a call of ``RUNNER``, or takes the text of from
    ``…_statements["NAME"]`` (a block handed to the session some other way, e.g. as a transaction's opening)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == RUNNER:
            names |= {arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}
        elif (isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "_statements"
              and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            names.add(node.slice.value)
    return names


def used_names() -> set[str]:
    return set().union(*(names_run(module.read_text()) for module in PACKAGE.rglob("*.py")))


@pytest.mark.parametrize("text, expected", [
    ("-- name: a\nSELECT 1;\n-- name: b\nSELECT 2;\n", ["a", "b"]),
    ("-- names (:job_path) are matched\n-- name: a\nSELECT 1;\n", ["a"]),  # prose beginning "-- names" is not a block
    ("-- fragment: shared\nx\n-- name: a\nSELECT {{shared}};\n", ["a"]),
    ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", ["a", "a"]),
    ("-- fragment: o\nx\n-- name: a\nSELECT {{o}};\n-- variant: a_fair = a with o=p\n", ["a", "a_fair"]),
])
def test_block_names_are_read_from_the_headers(text, expected):
    assert defined_names(text) == expected


@pytest.mark.parametrize("source, expected", [
    ('rows = self._run("get_job", id=1)', {"get_job"}),
    ('self._run(\n    "settle", id=1)', {"settle"}),
    ('_run(db, "applied_migrations")', {"applied_migrations"}),
    ('self.run("not_a_block")\nrun_pass("nor_this")', set()),
    ('with self.db.transaction(opening=self._statements["lock_caps"]):\n    pass', {"lock_caps"}),
    ('other["not_a_block"]', set()),
])
def test_names_are_the_literals_passed_to_the_runner(source, expected):
    assert names_run(source) == expected


def test_the_package_runs_named_blocks_at_all():
    """Guards the check itself: if the runner is renamed, say so instead of calling every block dead."""
    assert QUERY_FILES, f"no dialects/<engine>/queries/ under {PACKAGE}"
    assert len(used_names()) > 10, f"no call to {RUNNER}(...) with a block name found: was the runner renamed?"


@pytest.mark.parametrize("path", QUERY_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_named_query_is_used_and_every_used_name_exists(path: Path):
    defined = [name for file in sorted(path.glob("*.sql")) for name in defined_names(file.read_text())]
    repeated = sorted({name for name in defined if defined.count(name) > 1})
    assert not repeated, f"defined twice in {path.name}: {repeated}"
    used = used_names()
    assert not sorted(set(defined) - used), f"never run (dead SQL) in {path.name}: {sorted(set(defined) - used)}"
    assert not sorted(used - set(defined)), f"run but not defined in {path.name}: {sorted(used - set(defined))}"
