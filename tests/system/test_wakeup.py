"""Wake on enqueue under `serve` (a process): an idle serve costs the database next to nothing (PostgreSQL: it
LISTENs; MySQL/MariaDB: one cheap poll every POLL_SECONDS, not a pass), yet a plain-SQL INSERT wakes it (PostgreSQL:
a notification; MySQL/MariaDB: the next poll). How soon is `make bench`'s figure: here the periodic pass and the
lease are far longer than any wait, so only the wake-up can explain a trigger."""

from __future__ import annotations

import time

import pytest

from ..integration.test_wakeup import (
    IDLE_WINDOW_SECONDS,
    MAX_IDLE_STATEMENTS_PER_SECOND,
    PERIODIC_SECONDS,
    WOKEN_WITHIN_SECONDS,
    insert_plain_sql,
    triggered_within,
)
from ..serve_helpers import ServeProcess, serve_env, start_serve

pytestmark = pytest.mark.both_engines

def _passes(served: ServeProcess) -> int:
    return served.health()[1]["passes"]


# An idle serve runs two passes as it starts, on both engines: the first, and the one its first wait asks for
# (PostgreSQL: a session just opened may have missed notifications; MySQL: the first poll has nothing to compare).
START_UP_PASSES = 2


def _settled(served: ServeProcess, quiet: float = 1.6, timeout: float = 30) -> bool:
    """Once serve has run its start-up passes and no other for ``quiet`` seconds. Quiet alone was a bet: on 3.13
    beside two CPU burners the second start-up pass came 2.7 s after the first, inside the test's idle window."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        passes = _passes(served)
        time.sleep(quiet)
        if passes >= START_UP_PASSES and _passes(served) == passes:
            return True
    return False


def test_an_idle_serve_costs_next_to_nothing_yet_a_plain_sql_insert_wakes_it(jenkins, database_url, db, engine,
                                                                             tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url, LEASE_SECONDS=str(PERIODIC_SECONDS)),
                         tmp_path / "serve.log", "--interval", str(PERIODIC_SECONDS))
    try:
        assert _settled(served), served.log()[-2000:]
        before, started = served.health()[1], time.monotonic()
        time.sleep(IDLE_WINDOW_SECONDS)
        after, took = served.health()[1], time.monotonic() - started
        assert after["passes"] == before["passes"], (before, after)
        per_second = (after["db_statements"] - before["db_statements"]) / took
        assert per_second <= MAX_IDLE_STATEMENTS_PER_SECOND[engine], per_second

        for n in range(1, 4):
            insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                                           "VALUES ('deploy', '{\"ENV\": \"prod\"}')")
            assert triggered_within(jenkins, n, WOKEN_WITHIN_SECONDS) is not None, (n, served.log()[-2000:])
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("poll_seconds", [None, "0.5"])
def test_a_polling_serve_reads_the_fingerprint_every_poll_seconds(jenkins, database_url, db, engine, tmp_path,
                                                                   poll_seconds):
    """MySQL/MariaDB have no LISTEN: an idle serve reads the queue's fingerprint every POLL_SECONDS (0.1 s by
    default, so an INSERT waits ~50 ms for it on average), one cheap statement each, and runs no pass."""
    if engine != "mysql":
        pytest.skip("PostgreSQL LISTENs: nothing to poll")
    env = serve_env(database_url, jenkins.base_url, **({"POLL_SECONDS": poll_seconds} if poll_seconds else {}))
    served = start_serve(env, tmp_path / "serve.log", "--interval", "30")
    try:
        assert _settled(served), served.log()[-2000:]
        before, started = served.health()[1], time.monotonic()
        time.sleep(IDLE_WINDOW_SECONDS)
        after, took = served.health()[1], time.monotonic() - started
    finally:
        assert served.stop() == 0
    assert after["passes"] == before["passes"], (before, after)
    # It polled, and never more often than POLL_SECONDS: a busy machine only spaces the polls out, so how close
    # to every POLL_SECONDS they come is a measure (`make bench`), not a promise this test can check.
    statements = after["db_statements"] - before["db_statements"]
    assert 1 <= statements <= 1.2 * took / float(poll_seconds or 0.1), (statements, took)
