"""When a schedule ticks: standard five-field cron expressions read in a time zone, as moments in UTC. Pure.

croniter reads the expression and walks the calendar; it is only ever given wall-clock times without a zone
(plain calendar arithmetic, where no daylight-saving rule can intervene). Turning a wall-clock time into a
moment is done here, with zoneinfo, by one rule that makes ticks strictly increase and never repeat:

* each wall-clock time the expression matches is one tick;
* a wall-clock time that happens twice (the hour repeated when clocks go back) ticks once, the first time;
* a wall-clock time that never happens (the hour skipped when clocks go forward) ticks at the moment of the
  jump, so a daily job at 02:30 still runs that day; several such times make one tick.

So a job at a fixed hour runs exactly once a day across both changes, and an expression of every N minutes
does not tick again in the repeated hour (its wall-clock times were all ticked already; in UTC, the default
zone, nothing of the kind ever happens).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from ..errors import InvalidInput

DEFAULT_TIMEZONE = "UTC"
# No zone's clocks move by more than this at once: how far past a moment its wall-clock time may lie.
_LARGEST_SHIFT = timedelta(hours=3)


def check_expression(expr: str) -> str:
    """``expr`` as stored (fields separated by one space), or InvalidInput saying what is wrong with it."""
    if not isinstance(expr, str):
        raise InvalidInput("a cron expression is text")
    fields = expr.split()
    if len(fields) != 5:
        raise InvalidInput(f"bad cron expression {expr!r}: a standard cron expression has five fields "
                           "(minute hour day-of-month month day-of-week), e.g. '0 3 * * *'")
    text = " ".join(fields)
    try:
        croniter(text)
    except (CroniterError, ValueError, KeyError) as exc:
        raise InvalidInput(f"bad cron expression {expr!r}: {exc}") from None
    return text


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` ('Europe/Berlin', 'UTC'), or InvalidInput."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidInput(f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'") from None


def moment(wall: datetime, tz: ZoneInfo) -> datetime:
    """The moment (UTC) of the wall-clock time ``wall`` in ``tz`` by the rule above: its first occurrence, or
    the moment of the jump for a time that never happens."""
    first = wall.replace(tzinfo=tz, fold=0)
    as_utc = first.astimezone(UTC)
    if as_utc.astimezone(tz).replace(tzinfo=None) == wall:
        return as_utc
    # Skipped: fold=0 read it with the offset before the jump, which puts it after the jump by the gap's
    # length. The jump is the latest moment whose offset is the old one; its wall time lies before ``wall``.
    before = first.utcoffset()
    low, high = as_utc - _LARGEST_SHIFT, as_utc
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == before:
            low = middle
        else:
            high = middle
    return high.replace(microsecond=0)


def next_tick(expr: str, tz: str, after: datetime) -> datetime:
    """The schedule's first tick strictly after ``after`` (aware), in UTC."""
    zoneinfo = zone(tz)
    wall = after.astimezone(zoneinfo).replace(tzinfo=None)
    # Wall times up to ``wall`` tick no later than ``after`` (moment() never decreases): start there.
    walk = croniter(expr, wall)
    try:
        while True:
            tick = moment(walk.get_next(datetime), zoneinfo)
            if tick > after:
                return tick
    except CroniterBadDateError:
        raise InvalidInput(f"the cron expression {expr!r} never matches a date") from None


def latest_tick(expr: str, tz: str, at: datetime) -> datetime:
    """The schedule's last tick at or before ``at`` (aware), in UTC."""
    zoneinfo = zone(tz)
    # A wall time up to a few hours past ``at``'s may still tick before it (the repeated hour): walk back from
    # there to the first that does.
    wall = (at.astimezone(zoneinfo).replace(tzinfo=None) + _LARGEST_SHIFT)
    walk = croniter(expr, wall)
    try:
        while True:
            tick = moment(walk.get_prev(datetime), zoneinfo)
            if tick <= at:
                return tick
    except CroniterBadDateError:
        raise InvalidInput(f"the cron expression {expr!r} never matches a date") from None


def ticks_between(expr: str, tz: str, first: datetime, last: datetime, limit: int = 10_000) -> int:
    """How many ticks lie strictly after ``first`` and strictly before ``last``, counting up to ``limit``."""
    count, tick = 0, first
    while count < limit:
        tick = next_tick(expr, tz, tick)
        if tick >= last:
            break
        count += 1
    return count
