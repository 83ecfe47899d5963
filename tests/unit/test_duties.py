"""The duties' interface, the pruner's memory of when it is due, and the pure map of a failed pass (no database)."""

from __future__ import annotations

import pytest

from jenkins_dispatch.config import PRUNE_DEFAULT_SECONDS, load_settings
from jenkins_dispatch.dispatching.decisions import BUSY_RETRY_SECONDS, FailedPass, after_a_failed_pass
from jenkins_dispatch.dispatching.dispatcher import pass_duties
from jenkins_dispatch.dispatching.duties import due, seconds_until_any_due
from jenkins_dispatch.dispatching.duties.pruner import (
    AGGREGATES_KEPT_SECONDS,
    EVERY_SECONDS,
    RECHECK_SECONDS,
    Pruner,
)
from jenkins_dispatch.dispatching.duties.reconcile import Reconcile
from jenkins_dispatch.dispatching.duties.schedule_ticks import ScheduleTicks
from jenkins_dispatch.dispatching.duties.unknown_controllers import UnknownControllers
from jenkins_dispatch.errors import (
    ConfigError,
    DatabaseBusy,
    DatabaseUnavailable,
    DispatchError,
    JenkinsUnavailable,
)
from jenkins_dispatch.operating.timeline import SHOWN_SECONDS
from jenkins_dispatch.store.queue import DutyTurn

BASE = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}


# --------------------------------------------------------------------------- a failed pass, from a table


@pytest.mark.parametrize(("error", "expected"), [
    (DatabaseBusy("lock timeout"), FailedPass(
        "database busy", "pass ended early: the database is busy; trying again shortly", "warning", database_ok=True,
        beat=("database_busy", "lock timeout"), pause_seconds=BUSY_RETRY_SECONDS)),
    (DatabaseUnavailable("cannot connect"), FailedPass(
        "database unavailable", "pass ended: the database is unavailable; retrying", "error", database_ok=False,
        beat=None)),
    (JenkinsUnavailable("HTTP 503"), FailedPass(
        "HTTP 503", "pass failed", "error", database_ok=None, beat=("failed", "HTTP 503"), backoff_attempt=1)),
    (DispatchError("bad row"), FailedPass(
        "bad row", "pass failed", "error", database_ok=None, beat=("failed", "bad row"), backoff_attempt=1)),
    (KeyError("x"), FailedPass(
        "crashed", "pass crashed", "exception", database_ok=None, beat=("crashed", "KeyError: 'x'"),
        backoff_attempt=3)),
    (ConfigError("JENKINS_URL is not set"), None),  # ends the loop
])
def test_a_failed_pass_maps_to_a_pause_a_reason_and_a_beat(error, expected):
    assert after_a_failed_pass(error) == expected


# --------------------------------------------------------------------------- the interface


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Queue:
    """Answers the pruner's statements from a script, counting them."""

    def __init__(self, turns: list[DutyTurn], batches: list[int]) -> None:
        self.turns, self.batches, self.calls = turns, batches, []

    def take_duty(self, name, holder, hold_seconds):
        self.calls.append("take_duty")
        return self.turns.pop(0)

    def prune_one_batch(self, older_than_seconds, batch):
        self.calls.append("prune_batch")
        return self.batches.pop(0)

    def prune_aggregates(self, older_than_seconds):
        self.calls.append("prune_aggregates")
        return 7

    def duty_done(self, name, holder, every_seconds):
        self.calls.append("duty_done")
        return True


class _Context:
    def __init__(self, queue) -> None:
        self.settings, self.db, self.queue = None, None, queue


def test_every_duty_has_a_name_a_due_time_and_a_kind():
    duties = pass_duties(sweeps=True, pruner=Pruner(DAY := 86_400.0))
    assert [type(d) for d in duties] == [ScheduleTicks, UnknownControllers, Pruner, Reconcile]
    assert len({d.name for d in duties}) == 4
    assert [type(d) for d in due(duties, needs_jenkins=False)] == [ScheduleTicks, UnknownControllers, Pruner]
    assert [type(d) for d in due(duties, needs_jenkins=True)] == [Reconcile]
    assert [type(d) for d in pass_duties(sweeps=False)] == [ScheduleTicks, Reconcile]
    assert seconds_until_any_due([Pruner(None)]) is None and DAY


def test_the_pruner_asks_when_due_and_not_before():
    clock = _Clock()
    pruner = Pruner(86_400.0, clock=clock, batch=10)
    queue = _Queue([DutyTurn(False, 1800.0), DutyTurn(True, 300.0), DutyTurn(True, 300.0), DutyTurn(False, -1.0)],
                   [10, 3])
    assert pruner.seconds_until_due() <= 0  # a new dispatcher asks at its first pass
    assert pruner.run(_Context(queue)) == {}  # another holds the turn: it said when it is due again
    assert pruner.seconds_until_due() == 1800.0 and due([pruner], needs_jenkins=False) == []
    clock.now += 1800
    assert pruner.run(_Context(queue)) == {"pruned": 10, "prune_batches": 1}  # a full batch: more to do
    assert pruner.seconds_until_due() <= 0
    assert pruner.run(_Context(queue)) == {"pruned": 3, "prune_batches": 1, "aggregates_pruned": 7}
    assert pruner.seconds_until_due() == EVERY_SECONDS  # handed back
    assert queue.calls == ["take_duty", "take_duty", "prune_batch", "take_duty", "prune_batch", "prune_aggregates",
                           "duty_done"]
    clock.now += EVERY_SECONDS
    pruner.run(_Context(queue))  # lost a race it was told it had won: asks again no sooner than RECHECK_SECONDS
    assert pruner.seconds_until_due() == RECHECK_SECONDS


def test_the_pruner_keeps_what_the_time_page_shows():
    assert AGGREGATES_KEPT_SECONDS == SHOWN_SECONDS


# --------------------------------------------------------------------------- PRUNE_FINISHED_AFTER


@pytest.mark.parametrize(("value", "seconds"), [
    ("", PRUNE_DEFAULT_SECONDS), ("30d", 30 * 86_400.0), ("12h", 12 * 3600.0), ("90m", 5400.0), ("1h", 3600.0),
    ("3600s", 3600.0), ("1.5d", 1.5 * 86_400), ("OFF", None), ("off", None), (" 7d ", 7 * 86_400.0),
])
def test_prune_finished_after_reads_a_duration_or_off(value, seconds):
    assert load_settings({**BASE, "PRUNE_FINISHED_AFTER": value}).prune_finished_after_seconds == seconds


@pytest.mark.parametrize("value", ["30", "-1d", "0d", "59m", "thirty days", "30 days", "1w", "36501d", "nan", "+5m"])
def test_a_bad_prune_finished_after_is_refused_in_one_line_naming_it(value):
    with pytest.raises(ConfigError) as refused:
        load_settings({**BASE, "PRUNE_FINISHED_AFTER": value})
    assert "PRUNE_FINISHED_AFTER" in str(refused.value) and "\n" not in str(refused.value)
