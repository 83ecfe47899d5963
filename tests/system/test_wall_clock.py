"""Issue 24 on the real clock: three `serve` processes per engine, for more than two minutes, with an every-minute
schedule and a job limited to 10 starts a minute. Each minute boundary becomes exactly one row, scheduled on the
boundary, built once; the limited job's 25 rows reach Jenkins ten a minute at most (the emulator's own record of
when each queue item was created), each built once.

Both engines run side by side in the same minutes (one test, not one per engine): the test waits for the clock,
and its ~2 minutes are nearly all idle. conftest collects it first (`wall_clock`), so one xdist worker waits
while the others run the rest of the suite.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.schedules import Schedules

from ..conftest import empty_tables
from ..dispatch_helpers import wait_for
from ..serve_helpers import serve_env, start_serve
from ..stores import Queue

pytestmark = [pytest.mark.wall_clock, pytest.mark.timeout(300)]

RATE = 10  # starts a minute
LIMITED_ROWS = 25  # 10 at once, 10 a minute later, 5 a minute after: the run spans two minute boundaries or more
# The rate is counted when a row is claimed; its trigger reaches Jenkins a few milliseconds later, each with its own
# latency. Ten claims 60 s apart can reach Jenkins up to that jitter less than 60 s apart.
TRIGGER_JITTER_SECONDS = 0.5
THROTTLED = {"path": "throttled", "parameters": [{"name": "DISPATCH_ID"}, {"name": "N"}], "duration_seconds": 0.1}


def _utc(at: datetime) -> datetime:
    """The database's time as a naive UTC datetime (PostgreSQL answers aware, MySQL naive UTC)."""
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at


def _engines(request) -> dict[str, str]:
    urls = {"postgresql": request.getfixturevalue("postgresql_database_url")}
    with contextlib.suppress(pytest.skip.Exception):  # no MySQL server here: PostgreSQL alone
        urls["mysql"] = request.getfixturevalue("mysql_database_url")
    return urls


def test_three_serves_per_engine_over_two_minute_boundaries_keep_ticks_and_rates(request, make_jenkins, tmp_path):
    engines = _engines(request)
    opened, jenkins, served, added_at = {}, {}, [], {}
    try:
        for engine, url in engines.items():
            db = opened[engine] = Database(parse_database_url(url), application_name="jd-tests")
            empty_tables(db)
            queue = Queue(db)
            jenkins[engine] = make_jenkins(jobs=[THROTTLED])
            queue.set_rate("throttled", RATE)
            for n in range(LIMITED_ROWS):
                queue.enqueue("throttled", {"N": n})
            schedules = Schedules(db)
            added_at[engine] = _utc(schedules.now())
            add_schedule(schedules, "every-minute", "deploy", {"ENV": "prod"}, cron="* * * * *")
            served += [start_serve(serve_env(url, jenkins[engine].base_url), tmp_path / f"{engine}-serve{i}.log",
                                   "--interval", "5") for i in range(3)]

        def limited_all_sent() -> bool:
            return all(len(jenkins[e].item_times("throttled")) >= LIMITED_ROWS for e in engines)

        # 25 rows at 10 a minute: two minutes and a little, whatever the second the test began.
        assert wait_for(limited_all_sent, timeout=200, interval=0.5), \
            {e: len(jenkins[e].item_times("throttled")) for e in engines}
        ended_at = {e: _utc(Schedules(opened[e]).now()) for e in engines}
        assert all(s.alive() for s in served)
    finally:
        for s in served:
            assert s.stop() == 0
        for db in opened.values():
            db.close()

    for engine, url in engines.items():
        with Database(parse_database_url(url), application_name="jd-tests") as db:
            queue = Queue(db)
            rows = queue.list_jobs(limit=1000)
        emulator = jenkins[engine]

        limited = [r for r in rows if r["job_name"] == "throttled"]
        assert len(limited) == LIMITED_ROWS
        assert all(emulator.triggers_for(r["dispatch_id"]) == 1 for r in limited), engine
        times = emulator.item_times("throttled")
        assert len(times) == LIMITED_ROWS, engine  # none sent twice
        closest = min(times[i + RATE] - times[i] for i in range(len(times) - RATE))
        assert closest >= 60 - TRIGGER_JITTER_SECONDS, (engine, closest)  # never 11 in a minute
        # The first ten went at once, then waited for the minute to move: their spread is shorter than the wait
        # after them (a limiter that spaced them out evenly, one every 6 s, would make it nine times longer).
        assert times[RATE - 1] - times[0] < times[RATE] - times[RATE - 1], (engine, times[:RATE + 1])

        ticks = sorted(_utc(r["scheduled_at"]) for r in rows if r["job_name"] == "deploy")
        assert all(t.second == 0 and t.microsecond == 0 for t in ticks), (engine, ticks)
        assert len(set(ticks)) == len(ticks), (engine, ticks)  # one row per boundary
        first = added_at[engine].replace(second=0, microsecond=0) + timedelta(minutes=1)
        # Every boundary the run passed has its row (the last one only if it passed 5 s before the end).
        expected, at = [], first
        while at <= ended_at[engine] - timedelta(seconds=5):
            expected.append(at)
            at += timedelta(minutes=1)
        assert len(expected) >= 2, (engine, added_at[engine], ended_at[engine])
        assert ticks[:len(expected)] == expected and len(ticks) <= len(expected) + 1, (engine, ticks, expected)
        assert all(emulator.triggers_for(r["dispatch_id"]) == 1 for r in rows if r["job_name"] == "deploy"), engine
