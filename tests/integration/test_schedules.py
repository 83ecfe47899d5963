"""Schedules (issue 24): stored as data, each tick of an enabled schedule enqueued exactly once however many
dispatchers race for it, missed ticks not replayed one by one. The real database, on each engine; the races
run real threads, each on its own session."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.errors import Conflict, InvalidInput, NotFound
from jenkins_dispatch.operating.scheduling import (
    add_schedule,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.schedules import Schedules

from ..cli_helpers import configure_default_controller, exit_code

pytestmark = pytest.mark.both_engines


@pytest.fixture
def schedules(db):
    return Schedules(db)


def minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def make_due(db, name: str, ago: timedelta) -> datetime:
    """Set the schedule's next tick ``ago`` in the past, on a minute (as a dispatcher that slept would find it)."""
    tick = minute(Schedules(db).now() - ago)
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick WHERE name = :name", tick=tick, name=name)
    return tick


def rows(queue) -> list[dict]:
    return sorted(queue.list_jobs(limit=10_000), key=lambda r: r["id"])


def test_add_list_pause_resume_remove(schedules, queue):
    added = add_schedule(schedules, "nightly", "team/app/deploy", {"ENV": "prod"}, cron="0 3 * * *",
                         timezone="Europe/Berlin", priority=5, controller="eu")
    now = schedules.now()
    assert now < added.next_tick <= now + timedelta(days=1)
    [row] = schedules.listed()
    assert (row["name"], row["job_name"], row["parameters"], row["cron"], row["timezone"], row["priority"],
            row["controller"], row["state"], row["last_tick"], row["last_job_id"]) == (
        "nightly", "team/app/deploy", {"ENV": "prod"}, "0 3 * * *", "Europe/Berlin", 5, "eu", "enabled", None, None)
    with pytest.raises(Conflict):
        add_schedule(schedules, "NIGHTLY", "other", cron="* * * * *")  # names compare ignoring case
    assert pause_schedule(schedules, "nightly", paused_by="alice").changed
    assert not pause_schedule(schedules, "nightly").changed
    assert schedules.get("nightly")["state"] == "paused"
    resumed = resume_schedule(schedules, "nightly")
    assert resumed.changed and resumed.next_tick > now
    assert not resume_schedule(schedules, "nightly").changed
    remove_schedule(schedules, "nightly")
    assert schedules.listed() == []
    for action in (remove_schedule, pause_schedule, resume_schedule):
        with pytest.raises(NotFound):
            action(schedules, "nightly")
    assert rows(queue) == []


@pytest.mark.parametrize(("name", "job", "cron", "tz"), [
    ("bad name!", "deploy", "* * * * *", "UTC"),
    ("ok", "", "* * * * *", "UTC"),
    ("ok", "deploy", "* * * *", "UTC"),
    ("ok", "deploy", "0 0 31 2 *", "UTC"),  # never matches
    ("ok", "deploy", "* * * * *", "Nowhere/Land"),
])
def test_bad_input_stores_nothing(schedules, name, job, cron, tz):
    with pytest.raises(InvalidInput):
        add_schedule(schedules, name, job, cron=cron, timezone=tz)
    assert schedules.listed() == []


def test_a_due_tick_is_enqueued_once_as_an_ordinary_row(db, schedules, queue):
    add_schedule(schedules, "hourly", "deploy", {"ENV": "prod"}, cron="* * * * *", priority=7)
    tick = make_due(db, "hourly", timedelta(0))  # this minute: due, and the latest tick
    done = enqueue_due_ticks(schedules)
    assert (done.enqueued, done.skipped) == (1, 0)
    [row] = rows(queue)
    assert (row["job_name"], row["status"], row["priority"], row["scheduled_at"]) == ("deploy", "pending", 7, tick)
    assert queue.get(row["id"])["parameters"] == {"ENV": "prod"}
    assert "of schedule hourly" in queue.events(row["id"])[0]["detail"]
    after = schedules.get("hourly")
    assert (after["last_tick"], after["last_job_id"], after["last_status"]) == (tick, row["id"], "pending")
    assert after["next_tick"] == tick + timedelta(minutes=1)
    assert enqueue_due_ticks(schedules).enqueued == 0  # the next tick is not due yet
    assert len(rows(queue)) == 1


def test_a_ticks_row_runs_on_the_schedules_controller(db, schedules, queue):
    add_schedule(schedules, "eu-nightly", "deploy", cron="* * * * *", controller="eu")
    make_due(db, "eu-nightly", timedelta(0))
    assert enqueue_due_ticks(schedules).enqueued == 1
    [row] = rows(queue)
    assert queue.get(row["id"])["controller"] == "eu"


def test_missed_ticks_are_not_replayed_only_the_latest_is_enqueued(db, schedules, queue):
    add_schedule(schedules, "often", "deploy", cron="* * * * *")
    make_due(db, "often", timedelta(minutes=10, seconds=1))
    done = enqueue_due_ticks(schedules)
    latest = minute(schedules.now())
    assert done.enqueued == 1 and 9 <= done.skipped <= 10
    [row] = rows(queue)
    assert row["scheduled_at"] == latest or row["scheduled_at"] == latest - timedelta(minutes=1)  # a minute may turn


def test_a_paused_schedule_enqueues_nothing_and_resumes_from_the_next_tick(db, schedules, queue):
    add_schedule(schedules, "often", "deploy", cron="* * * * *")
    make_due(db, "often", timedelta(minutes=5))
    pause_schedule(schedules, "often")
    assert enqueue_due_ticks(schedules).enqueued == 0
    resumed = resume_schedule(schedules, "often")
    assert resumed.next_tick > schedules.now()  # the ticks missed while paused are not caught up
    assert enqueue_due_ticks(schedules).enqueued == 0
    assert rows(queue) == []


def test_a_schedule_of_a_paused_job_enqueues_its_row_which_waits_like_any_row(db, schedules, queue):
    add_schedule(schedules, "often", "deploy", cron="* * * * *")
    queue.pause("deploy")
    make_due(db, "often", timedelta(seconds=5))
    assert enqueue_due_ticks(schedules).enqueued == 1
    assert queue.claim_batch(10) == []
    queue.resume("deploy")
    assert [j.job_name for j in queue.claim_batch(10)] == ["deploy"]


def test_a_removed_schedule_keeps_its_rows(db, schedules, queue):
    add_schedule(schedules, "often", "deploy", cron="* * * * *")
    make_due(db, "often", timedelta(seconds=5))
    enqueue_due_ticks(schedules)
    remove_schedule(schedules, "often")
    assert [r["status"] for r in rows(queue)] == ["pending"]


def race(sessions: list[Database]) -> list:
    """Every session runs the ticking step at the same moment, each on its own thread; what each did."""
    start = threading.Barrier(len(sessions))
    results: list = [None] * len(sessions)

    def one(i: int) -> None:
        start.wait()
        results[i] = enqueue_due_ticks(Schedules(sessions[i]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("racers", [8])
def test_racing_dispatchers_enqueue_each_tick_exactly_once(db, schedules, queue, database_url, racers):
    """Many sessions take the same due ticks at the same moment, round after round: one row per tick."""
    for n in range(20):
        # Yearly: only the test makes them due, so a minute turning mid-round adds no genuine tick.
        add_schedule(schedules, f"s{n}", f"job{n % 3}", cron="0 0 1 1 *")
    sessions = [Database(parse_database_url(database_url), application_name=f"racer-{i}") for i in range(racers)]
    try:
        for round_ in range(5):
            for n in range(20):
                make_due(db, f"s{n}", timedelta(minutes=round_ + 1))
            results = race(sessions)
            assert sum(r.enqueued for r in results) == 20, results
            # One row per schedule per round, each schedule's own: never two rows for one tick.
            assert len(rows(queue)) == 20 * (round_ + 1)
            last_rows = {s["last_job_id"] for s in schedules.listed()}
            assert len(last_rows) == 20 and max(last_rows) == 20 * (round_ + 1)
    finally:
        for s in sessions:
            s.close()


def test_cli_schedule_commands(db, schedules, capsys, monkeypatch):
    configure_default_controller(monkeypatch)
    assert exit_code(["schedule", "add", "nightly", "deploy", "--cron", "0 3 * * *", "-p", "ENV=prod",
                      "--timezone", "Europe/Berlin"]) == 0
    assert "next tick" in capsys.readouterr().out
    assert exit_code(["schedule", "ls"]) == 0
    listed = capsys.readouterr().out
    assert "nightly" in listed and "enabled" in listed
    assert exit_code(["schedule", "pause", "nightly"]) == 0
    assert exit_code(["schedule", "ls", "--json"]) == 0
    assert '"state": "paused"' in capsys.readouterr().out
    assert exit_code(["schedule", "resume", "nightly"]) == 0
    assert exit_code(["schedule", "rm", "nightly"]) == 0
    assert exit_code(["schedule", "rm", "nightly"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize("cron", ["* * * *", "61 * * * *", "@daily", "0 0 31 2 *"])
def test_cli_an_invalid_cron_expression_is_one_line_exit_2_nothing_stored(db, schedules, capsys, cron, monkeypatch):
    configure_default_controller(monkeypatch)
    assert exit_code(["schedule", "add", "bad", "deploy", "--cron", cron]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cron expression" in err, err
    assert schedules.listed() == []


def test_cli_schedule_set_changes_cron_zone_and_priority_in_place(schedules, queue, capsys):
    """`schedule set NAME --cron … --timezone … --priority …`: changed in place, the next tick computed anew from the
    database's clock; its last tick and row stay. Bad input changes nothing; so does naming what it already is."""
    from jenkins_dispatch.dispatching.cron import next_tick as following

    add_schedule(schedules, "nightly", "deploy", cron="0 3 * * *")
    make_due(schedules.db, "nightly", timedelta(minutes=5))
    assert enqueue_due_ticks(schedules).enqueued == 1
    before = schedules.get("nightly")

    set_at = schedules.now()
    assert exit_code(["schedule", "set", "nightly", "--cron", "30 4 * * 1-5", "--timezone", "Europe/Berlin",
                      "--priority", "7", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    after = schedules.get("nightly")
    assert (after["cron"], after["timezone"], after["priority"]) == ("30 4 * * 1-5", "Europe/Berlin", 7)
    assert following("30 4 * * 1-5", "Europe/Berlin", set_at) <= after["next_tick"] \
        <= following("30 4 * * 1-5", "Europe/Berlin", schedules.now())
    assert answer["changed"] is True and answer["cron"] == "30 4 * * 1-5" and answer["priority"] == 7
    assert (after["last_tick"], after["last_job_id"]) == (before["last_tick"], before["last_job_id"])
    make_due(schedules.db, "nightly", timedelta(minutes=1))
    assert enqueue_due_ticks(schedules).enqueued == 1
    assert rows(queue)[-1]["priority"] == 7  # the new priority from the next row on

    untouched = schedules.get("nightly")
    assert exit_code(["schedule", "set", "nightly", "--cron", "61 * * * *"]) == 2
    assert "cron" in capsys.readouterr().err
    assert exit_code(["schedule", "set", "nightly", "--timezone", "Mars/Olympus"]) == 2
    capsys.readouterr()
    assert exit_code(["schedule", "set", "nightly", "--priority", "7"]) == 0
    assert "nothing changed" in capsys.readouterr().out
    assert schedules.get("nightly") == untouched
