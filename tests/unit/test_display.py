"""How values show in tables: column widths that fit the line, cut cells, parameters as written. Pure."""

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
