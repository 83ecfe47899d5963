"""One home per rule (issue 22): each rule the package applies in several places is written once, and these
tests say where, so a second copy fails here rather than drifting apart from the first."""

from __future__ import annotations

import ast
import functools
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from jenkins_dispatch import moments
from jenkins_dispatch.config import DatabaseSettings, JenkinsSettings, Settings, load_tuning, resend_quiet_for
from jenkins_dispatch.jenkins.client import MIN_POOLED_CONNECTIONS, jenkins_client
from jenkins_dispatch.moments import from_iso
from jenkins_dispatch.operating.display import age, cell, moment
from jenkins_dispatch.store.filters import time_filter as _moment
from jenkins_dispatch.store.producers import _scheduled_at

PACKAGE = Path(__file__).resolve().parents[2] / "layers/shared/jenkins_dispatch"


@functools.cache  # parsed once per process: a dozen tests read the package, and nothing here changes a tree
def _sources() -> tuple[tuple[str, ast.Module], ...]:
    return tuple((path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
                 for path in sorted(PACKAGE.rglob("*.py")))


def _calls(tree: ast.Module, name: str) -> int:
    """Calls of ``name`` (a bare name or an attribute) in ``tree``."""
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
               and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name))


def _homes_of_call(name: str) -> list[str]:
    return [module for module, tree in _sources() if _calls(tree, name)]


# --------------------------------------------------------------------------- the Jenkins client

JENKINS = JenkinsSettings(url="https://ci.example.com/jenkins", user="bot", api_token="t0ken", timeout_seconds=7.5,
                          verify_tls=False, search_window=123)


def test_a_jenkins_client_carries_every_jenkins_setting() -> None:
    with jenkins_client(JENKINS) as client:
        assert client.base_url == "https://ci.example.com/jenkins/"
        assert client.user == "bot"
        assert client._session.auth == ("bot", "t0ken")
        assert client.timeout_seconds == 7.5
        assert client._session.verify is False
        assert client.search_window == 123
        assert client._session.get_adapter("https://x/")._pool_maxsize == MIN_POOLED_CONNECTIONS


def test_a_dispatcher_client_is_pooled_for_its_trigger_threads() -> None:
    with jenkins_client(JENKINS, threads=40) as client:
        assert client.search_window == 123
        assert client._session.get_adapter("https://x/")._pool_maxsize == 40


def test_only_the_jenkins_package_builds_a_jenkins_client() -> None:
    """The doctor once built its own and left out the search window and the pool: everyone uses jenkins_client."""
    assert _homes_of_call("JenkinsClient") == ["jenkins/client.py"]


# --------------------------------------------------------------------------- DISPATCH_ID and dispatch ids

def _string_constants(tree: ast.Module) -> list[str]:
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_the_dispatch_id_parameter_is_named_once() -> None:
    homes = [module for module, tree in _sources() if "DISPATCH_ID" in _string_constants(tree)]
    assert homes == ["jenkins/answers.py"]


def test_the_dispatch_id_format_is_written_once_in_python() -> None:
    """The SQL builds it (tests/integration/test_dispatch_ids.py checks that its output parses); Python only
    reads it, in store/dispatch_ids.py."""
    homes = [module for module, tree in _sources()
             if any(text.startswith(("jd-", "legacy-")) for text in _string_constants(tree))]
    assert homes == ["store/dispatch_ids.py"]


# --------------------------------------------------------------------------- settings' defaults

def test_settings_default_to_what_the_environment_gives_when_nothing_is_set() -> None:
    """A Settings built by hand (tests, benchmarks) starts where load_settings starts: no default written twice
    (RESEND_QUIET_SECONDS was 900.0 by hand, what 3 default leases happened to make)."""
    built = Settings(database=DatabaseSettings())
    assert {name: getattr(built, name) for name in load_tuning({})} == load_tuning({})


def test_the_resend_quiet_period_follows_the_lease() -> None:
    assert load_tuning({"LEASE_SECONDS": "60"})["resend_quiet_seconds"] == resend_quiet_for(60) == 180.0
    assert load_tuning({"LEASE_SECONDS": "60", "RESEND_QUIET_SECONDS": "5"})["resend_quiet_seconds"] == 5.0


# --------------------------------------------------------------------------- values as people read them

def test_cells_and_ages_are_formatted_in_one_place() -> None:
    """The command line and the page had each their own cell and age formatting, and showed the same job's
    fields differently (times with and without "UTC", 2.5 as "2.5" or "2.50", lists as Python or JSON)."""
    for name in ("cell", "age", "when", "duration"):
        assert [m for m, tree in _sources() if any(
            isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == name for node in ast.walk(tree))] == \
            ["operating/display.py"], name


def test_iso_times_are_read_in_one_place() -> None:
    """The queue's time arguments and the operators' moments were parsed apart (store/queue._moment and
    operating/moments): moments.from_iso reads them all."""
    assert _homes_of_call("fromisoformat") == ["moments.py"]


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-01-31T09:00:00Z", datetime(2026, 1, 31, 9, tzinfo=UTC)),
    ("2026-01-31T09:00:00", datetime(2026, 1, 31, 9, tzinfo=UTC)),  # no zone means UTC
    ("2026-01-31T10:00:00+01:00", datetime(2026, 1, 31, 9, tzinfo=UTC)),
    ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC)),
])
def test_every_reader_of_iso_times_reads_them_alike(text, expected) -> None:
    assert from_iso(text) == expected
    assert moments.since(text) == expected
    assert _moment(text) == expected
    assert from_iso(_scheduled_at(text)) == expected


@pytest.mark.parametrize(("value", "shown"), [
    (None, "-"),
    (datetime(2026, 1, 31, 10, 0, 5, tzinfo=timezone(timedelta(hours=1))), "2026-01-31 09:00:05"),
    (date(2026, 1, 31), "2026-01-31"),
    (2.5, "2.5"),
    (Decimal("2.50"), "2.5"),
    ({"ENV": "prod", "N": [1, 2]}, '{"ENV":"prod","N":[1,2]}'),
    (["é"], '["é"]'),
    (7, "7"),
    ("text", "text"),
])
def test_a_cell_shows_a_value_one_way(value, shown) -> None:
    assert cell(value) == shown


def test_an_age_is_a_duration_or_nothing_and_a_moment_says_its_zone() -> None:
    assert (age(None), age(3 * 3600 + 300)) == ("-", "3h05m")
    assert (moment(None), moment(datetime(2026, 1, 31, 9, tzinfo=UTC))) == ("-", "2026-01-31 09:00:00 UTC")


# --------------------------------------------------------------------------- what an operator may give

def _powers_of_two(tree: ast.Module) -> list[int]:
    """The exponents of every ``2**N`` written in ``tree``."""
    return [node.right.value for node in ast.walk(tree)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Constant)
            and node.left.value == 2 and isinstance(node.right, ast.Constant)]


def test_the_columns_ranges_are_written_once() -> None:
    """Issue 33: each command checked its numbers its own way, or not at all (the database answered SQLSTATE 22003);
    the webhook held build numbers and queue ids to the same columns with ranges of its own. inputs.py has them."""
    assert [m for m, tree in _sources() if {31, 63} & set(_powers_of_two(tree))] == ["inputs.py"]


def test_control_characters_are_told_in_one_place() -> None:
    """Job names, parameter names, dedupe keys and the login proxy's operator name refuse the same characters
    (the operator's name once left out C1, U+0080 to U+009F)."""
    assert [m for m, tree in _sources() if any("\\x1f" in text or "\x1f" in text for text in _string_constants(tree))
            ] == []
    assert [m for m, tree in _sources() if any(isinstance(node, ast.FunctionDef) and node.name == "control_character"
                                               for node in ast.walk(tree))] == ["inputs.py"]
