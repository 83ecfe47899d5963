"""The breaker of one Jenkins (dispatching/breaker.py) and how a trigger's answer is weighed by it (``weigh``): pure
state on a fake clock, table-driven.

Issue 21 #1: any pass that met one 5xx counted as "Jenkins is down" and backed off up to 15 s, successes in the
same pass notwithstanding; a lone 500 also stopped the pass (STOP_PASS).
"""

from __future__ import annotations

import random

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching.breaker import Breaker, breaker_for, weigh
from jenkins_dispatch.dispatching.decisions import Act, Evidence, decide_trigger, jenkins_evidence
from jenkins_dispatch.jenkins.answers import (
    Accepted,
    AuthRejected,
    BadRequest,
    Disabled,
    JobNotFound,
    OutcomeUnknown,
    ServerError,
    Unavailable,
)

SUSPECT, DOWN = Evidence.SUSPECT, Evidence.DOWN


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class NoJitter(random.Random):
    def random(self) -> float:  # backoff_seconds: base * 2^(n-1) * (0.5 + 0.5 * random()) = the ceiling
        return 1.0


def _breaker(failures: int = 3, clock: Clock | None = None) -> Breaker:
    return Breaker("http://jenkins/", failures=failures, retry_base_seconds=1.0, retry_max_seconds=15.0,
                   clock=clock or Clock(), rng=NoJitter(), wall_clock=lambda: "2026-12-01T00:00:00+00:00")


# Each step: "ok" (a success), or (job, kind). Then: open or not, and after how many steps it first opened.
@pytest.mark.parametrize(("steps", "is_open"), [
    ([("a", SUSPECT)], False),  # a lone 500
    ([("a", SUSPECT), ("b", SUSPECT)], False),
    ([("a", SUSPECT), ("b", SUSPECT), ("c", SUSPECT)], True),  # three in a row, three jobs
    ([("a", SUSPECT), ("a", SUSPECT), ("a", SUSPECT), ("a", SUSPECT)], False),  # one job's own trouble
    ([("a", SUSPECT), ("a", SUSPECT), ("b", SUSPECT), ("a", SUSPECT)], False),  # only two jobs
    ([("a", SUSPECT), ("a", SUSPECT), ("b", SUSPECT), ("c", SUSPECT)], True),
    ([("a", SUSPECT), ("b", SUSPECT), "ok", ("c", SUSPECT)], False),  # a success between: not in a row
    ([("a", SUSPECT), "ok", ("b", SUSPECT), "ok", ("c", SUSPECT), "ok"], False),  # 5 % of errors among successes
    ([("a", DOWN)], True),  # restarting, refused, credentials: at once
    ([(None, DOWN)], True),  # a failed probe of Jenkins itself
    ([("a", SUSPECT), (None, DOWN)], True),  # a 500, then the probe failed
    ([("a", DOWN), "ok"], False),  # one success closes it
    ([("a", SUSPECT), ("b", SUSPECT), ("c", SUSPECT), "ok"], False),
])
def test_what_opens_and_what_closes_the_breaker(steps, is_open):
    breaker = _breaker()
    for step in steps:
        if step == "ok":
            breaker.record_success()
        else:
            breaker.record_failure(step[0], step[1], "HTTP 500")
    assert breaker.is_open is is_open
    assert (breaker.retry_at is not None) is is_open and (breaker.why is not None) is is_open


@pytest.mark.parametrize("failures", [1, 2, 5])
def test_the_threshold_is_a_setting(failures):
    breaker = _breaker(failures=failures)
    for n in range(failures - 1):
        assert breaker.record_failure(f"job-{n}", SUSPECT, "HTTP 500") is False
    assert breaker.record_failure("last", SUSPECT, "HTTP 500") is True
    assert f"{failures} requests failed in a row, about {failures} different jobs" in breaker.why


def test_backoff_doubles_while_it_stays_down_and_starts_again_from_its_base_after_a_success():
    clock = Clock()
    breaker = _breaker(clock=clock)
    waits = []
    for _ in range(6):
        sent_at = breaker.now()  # the request allowed at retry_at (or the first one)
        breaker.record_failure(None, DOWN, "Jenkins is restarting (HTTP 503)", sent_at)
        waits.append(breaker.retry_in())
        clock.now = breaker.retry_at
    assert waits == [1.0, 2.0, 4.0, 8.0, 15.0, 15.0]
    assert breaker.record_success(breaker.now()) is True and not breaker.is_open
    breaker.record_failure(None, DOWN, "Jenkins is restarting (HTTP 503)", breaker.now())
    assert breaker.retry_in() == 1.0  # from the base again


def test_failures_of_requests_already_on_their_way_do_not_lengthen_the_wait():
    """Eight trigger threads meet the same restart: one opening, not eight doublings."""
    clock = Clock()
    breaker = _breaker(clock=clock)
    sent_at = breaker.now()
    clock.now += 0.1
    for _ in range(8):
        breaker.record_failure("a", DOWN, "Jenkins is restarting (HTTP 503)", sent_at)
    assert breaker.retry_in() == 1.0


def test_a_success_sent_before_it_opened_does_not_close_it():
    """An answer already on its way when Jenkins went down says nothing about the outage that followed."""
    clock = Clock()
    breaker = _breaker(clock=clock)
    early = breaker.now()
    clock.now += 0.5
    breaker.record_failure("a", DOWN, "connection refused", breaker.now())
    assert breaker.record_success(early) is False and breaker.is_open
    clock.now += 2
    assert breaker.record_success(breaker.now()) is True and not breaker.is_open


def test_a_probe_that_answers_closes_it_when_open_and_clears_nothing_when_closed():
    breaker = _breaker()
    breaker.record_failure("a", SUSPECT, "HTTP 500")
    breaker.record_failure("b", SUSPECT, "HTTP 500")
    assert breaker.record_probe_ok() is False
    assert breaker.record_failure("c", SUSPECT, "HTTP 500") is True  # the run of failures stood
    assert breaker.record_probe_ok(breaker.now()) is True and not breaker.is_open


def test_the_snapshot_is_what_healthz_shows():
    clock = Clock()
    breaker = _breaker(clock=clock)
    assert breaker.snapshot()["status"] == "unknown"
    breaker.record_failure("a", SUSPECT, "HTTP 500")
    assert breaker.snapshot() == {"status": "ok", "reason": None, "since": "2026-12-01T00:00:00+00:00",
                                  "consecutive_failures": 1}
    breaker.record_failure(None, DOWN, "Jenkins unavailable: cannot connect")
    snap = breaker.snapshot()
    assert (snap["status"], snap["reason"], snap["consecutive_failures"], snap["retry_in_seconds"]) == (
        "unavailable", "Jenkins unavailable: cannot connect", 2, 1.0)
    breaker.record_success()
    assert breaker.snapshot()["status"] == "ok" and breaker.snapshot()["consecutive_failures"] == 0


def test_settings_give_each_jenkins_its_breaker():
    settings = load_settings({"DATABASE_URL": "postgresql://u@h/db", "JENKINS_URL": "http://ci:8080/jenkins",
                              "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t", "JENKINS_BREAKER_FAILURES": "5",
                              "JENKINS_RETRY_BASE_SECONDS": "2", "JENKINS_RETRY_MAX_SECONDS": "60"})
    breaker = breaker_for(settings)
    assert (breaker.url, breaker.failures, breaker.retry_base_seconds, breaker.retry_max_seconds) == (
        "http://ci:8080/jenkins/", 5, 2.0, 60.0)


@pytest.mark.parametrize(("outcome", "evidence"), [
    (Accepted(7), Evidence.WORKS),
    (JobNotFound("a"), Evidence.WORKS),  # Jenkins answered, about the job
    (BadRequest("x"), Evidence.WORKS),
    (Disabled("a"), Evidence.WORKS),
    (ServerError(500, "Jenkins failed with HTTP 500"), Evidence.SUSPECT),
    (OutcomeUnknown("read timeout"), Evidence.SUSPECT),
    (Unavailable("Jenkins is starting (HTTP 503)"), Evidence.DOWN),  # "getting ready to work"
    (Unavailable("Jenkins is restarting (HTTP 503)"), Evidence.DOWN),
    (Unavailable("cannot connect to Jenkins at http://j/ (ConnectionError)"), Evidence.DOWN),  # refused
    (AuthRejected("Jenkins rejected the credentials of user u"), Evidence.DOWN),  # 401
])
def test_what_each_answer_says_about_jenkins_as_a_whole(outcome, evidence):
    assert jenkins_evidence(outcome) is evidence


# --------------------------------------------------------------------------- the pass: weigh


def _weigh(breaker: Breaker, job: str, outcome, probe_answer: str | None = None):
    probes = []

    def probe():
        probes.append(job)
        return probe_answer

    decision = weigh(breaker, job, outcome, decide_trigger(job, outcome), sent_at=breaker.now(), probe=probe)
    return decision, probes


ERROR = ServerError(500, "Jenkins failed with HTTP 500 while triggering x: A problem occurred")


def test_a_lone_500_among_successes_is_that_rows_backoff_and_the_pass_goes_on():
    breaker = _breaker()
    acts = []
    for n in range(40):
        outcome = ERROR if n % 20 == 7 else Accepted(n + 1)
        decision, probes = _weigh(breaker, f"job-{n % 4}", outcome)
        acts.append(decision.act)
        assert probes == ([f"job-{n % 4}"] if outcome is ERROR else [])  # Jenkins itself was asked, and answered
        assert not breaker.is_open
    assert acts.count(Act.RETRY_LATER) == 2 and acts.count(Act.RECORD) == 38 and Act.STOP_PASS not in acts


def test_consecutive_500s_across_different_jobs_open_it_and_release_the_row_that_did():
    breaker = _breaker()
    first, _ = _weigh(breaker, "a", ERROR)
    second, _ = _weigh(breaker, "b", ERROR)
    third, _ = _weigh(breaker, "c", ERROR)
    assert (first.act, second.act) == (Act.RETRY_LATER, Act.RETRY_LATER)
    assert third.act is Act.STOP_PASS and breaker.is_open  # not acted upon: released, its attempt kept
    assert "3 requests failed in a row, about 3 different jobs" in third.reason


def test_a_failed_probe_right_after_a_500_opens_it():
    breaker = _breaker()
    decision, probes = _weigh(breaker, "a", ERROR, probe_answer="cannot connect to Jenkins (ConnectionError)")
    assert probes == ["a"] and breaker.is_open and decision.act is Act.STOP_PASS
    assert "Jenkins itself did not answer: cannot connect" in breaker.why


@pytest.mark.parametrize("outcome", [
    Unavailable("Jenkins is starting (HTTP 503)"),
    Unavailable("cannot connect to Jenkins at http://j/ (ConnectionError)"),
    AuthRejected("Jenkins rejected the credentials of user u: check JENKINS_USER / JENKINS_API_TOKEN"),
])
def test_getting_ready_refused_and_rejected_credentials_open_it_at_once(outcome):
    breaker = _breaker()
    decision, probes = _weigh(breaker, "a", outcome)
    assert breaker.is_open and decision.act is Act.STOP_PASS and probes == []
    assert breaker.why == decision.reason


def test_an_unknown_outcome_keeps_its_lease_even_when_it_opens_the_breaker():
    """It may have been acted upon: releasing it could build it twice."""
    breaker = _breaker(failures=1)
    decision, _ = _weigh(breaker, "a", OutcomeUnknown("read timeout"))
    assert breaker.is_open and decision.act is Act.KEEP_LEASE


def test_one_success_closes_it_and_the_backoff_restarts_from_its_base():
    clock = Clock()
    breaker = _breaker(clock=clock)
    for _ in range(3):
        _weigh(breaker, "a", Unavailable("Jenkins is restarting (HTTP 503)"))
        clock.now = breaker.retry_at
    assert breaker.retry_in() == 0.0 and breaker.is_open
    _weigh(breaker, "a", Accepted(1))
    assert not breaker.is_open
    _weigh(breaker, "a", Unavailable("Jenkins is restarting (HTTP 503)"))
    assert breaker.retry_in() == 1.0


def test_no_answer_counts_towards_the_run_but_is_not_followed_by_a_probe():
    """A timeout says Jenkins (or the path) is slow: a probe would wait as long again on a trigger thread."""
    breaker = _breaker()
    decision, probes = _weigh(breaker, "a", OutcomeUnknown("no answer from Jenkins (ReadTimeout)"))
    assert probes == [] and decision.act is Act.KEEP_LEASE and not breaker.is_open
    _weigh(breaker, "b", OutcomeUnknown("no answer from Jenkins (ReadTimeout)"))
    _weigh(breaker, "c", OutcomeUnknown("no answer from Jenkins (ReadTimeout)"))
    assert breaker.is_open


class Ceiling(random.Random):
    def random(self) -> float:
        return 1.0


@pytest.mark.parametrize(("outcome", "attempt", "expected"), [
    (ERROR, 1, 1.0),  # Jenkins failed on this request: back on Jenkins's scale (1 s doubling to 15 s)
    (ERROR, 3, 4.0),
    (ERROR, 9, 15.0),
    (Disabled("a"), 1, 30.0),  # the job's own condition: a person must act, on the job's scale
    (Disabled("a"), 9, 900.0),
])
def test_a_500_backs_its_row_off_on_jenkinss_scale_not_a_jobs(outcome, attempt, expected):
    from jenkins_dispatch.dispatching.decisions import retry_delay

    decision = decide_trigger("a", outcome)
    assert decision.act is Act.RETRY_LATER
    assert retry_delay(decision, attempt, (30.0, 900.0), (1.0, 15.0), Ceiling()) == expected
