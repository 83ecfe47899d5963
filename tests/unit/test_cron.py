"""When a schedule ticks (dispatching/cron.py): a controlled clock, table cases, both daylight-saving changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.dispatching.cron import check_expression, latest_tick, next_tick, ticks_between, zone
from jenkins_dispatch.errors import InvalidInput


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


# Europe/Berlin 2026: clocks go forward on 29 March at 01:00 UTC (02:00 CET → 03:00 CEST) and back on
# 25 October at 01:00 UTC (03:00 CEST → 02:00 CET).
@pytest.mark.parametrize(("expr", "tz", "after", "expected"), [
    ("* * * * *", "UTC", utc(2026, 1, 1, 12, 0, 0), utc(2026, 1, 1, 12, 1)),
    ("* * * * *", "UTC", utc(2026, 1, 1, 12, 0, 30), utc(2026, 1, 1, 12, 1)),
    ("0 3 * * *", "UTC", utc(2026, 1, 1, 3, 0), utc(2026, 1, 2, 3, 0)),
    ("0 3 * * 1-5", "UTC", utc(2026, 1, 2, 4, 0), utc(2026, 1, 5, 3, 0)),  # Friday → Monday
    ("0 3 * * *", "Europe/Berlin", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 2, 0)),  # CET = UTC+1
    ("0 3 * * *", "Europe/Berlin", utc(2026, 7, 1, 0, 0), utc(2026, 7, 1, 1, 0)),  # CEST = UTC+2
    # spring forward: 02:30 never happens that night; it ticks at the jump (03:00 CEST), once
    ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 0)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)),
    # hourly across the jump: 01:00 CET, then 03:00 CEST (02:00 does not exist), then 04:00 CEST
    ("0 * * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 1, 0)),
    ("0 * * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 2, 0)),
    # fall back: 02:30 happens twice; it ticks the first time only
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 0, 30)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)),
    # in the repeated hour (02:10 CET, the second time): 02:15…02:45 were ticked already; next is 03:00 CET
    ("*/15 * * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 10), utc(2026, 10, 25, 2, 0)),
    ("0 0 29 2 *", "UTC", utc(2026, 3, 1), utc(2028, 2, 29)),
])
def test_next_tick(expr, tz, after, expected):
    assert next_tick(expr, tz, after) == expected


def _ticks(expr: str, tz: str, start: datetime, end: datetime) -> list[datetime]:
    found, tick = [], start
    while (tick := next_tick(expr, tz, tick)) < end:
        found.append(tick)
    return found


@pytest.mark.parametrize(("expr", "start", "end", "expected_count"), [
    ("30 2 * * *", utc(2026, 3, 27), utc(2026, 4, 1), 5),  # 27, 28, 29 (at the jump), 30, 31 March
    ("30 2 * * *", utc(2026, 10, 23), utc(2026, 10, 28), 5),  # 23…27 October: 25th once
    # 24 hours, ends excluded: 23 whole hours, each ticking once (02:00 never happens: 03:00 is the jump's tick)
    ("0 * * * *", utc(2026, 3, 28, 23), utc(2026, 3, 29, 23), 23),
    # 25 hours, ends excluded: 24 whole hours, one of them the second 02:00, which is not ticked again
    ("0 * * * *", utc(2026, 10, 24, 22), utc(2026, 10, 25, 23), 23),
])
def test_no_tick_twice_and_none_lost_across_daylight_saving(expr, start, end, expected_count):
    ticks = _ticks(expr, "Europe/Berlin", start, end)
    assert len(ticks) == expected_count
    assert ticks == sorted(set(ticks))  # strictly increasing: never the same moment twice
    local_days = [t.astimezone(zone("Europe/Berlin")).date() for t in ticks]
    if expr.startswith("30 2"):
        assert len(set(local_days)) == len(local_days)  # one a day, the short and the long day included


@pytest.mark.parametrize(("expr", "tz", "at", "expected"), [
    ("* * * * *", "UTC", utc(2026, 1, 1, 12, 0, 0), utc(2026, 1, 1, 12, 0)),  # at a tick: that tick
    ("* * * * *", "UTC", utc(2026, 1, 1, 12, 0, 59), utc(2026, 1, 1, 12, 0)),
    ("0 3 * * *", "UTC", utc(2026, 1, 5, 2, 0), utc(2026, 1, 4, 3, 0)),
    ("30 2 * * *", "Europe/Berlin", utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 0)),
    # in the repeated hour, the last tick was 02:45 CEST (00:45 UTC), though its wall time lies ahead
    ("*/15 * * * *", "Europe/Berlin", utc(2026, 10, 25, 1, 10), utc(2026, 10, 25, 0, 45)),
])
def test_latest_tick(expr, tz, at, expected):
    assert latest_tick(expr, tz, at) == expected


def test_ticks_between_counts_the_missed_ones():
    assert ticks_between("* * * * *", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 10)) == 9
    assert ticks_between("* * * * *", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 0, 1)) == 0
    assert ticks_between("* * * * *", "UTC", utc(2026, 1, 1), utc(2026, 2, 1), limit=100) == 100


@pytest.mark.parametrize("expr", ["", "* * * *", "* * * * * *", "61 * * * *", "a b c d e", "@daily",
                                  "H * * * *", "* * * * * 2026"])
def test_bad_expressions_are_refused(expr):
    with pytest.raises(InvalidInput, match="cron expression"):
        check_expression(expr)


def test_expressions_are_stored_with_single_spaces():
    assert check_expression("  0  3 * *   1-5 ") == "0 3 * * 1-5"


def test_unknown_zone_is_refused():
    with pytest.raises(InvalidInput, match="unknown time zone"):
        zone("Mars/Olympus")


def test_an_expression_that_never_matches_is_refused():
    with pytest.raises(InvalidInput, match="never matches"):
        next_tick("0 0 31 2 *", "UTC", utc(2026, 1, 1))
