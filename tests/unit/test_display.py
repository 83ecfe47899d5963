"""How values show in tables: column widths that fit the line, cut cells, parameters as written. Pure."""

from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.operating import display


@pytest.mark.parametrize("widths, flexible, minimums, total, fitted", [
    ([5, 10, 30], [False, True, True], [5, 5, 5], 100, [5, 10, 30]),  # fits: unchanged
    ([5, 10, 30], [False, True, True], [5, 5, 5], 29, [5, 10, 10]),  # the widest gives first
    ([5, 10, 30], [False, True, True], [5, 5, 5], 25, [5, 8, 8]),  # then both, evenly
    ([5, 10, 30], [False, False, True], [5, 5, 5], 29, [5, 10, 10]),  # only the flexible one gives
    ([5, 10, 30], [False, True, True], [5, 8, 8], 10, [5, 8, 8]),  # never below the minimums
])
def test_column_widths_fit_the_line(widths, flexible, minimums, total, fitted):
    assert display.fit_widths(widths, flexible, minimums, total) == fitted


@pytest.mark.parametrize("text, width, shown", [
    ("short", 10, "short"),
    ("exactly 10", 10, "exactly 10"),
    ("Jenkins has no job", 10, "Jenkins h…"),
])
def test_a_long_cell_is_cut_visibly(text, width, shown):
    assert display.clip(text, width) == shown and len(shown) <= width


def test_a_cell_is_one_line():
    assert display.one_line("HTTP 500:\n  stack\ttrace ") == "HTTP 500: stack trace"


def test_parameters_in_a_cell_keep_their_numbers_as_written():
    from jenkins_dispatch.jenkins.jobs import loads_parameters

    assert display.cell(loads_parameters('{"N": 10, "F": 1.50, "S": "10", "L": [2.0]}')) == \
        '{"N":10,"F":1.50,"S":"10","L":[2.0]}'


@pytest.mark.parametrize("change, shown", [
    ({"kind": "cap", "previous": None, "max_in_flight": 3}, ("none", "3")),
    ({"kind": "cap", "previous": 3, "max_in_flight": 0}, ("3", "0")),  # 0 is a cap (the job held back), not none
    ({"kind": "cap", "previous": 2, "max_in_flight": None}, ("2", "none")),
    ({"kind": "rate", "previous_per_minute": None, "per_minute": 10}, ("none", "10/min")),
    ({"kind": "rate", "previous_per_minute": 10, "per_minute": None}, ("10/min", "none")),
])
def test_a_limit_change_shows_from_what_to_what(change, shown):
    assert display.limit_change(change) == shown


T = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


@pytest.mark.parametrize(("parameters", "shown"), [
    ({}, "-"), (None, "-"), ({"ENV": "prod", "N": 5}, "ENV=prod N=5"),
    ({"ENV": "x" * 100}, "ENV=" + "x" * 75 + "…"),
])
def test_parameters_at_a_glance(parameters, shown):
    assert display.parameters_at_a_glance(parameters) == shown


@pytest.mark.parametrize(("row", "now", "shown"), [
    ({"status": "completed", "created_at": T, "scheduled_at": T, "started_at": _at(41), "finished_at": _at(233)},
     _at(999), "waited 41s, ran 3m12s"),
    ({"status": "processing", "created_at": T, "scheduled_at": T, "started_at": _at(5), "finished_at": None},
     _at(20), "waited 5s, ran 15s so far"),
    ({"status": "pending", "created_at": T, "scheduled_at": T, "started_at": None, "finished_at": None},
     _at(75), "waiting 75s"),
    # Scheduled for later: it waits from when it is due, and not before.
    ({"status": "pending", "created_at": T, "scheduled_at": _at(600), "started_at": None, "finished_at": None},
     _at(75), "-"),
    ({"status": "failed", "created_at": T, "scheduled_at": T, "started_at": None, "finished_at": _at(3)},
     _at(75), "-"),
])
def test_how_long_a_row_waited_and_ran(row, now, shown):
    assert display.waited_and_ran(row, now) == shown
