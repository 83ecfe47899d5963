"""bulk `retry` and `cancel`, the pure parts: which requests are refused, what a dry run and a run report
(as text and for scripts), each row's line, and the error a run with failures ends on."""

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.errors import (
    Conflict,
    DatabaseBusy,
    DatabaseUnavailable,
    DispatchError,
    InvalidInput,
    JenkinsAuthRejected,
    JenkinsUnavailable,
    NotFound,
    SchemaMissing,
)
from jenkins_dispatch.operating import bulk, transitions
from jenkins_dispatch.store.filters import like_contains

# --------------------------------------------------------------------------- pure parts


def outcome(kind, job_id=1):
    return bulk.Outcome(id=job_id, outcome=kind, status="pending" if kind == "done" else None, message="m")


@pytest.mark.parametrize("action, ids, filters, error", [
    ("retry", [], bulk.Filters(status="failed"), None),
    ("retry", [], bulk.Filters(job_name="deploy"), None),
    ("retry", [], bulk.Filters(since=datetime(2026, 1, 1, tzinfo=UTC)), None),
    ("retry", [], bulk.Filters(error_like="timeout"), None),
    ("retry", [], bulk.Filters(parameters={"VERSION": "v1"}), None),
    ("cancel", [5], bulk.Filters(parameters={"VERSION": "v1"}), "job ids or filters, not both"),
    ("cancel", [], bulk.Filters(status="processing", job_name="deploy"), None),
    ("retry", [5], bulk.Filters(), None),
    ("cancel", [5, 6], bulk.Filters(), None),
    ("retry", [], bulk.Filters(), "name job ids or select jobs with --status, --job, --controller, --since, --error-like or --param"),
    ("cancel", [], bulk.Filters(), "name job ids or select jobs with"),
    ("retry", [5], bulk.Filters(status="failed"), "job ids or filters, not both"),
    ("cancel", [5], bulk.Filters(job_name="deploy"), "job ids or filters, not both"),
    ("cancel", [], bulk.Filters(status="completed"), "completed jobs are final and cannot be cancelled"),
    ("cancel", [], bulk.Filters(status="cancelled"), "--status takes pending or processing"),
    ("retry", [], bulk.Filters(status="pending"), "pending jobs have not finished: --status takes completed, failed "
                                                  "or cancelled"),
    ("retry", [], bulk.Filters(status="processing"), "processing jobs have not finished"),
    ("retry", [], bulk.Filters(error_like=""), "--error-like needs some text"),
])
def test_which_requests_are_refused(action, ids, filters, error):
    if error is None:
        bulk.check_request(action, ids, filters)
    else:
        with pytest.raises(InvalidInput) as refused:
            bulk.check_request(action, ids, filters)
        assert error in str(refused.value)


@pytest.mark.parametrize("text, pattern", [
    ("timeout", "%timeout%"),
    ("50%", "%50\\%%"),
    ("a_b", "%a\\_b%"),
    ("C:\\temp", "%C:\\\\temp%"),
    ("%_\\", "%\\%\\_\\\\%"),
])
def test_error_text_is_matched_literally(text, pattern):
    assert like_contains(text) == pattern


@pytest.mark.parametrize("action, ids, total, limit, line", [
    ("retry", [], 0, 1000, "no jobs match"),
    ("retry", [4], 1, 1000, "1 job matches (id 4); run again with --yes to retry it"),
    ("cancel", [4, 7, 9], 3, 1000, "3 jobs match (ids 4, 7, 9); run again with --yes to cancel them"),
    ("retry", list(range(1, 13)), 12, 1000,
     "12 jobs match (ids 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more); run again with --yes to retry them"),
    ("cancel", [1, 2], 5, 2,
     "5 jobs match; --limit 2 keeps the first 2 (ids 1, 2); run again with --yes to cancel those"),
])
def test_what_a_dry_run_says(action, ids, total, limit, line):
    assert bulk.match_line(action, ids, total, limit) == line


@pytest.mark.parametrize("action, kinds, total, line", [
    ("retry", ["done", "done"], 2, "retried 2 of 2 jobs"),
    ("cancel", ["done", "skipped"], 2, "cancelled 1 of 2 jobs; 1 skipped (it changed meanwhile or could not be "
                                       "cancelled)"),
    ("retry", ["done"], 3, "retried 1 of 1 job; 2 more match: run again for them"),
    ("cancel", ["failed", "not_attempted", "not_attempted"], 3,
     "cancelled 0 of 3 jobs; 1 failed; stopped after a failure: 2 not attempted"),
    ("retry", ["done", "failed", "skipped"], 3,
     "retried 1 of 3 jobs; 1 skipped (it changed meanwhile or could not be retried); 1 failed"),
])
def test_what_a_bulk_run_reports(action, kinds, total, line):
    assert bulk.summary_line(action, [outcome(k, i) for i, k in enumerate(kinds)], total) == line


def test_what_a_bulk_run_reports_to_scripts():
    outcomes = [bulk.Outcome(4, "done", "cancelled", "job 4 cancelled"), bulk.Outcome(5, "skipped", None, "gone")]
    assert bulk.report("cancel", outcomes, 7) == {
        "action": "cancel", "dry_run": False, "matched": 7, "done": 1, "skipped": 1, "failed": 0, "not_attempted": 0,
        "jobs": [{"id": 4, "outcome": "done", "status": "cancelled", "message": "job 4 cancelled"},
                 {"id": 5, "outcome": "skipped", "status": None, "message": "gone"}]}


@pytest.mark.parametrize("kind, line", [
    ("done", "job 4 is pending again"),
    ("skipped", "skipped: job 4 is pending again"),
    ("failed", "failed: job 4 is pending again"),
    ("not_attempted", None),
])
def test_the_line_each_row_prints(kind, line):
    assert bulk.progress_line(bulk.Outcome(4, kind, None, "job 4 is pending again")) == line


def test_the_error_a_run_with_failures_ends_on():
    outcomes = [outcome("done", 1), bulk.Outcome(2, "failed", None, "Jenkins is down"), outcome("not_attempted", 3)]
    assert bulk.failure_line("cancel", outcomes) == "1 of 3 jobs could not be cancelled; first: Jenkins is down"
    assert bulk.failure_line("retry", [outcome("done"), outcome("skipped")]) is None


@pytest.mark.parametrize("error, kind, stop", [
    (Conflict("job 3 is now cancelled"), "skipped", bulk.ROW),
    (NotFound("no job with id 3"), "skipped", bulk.ROW),
    (DispatchError("cannot cancel job 3 in Jenkins: refused"), "failed", bulk.ROW),
    (JenkinsUnavailable("Jenkins is down"), "failed", bulk.CONTROLLER),
    (JenkinsAuthRejected("401"), "failed", bulk.CONTROLLER),
    (DatabaseUnavailable("gone"), "failed", bulk.EVERY_ROW),
    (DatabaseBusy("lock timeout"), "failed", bulk.EVERY_ROW),
    (SchemaMissing("migrate"), "failed", bulk.EVERY_ROW),
])
def test_how_an_error_on_one_row_counts(error, kind, stop):
    assert bulk.error_outcome(error) == (kind, stop)


@pytest.mark.parametrize("action, status, expected", [
    ("cancel", "pending", transitions.ACT),
    ("cancel", "processing", transitions.ACT),
    ("cancel", "cancelled", transitions.ALREADY),
    ("cancel", "completed", transitions.IMPOSSIBLE),
    ("cancel", "failed", transitions.IMPOSSIBLE),
    ("retry", "completed", transitions.ACT),
    ("retry", "failed", transitions.ACT),
    ("retry", "cancelled", transitions.ACT),
    ("retry", "pending", transitions.ALREADY),
    ("retry", "processing", transitions.IMPOSSIBLE),
])
def test_what_a_request_for_one_job_comes_to(action, status, expected):
    assert transitions.verdict(action, status) == expected


def _targets(*pairs: tuple[str, str]) -> list[bulk.Target]:
    return [bulk.Target(n, None, controller, job) for n, (job, controller) in enumerate(pairs, 1)]


@pytest.mark.parametrize("targets, several, groups, line", [
    ([], False, [], None),
    (_targets(("deploy", "default"), ("build", "default"), ("deploy", "default")), False,
     [("deploy", "default", 2), ("build", "default", 1)], "by job: deploy ×2, build ×1"),
    # Issue 36: with two controllers, what would change on each.
    (_targets(("deploy", "eu"), ("deploy", "default"), ("deploy", "eu"), ("build", "eu")), True,
     [("deploy", "eu", 2), ("build", "eu", 1), ("deploy", "default", 1)],
     "by job and controller: deploy on eu ×2, build on eu ×1, deploy on default ×1"),
    # Ticked ids carry no job: nothing to break down.
    ([bulk.Target(4), bulk.Target(5)], True, [], None),
])
def test_a_bulk_selection_broken_down_by_job_and_controller(targets, several, groups, line):
    assert bulk.breakdown(targets) == groups
    assert bulk.breakdown_line(groups, several) == line
