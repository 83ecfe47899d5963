"""One dispatcher pass and the breaker of its Jenkins, against the real database and the emulator over real HTTP:
what one failed trigger costs, and what it takes for the pass to decide that Jenkins as a whole is down.

Issue 21 #1: on the code before, one 500 stopped the whole pass (STOP_PASS) and released every unsent row.
"""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import dispatch_settings, wait_for

pytestmark = pytest.mark.both_engines

JOBS = ["deploy", "team/app/deploy", "Test Job"]


def _rows(queue):
    return sorted(queue.list_jobs(limit=1000), key=lambda r: r["id"])


def test_a_lone_500_among_successes_backs_that_row_off_and_the_pass_goes_on(jenkins, queue):
    for n in range(12):
        queue.enqueue(JOBS[n % 3])
    jenkins.add_fault(path="buildWithParameters$", status=500, times=1)
    # Its backoff (on Jenkins's scale, JENKINS_RETRY_*) made long: the row must not come back within this pass.
    summary = run_pass(dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="2", JENKINS_RETRY_BASE_SECONDS="60",
                                         JENKINS_RETRY_MAX_SECONDS="60"))
    assert summary["jenkins_unavailable"] is False and summary["stopped_because"] == "queue empty", summary
    assert (summary["triggered"], summary["retried_later"], summary["released"]) == (11, 1, 0), summary
    [backed_off] = [r for r in _rows(queue) if r["status"] == "pending"]
    assert backed_off["attempts"] == 1 and "HTTP 500" in backed_off["last_error"]
    assert jenkins.counters()["items_created"] == 11


def test_500s_in_a_row_about_different_jobs_mean_jenkins_is_down(jenkins, queue):
    """Jenkins itself answers (whoAmI) but every trigger fails: after three jobs, that is Jenkins, not them."""
    for n in range(9):
        queue.enqueue(JOBS[n % 3])
    jenkins.add_fault(path="buildWithParameters$", status=500)
    summary = run_pass(dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="1", BATCH_SIZE="9",
                                         LEASE_SECONDS="30"))
    assert summary["jenkins_unavailable"] is True, summary
    assert "3 requests failed in a row, about 3 different jobs" in summary["stopped_because"]
    rows = _rows(queue)
    # The first two were each their row's transient error (an attempt spent); the third, and all after it, wait
    # with every attempt: Jenkins was down.
    assert [r["attempts"] for r in rows] == [1, 1, 0, 0, 0, 0, 0, 0, 0], rows
    assert all(r["status"] == "pending" for r in rows)


def test_a_500_then_jenkins_itself_not_answering_means_jenkins_is_down(jenkins, queue):
    for n in range(6):
        queue.enqueue(JOBS[n % 3])
    jenkins.add_fault(path="buildWithParameters$", status=500)
    jenkins.add_fault(path="whoAmI", status=500)
    summary = run_pass(dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="1", LEASE_SECONDS="30"))
    assert summary["jenkins_unavailable"] is True, summary
    assert "Jenkins itself did not answer" in summary["stopped_because"], summary
    assert [r["attempts"] for r in _rows(queue)] == [0] * 6  # released: nothing spent on an outage
    assert summary["released"] == summary["claimed"] == 6


def test_a_500_on_one_job_only_fails_that_job_after_its_attempts_and_never_stops_the_others(jenkins, queue):
    """A job whose own triggers always fail is that job's problem: its rows back off, the others are built."""
    for n in range(8):
        queue.enqueue("deploy" if n % 2 else "team/app/deploy", max_attempts=2)
    jenkins.add_fault(path="job/team/job/app/job/deploy/buildWithParameters$", status=500)
    settings = dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="1", JENKINS_RETRY_BASE_SECONDS="0.1",
                                 JENKINS_RETRY_MAX_SECONDS="0.1")
    summaries = []

    def team_rows_final() -> bool:
        summaries.append(run_pass(settings))  # each backoff is 0.05-0.1 s: a pass or two finds them due
        return all(r["status"] == "failed" for r in _rows(queue) if r["job_name"] == "team/app/deploy")

    assert wait_for(team_rows_final, timeout=20, interval=0.1), _rows(queue)
    assert not any(s["jenkins_unavailable"] for s in summaries), summaries
    assert sum(s["triggered"] for s in summaries) == 4
    by_job = {}
    for row in _rows(queue):
        by_job.setdefault(row["job_name"], []).append((row["status"], row["attempts"]))
    assert by_job == {"deploy": [("processing", 1)] * 4, "team/app/deploy": [("failed", 2)] * 4}, by_job
    assert all("HTTP 500" in r["last_error"] for r in _rows(queue) if r["status"] == "failed")
