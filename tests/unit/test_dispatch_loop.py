"""The continuous dispatcher's pure decisions, health report and configuration rules (no database)."""

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching.dispatch_loop import (
    EXPIRED_LEASE_RECHECK_SECONDS,
    MIN_WAIT_SECONDS,
    Health,
    add_up,
    news_calls_for_a_pass,
    seconds_until_next_pass,
)
from jenkins_dispatch.dispatching.wakeup import RECONNECTED, SLOT, WORK
from jenkins_dispatch.errors import ConfigError

BASE_ENV = {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "http://j/", "JENKINS_USER": "u",
            "JENKINS_API_TOKEN": "t"}


@pytest.mark.parametrize(("gauges", "interval", "expected"), [
    (None, 10, 10),
    ({}, 10, 10),
    ({"next_due_seconds": None, "next_lease_seconds": None}, 10, 10),
    ({"next_due_seconds": 2.5}, 10, 2.5),
    ({"next_due_seconds": 30}, 10, 10),
    ({"next_lease_seconds": 4}, 10, 4),
    ({"next_lease_seconds": -5}, 10, EXPIRED_LEASE_RECHECK_SECONDS),  # expired, still held: not a spin
    ({"next_due_seconds": 0.0}, 10, MIN_WAIT_SECONDS),
    ({"next_due_seconds": 3, "next_lease_seconds": 2}, 10, 2),
    # a schedule's next tick: its row does not exist yet, so only the schedule can say when to wake
    ({"next_tick_seconds": 7}, 10, 7),
    ({"next_tick_seconds": 3, "next_due_seconds": 5}, 10, 3),
    ({"next_tick_seconds": 30}, 10, 10),
    ({"next_tick_seconds": -2}, 10, EXPIRED_LEASE_RECHECK_SECONDS),  # due yet not taken: not a spin
])
def test_when_the_next_pass_runs(gauges, interval, expected):
    assert seconds_until_next_pass(gauges, interval) == pytest.approx(expected)


@pytest.mark.parametrize(("news", "last_stop", "expected"), [
    (set(), "queue empty", False),
    ({WORK}, "queue empty", True),
    ({SLOT}, "queue empty", False),  # a slot freed while nothing waits for one: no pass
    ({SLOT}, "cap reached", True),
    ({SLOT, WORK}, "queue empty", True),
    ({RECONNECTED}, "queue empty", True),  # notifications may have been missed
])
def test_which_news_calls_for_a_pass(news, last_stop, expected):
    assert news_calls_for_a_pass(news, last_stop) is expected


def test_pass_summaries_add_up():
    total = add_up({}, {"claimed": 2, "reconciled": {"checked": 1}, "stopped_because": "queue empty"})
    total = add_up(total, {"claimed": 3, "reconciled": {"checked": 2}, "stopped_because": "cap reached"})
    assert total == {"claimed": 5, "reconciled": {"checked": 3}, "stopped_because": "cap reached"}


def test_health_is_200_while_the_database_answers_and_says_why_jenkins_is_not():
    from jenkins_dispatch.dispatching.breaker import Breaker
    from jenkins_dispatch.dispatching.decisions import Evidence

    health = Health()
    assert health.report()[0] == 200 and health.report()[1]["database"]["status"] == "unknown"
    health.jenkins = breaker = Breaker("http://j/")
    health.database_ok()
    breaker.record_failure(None, Evidence.DOWN, "Jenkins unavailable: HTTP 503", breaker.now())
    breaker.record_failure(None, Evidence.DOWN, "Jenkins unavailable: HTTP 503", breaker.now())
    status, doc = health.report()
    assert status == 200 and doc["status"] == "degraded"
    assert doc["jenkins"]["reason"] == "Jenkins unavailable: HTTP 503"
    assert doc["jenkins"]["consecutive_failures"] == 2 and doc["jenkins"]["since"]
    health.database_failed("cannot connect to PostgreSQL at db.example:5432")
    status, doc = health.report()
    assert status == 503 and doc["status"] == "unavailable" and "db.example" in doc["database"]["reason"]
    health.database_ok()
    breaker.record_success()
    status, doc = health.report()
    assert (status, doc["status"], doc["jenkins"]["consecutive_failures"]) == (200, "ok", 0)


def test_health_shows_a_statement_waiting_too_long_and_a_pass_far_over_its_budget_while_they_last():
    """Issue 21 #3: /healthz said "ok" for 28 s while the database path was frozen mid-pass."""
    waited = [0.0]
    health = Health()
    health.watch_database(lambda: waited[0], stall_seconds=5)
    health.database_ok()
    health.pass_started(budget_seconds=0.05, overdue_after_seconds=0.0)
    status, doc = health.report()
    assert (status, doc["status"], doc["dispatcher"]["status"]) == (200, "degraded", "overdue")
    waited[0] = 4.9  # a lock wait, say: not an outage
    assert health.report()[1]["database"]["status"] == "ok"
    waited[0] = 6.0
    status, doc = health.report()
    assert (status, doc["status"], doc["database"]["status"]) == (503, "unavailable", "unavailable")
    assert "waited 6 s" in doc["database"]["reason"] and "DB_STALL_SECONDS" in doc["database"]["reason"]
    assert health.readings()["database_up"] == 0.0
    waited[0] = 0.0
    health.pass_ended()
    status, doc = health.report()
    assert (status, doc["status"], doc["dispatcher"]["status"]) == (200, "ok", "idle")


@pytest.mark.parametrize(("lease", "timeout"), [("11", "10.6"), ("2", "1.5"), ("10", "10"), ("5", "9")])
def test_a_lease_that_cannot_hold_one_trigger_is_refused(lease, timeout):
    with pytest.raises(ConfigError) as refused:
        load_settings({**BASE_ENV, "LEASE_SECONDS": lease, "JENKINS_TIMEOUT_SECONDS": timeout})
    message = str(refused.value)
    assert "LEASE_SECONDS" in message and "JENKINS_TIMEOUT_SECONDS" in message and "\n" not in message


@pytest.mark.parametrize(("lease", "timeout"), [("3", "1"), ("11", "10"), ("300", "10")])
def test_leases_that_hold_a_trigger_are_accepted(lease, timeout):
    settings = load_settings({**BASE_ENV, "LEASE_SECONDS": lease, "JENKINS_TIMEOUT_SECONDS": timeout})
    assert settings.lease_seconds == int(lease)


def test_a_pass_budget_that_cannot_fit_one_timeout_is_refused():
    settings = load_settings({**BASE_ENV, "LEASE_SECONDS": "100", "JENKINS_TIMEOUT_SECONDS": "46"})
    with pytest.raises(ConfigError, match="TIME_MARGIN_SECONDS .* JENKINS_TIMEOUT_SECONDS"):
        settings.check_pass_budget(50, "the dispatcher function's time left (DispatcherTimeoutSeconds)")
    settings.check_pass_budget(60, "x")  # 60 - 10 >= 46


@pytest.mark.parametrize(("lease", "timeout", "budget"), [("300", "10", 55), ("3", "1", 3), ("100", "46", 138),
                                                          ("11", "10", 30)])
def test_a_pass_gives_way_to_the_reconciler_at_least_once_per_lease(lease, timeout, budget):
    from jenkins_dispatch.dispatching.dispatch_loop import default_pass_budget

    settings = load_settings({**BASE_ENV, "LEASE_SECONDS": lease, "JENKINS_TIMEOUT_SECONDS": timeout})
    assert default_pass_budget(settings) == budget


@pytest.mark.parametrize(("name", "value"), [("DISPATCHER_MODE", "sometimes"), ("WEBHOOK_DB_POOL_SIZE", "0")])
def test_new_settings_are_validated(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings({**BASE_ENV, name: value})


def test_new_settings_defaults():
    settings = load_settings(BASE_ENV)
    assert (settings.dispatcher_mode, settings.webhook_db_pool_size) == ("continuous", 4)


def test_metrics_from_the_dispatcher_and_webhook_threads_never_collide(capsys):
    """`serve` adds and flushes metrics from its dispatcher thread and webhook threads at once; unguarded,
    Powertools' shared metric set raised "dictionary changed size during iteration" (or flushed an empty
    set) and the exception ended `serve` (304 errors in 5 s before the lock)."""
    import sys
    import threading
    import time

    from jenkins_dispatch.observability import MetricUnit, metrics

    errors: list[str] = []
    stop = threading.Event()

    def hammer(names):
        while not stop.is_set():
            try:
                for name in names:
                    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
                metrics.flush_if_any()
            except Exception as exc:  # noqa: BLE001 - counting every kind of failure is the point
                errors.append(f"{type(exc).__name__}: {exc}")

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    threads = [threading.Thread(target=hammer, args=(names,))
               for names in (("PassDurationMs", "InFlight"), ("Notifications1", "NotificationLatency"))]
    try:
        for t in threads:
            t.start()
        time.sleep(1.5)
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(previous)
    capsys.readouterr()
    assert errors == []
