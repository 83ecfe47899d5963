"""Wake on enqueue under `serve` (a process): a plain-SQL INSERT reaches Jenkins within a second on PostgreSQL
(LISTEN/NOTIFY), within about a second on MySQL/MariaDB (polling), and an idle serve polling MySQL costs the
database one statement a second, not a pass a second."""

from __future__ import annotations

import time

import pytest

from ..dispatch_helpers import wait_for
from ..integration.test_wakeup import (
    IDLE_WINDOW_SECONDS,
    MAX_IDLE_STATEMENTS_PER_SECOND,
    insert_plain_sql,
    triggered_within,
)
from ..serve_helpers import serve_env, start_serve

# LISTEN wakes at once; a poll comes within a second, then the pass.
INSERT_TO_TRIGGER_SECONDS = {"postgresql": 1.0, "mysql": 1.5}


@pytest.mark.both_engines
def test_serve_triggers_a_plain_sql_insert_within_a_second(jenkins, database_url, db, engine, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log")  # default --interval 10
    try:
        time.sleep(0.5)  # past its first pass: from now on only news (a notification, a poll) can wake it early
        for n in range(1, 4):
            insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name, parameters) "
                                           "VALUES ('deploy', '{\"ENV\": \"prod\"}')")
            took = triggered_within(jenkins, n, 5)
            assert took is not None and took < INSERT_TO_TRIGGER_SECONDS[engine], (took, served.log()[-2000:])
            time.sleep(0.3)
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("engine", ["mysql"], indirect=True)  # PostgreSQL LISTENs: nothing is sent while idle
def test_an_idle_serve_polling_mysql_sends_a_statement_a_second_and_no_pass(jenkins, database_url, db, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log", "--interval", "30")
    try:
        # Its first pass, and the one its first poll asks for (nothing to compare with yet).
        assert wait_for(lambda: served.health()[1]["passes"] >= 2, timeout=10)
        time.sleep(0.3)
        before, started = served.health()[1], time.monotonic()
        time.sleep(IDLE_WINDOW_SECONDS)
        after, took = served.health()[1], time.monotonic() - started
    finally:
        assert served.stop() == 0
    assert after["passes"] == before["passes"], (before, after)
    per_second = (after["db_statements"] - before["db_statements"]) / took
    assert per_second <= MAX_IDLE_STATEMENTS_PER_SECOND, per_second
