"""Schedules under real dispatchers (issue 24): three `serve` processes, and overlapping Lambda invocations beside
a `serve`, all woken by the same due tick: each tick becomes one row, triggered once. And a sleeping `serve`
wakes for a schedule's next tick, whose row does not exist yet."""

from __future__ import annotations

import time
import urllib.request
from datetime import timedelta

import pytest

from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.schedules import Schedules

from ..child_processes import start_together, stop_all
from ..dispatch_helpers import wait_for
from ..integration.test_wakeup import CountdownContext
from ..serve_helpers import serve_env, start_serve

pytestmark = pytest.mark.both_engines

# Ticks only when a test makes it due: no minute turning during a test adds a genuine tick of its own.
YEARLY = "0 0 1 1 *"


def make_due_now(db, name: str) -> None:
    """The schedule's next tick becomes the current minute (due), as if the minute had just turned. Written as a
    resume would be (enabled in the SET: PostgreSQL's trigger wakes the listeners; updated_at moves MySQL's
    fingerprint), so the sleeping dispatchers all wake at once and race for it."""
    tick = Schedules(db).now().replace(second=0, microsecond=0)
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick, enabled = true, updated_at = :now WHERE name = :name",
           tick=tick, now=Schedules(db).now(), name=name)


def counter(base: str, name: str) -> float:
    """A counter's value in `serve`'s GET /metrics (0 when absent)."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


def all_rows(queue) -> list[dict]:
    return queue.list_jobs(limit=10_000)


def test_three_serve_processes_enqueue_each_due_tick_once_and_it_is_built_once(jenkins, database_url, db, queue,
                                                                               tmp_path):
    schedules = Schedules(db)
    add_schedule(schedules, "often", "deploy", {"ENV": "prod"}, cron=YEARLY)
    served = [start_serve(serve_env(database_url, jenkins.base_url), tmp_path / f"serve{i}.log", "--interval", "30")
              for i in range(3)]
    try:
        for round_ in range(1, 4):
            make_due_now(db, "often")
            assert wait_for(lambda n=round_: len(all_rows(queue)) >= n
                            and all(r["jenkins_queue_id"] is not None for r in all_rows(queue)), timeout=15), \
                served[0].log()[-2000:]
            time.sleep(1.0)  # any second row would have come by now
            rows = all_rows(queue)
            assert len(rows) == round_, rows
        for row in all_rows(queue):
            assert jenkins.triggers_for(row["dispatch_id"]) == 1
        # /metrics: the three processes' ticks enqueued add up to the rows, and none was skipped.
        assert sum(counter(s.base, "jenkins_dispatch_ticks_enqueued_total") for s in served) == 3
        assert sum(counter(s.base, "jenkins_dispatch_ticks_skipped_total") for s in served) == 0
    finally:
        for s in served:
            assert s.stop() == 0


def invoke_the_dispatcher_function(seconds: float) -> None:
    """One continuous invocation of the dispatcher function's handler, in this (spawned) process, as one Lambda
    container runs it: the environment is the test's. An invocation that fails ends the process with exit code 1."""
    from functions.dispatcher.app import lambda_handler

    lambda_handler({}, CountdownContext(seconds))


def test_overlapping_lambda_invocations_and_a_serve_enqueue_each_tick_once(jenkins, database_url, db, queue,
                                                                            tmp_path, monkeypatch):
    """Two invocations overlapping as EventBridge starts them, each in a process of its own as Lambda runs them
    (a container runs one invocation at a time, with its own session), the handler called in-process there."""
    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1", "TIME_MARGIN_SECONDS": "2"}.items():
        monkeypatch.setenv(key, value)  # spawned children inherit the environment
    monkeypatch.delenv("DISPATCHER_MODE", raising=False)  # continuous, as deployed
    add_schedule(Schedules(db), "often", "deploy", cron=YEARLY)
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log", "--interval", "30")
    invocations = start_together(invoke_the_dispatcher_function, [(12,), (12,)])
    try:
        time.sleep(2.5)  # both invocations are in their loops, listening
        for round_ in range(1, 3):
            make_due_now(db, "often")
            assert wait_for(lambda n=round_: len(all_rows(queue)) >= n
                            and all(r["jenkins_queue_id"] is not None for r in all_rows(queue)), timeout=5)
            time.sleep(1.0)
            assert len(all_rows(queue)) == round_
        for invocation in invocations:
            invocation.join(30)
        assert [i.exitcode for i in invocations] == [0, 0]
    finally:
        stop_all(invocations)
        assert served.stop() == 0
    for row in all_rows(queue):
        assert jenkins.triggers_for(row["dispatch_id"]) == 1


def test_a_sleeping_serve_wakes_for_the_next_tick(jenkins, database_url, db, queue, tmp_path):
    """--interval 600 and nothing pending: only the schedule says when to look. Its row comes for the tick, not
    for the next periodic pass (which is ten minutes away: nothing else could explain the row)."""
    schedules = Schedules(db)
    add_schedule(schedules, "soon", "deploy", cron="* * * * *")
    tick = (schedules.now() + timedelta(seconds=4)).replace(microsecond=0)
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick WHERE name = 'soon'", tick=tick)
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log", "--interval", "600")
    try:
        assert wait_for(lambda: all_rows(queue), timeout=12), served.log()[-2000:]
        enqueued_at = schedules.now()
        [row] = all_rows(queue)
        assert row["scheduled_at"] == tick
        assert tick <= enqueued_at < tick + timedelta(seconds=300), (enqueued_at, tick)
    finally:
        assert served.stop() == 0
