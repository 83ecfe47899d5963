"""Issue 12: bulk `retry` and `cancel` by filters (--status, --job, --since, --error-like), on the real database.

Without --yes they say what matches and change nothing; with --yes they act on each row through the
single-job functions and count what was done, skipped (it changed meanwhile) and failed."""

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.operating import bulk
from jenkins_dispatch.store.queue import FINAL_STATUSES

from ..cli_helpers import exit_code
from ..dispatch_helpers import dispatch_settings, wait_for
from .test_cli import run
from .test_operator import use_jenkins

pytestmark = pytest.mark.both_engines

# --------------------------------------------------------------------------- pure parts


# --------------------------------------------------------------------------- against the database


def put(queue, db, job, status, error=None, hours_ago=0.0):
    """A row of job `job` in `status` (final rows finished `hours_ago`), with `error` as last_error."""
    job_id = queue.enqueue(job).id
    at = datetime.now(UTC) - timedelta(hours=hours_ago)  # times as parameters: the same SQL on every dialect
    db.run("UPDATE jenkins_jobs_queue SET status = :status, last_error = :error, finished_at = :finished_at, "
           "updated_at = :at WHERE id = :id",
           id=job_id, status=status, error=error, at=at, finished_at=at if status in FINAL_STATUSES else None)
    return job_id


def snapshot(db):
    return (db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id"), db.run("SELECT * FROM jenkins_job_events ORDER BY id"))


@pytest.fixture
def finished(queue, db):
    """Final rows (and one pending) to select among."""
    return dict(
        timeout=put(queue, db, "deploy", "failed", "Jenkins timeout after 10 s"),
        missing=put(queue, db, "build", "failed", "HTTP 404: no such job"),
        old=put(queue, db, "deploy", "completed", None, hours_ago=3),
        cancelled=put(queue, db, "deploy", "cancelled", "cancelled by operator"),
        pending=put(queue, db, "deploy", "pending"),
        literal=put(queue, db, "deploy", "failed", "50% done_x"),
    )


def matched_ids(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["dry_run"] is True
    return report["ids"]


@pytest.mark.parametrize("filters, expected", [
    (["--status", "failed"], ["timeout", "missing", "literal"]),
    (["--job", "deploy"], ["timeout", "old", "cancelled", "literal"]),
    (["--since", "1h"], ["timeout", "missing", "cancelled", "literal"]),
    (["--error-like", "TIMEOUT"], ["timeout"]),
    (["--error-like", "%"], ["literal"]),
    (["--error-like", "_"], ["literal"]),
    (["--error-like", "0% DONE_X"], ["literal"]),
    (["--job", "deploy", "--status", "failed", "--since", "1h"], ["timeout", "literal"]),
    (["--job", "deploy", "--error-like", "by OPERATOR"], ["cancelled"]),
    (["--job", "nothing-by-this-name"], []),
])
def test_retry_filters_select_the_right_rows(capsys, finished, filters, expected):
    assert matched_ids(capsys, "retry", *filters) == sorted(finished[name] for name in expected)


def test_since_takes_an_iso_time(capsys, finished):
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    assert matched_ids(capsys, "retry", "--since", two_hours_ago) == sorted(
        finished[n] for n in ("timeout", "missing", "cancelled", "literal"))


def test_cancel_filters_select_unfinished_rows_only(capsys, queue, db):
    deploy = put(queue, db, "deploy", "pending")
    put(queue, db, "deploy", "failed", "boom")
    build = put(queue, db, "build", "pending")
    [claimed] = queue.claim_batch(1)
    assert claimed.id == deploy
    waiting = put(queue, db, "deploy", "pending", "HTTP 503: retrying")
    assert matched_ids(capsys, "cancel", "--job", "deploy") == [deploy, waiting]
    assert matched_ids(capsys, "cancel", "--status", "pending") == [build, waiting]
    assert matched_ids(capsys, "cancel", "--status", "processing") == [deploy]
    assert matched_ids(capsys, "cancel", "--error-like", "503") == [waiting]


def test_without_yes_nothing_changes_and_the_match_is_told(capsys, db, finished):
    before = snapshot(db)
    code, out, err = run(capsys, "retry", "--status", "failed")
    assert (code, err) == (0, "")
    ids = ", ".join(str(finished[n]) for n in ("timeout", "missing", "literal"))
    assert out == f"3 jobs match (ids {ids}); run again with --yes to retry them\nby job: deploy ×2, build ×1\n"
    code, out, _ = run(capsys, "cancel", "--job", "deploy")
    assert code == 0 and out == (f"1 job matches (id {finished['pending']}); run again with --yes to cancel it\n"
                                 "by job: deploy ×1\n")
    assert snapshot(db) == before


def test_a_filter_matching_nothing_says_so(capsys, db, finished):
    before = snapshot(db)
    code, out, _ = run(capsys, "retry", "--job", "nothing", "--yes")
    assert (code, out) == (0, "no jobs match\n")
    code, out, _ = run(capsys, "retry", "--job", "nothing", "--yes", "--json")
    assert code == 0 and json.loads(out)["matched"] == 0
    assert snapshot(db) == before


def test_retry_with_yes_acts_and_the_history_says_operator(capsys, queue, finished):
    code, out, err = run(capsys, "retry", "--status", "failed", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    chosen = sorted(finished[n] for n in ("timeout", "missing", "literal"))
    assert (report["dry_run"], report["matched"], report["done"], report["skipped"], report["failed"]) == (
        False, 3, 3, 0, 0)
    assert [(j["id"], j["outcome"], j["status"]) for j in report["jobs"]] == [(i, "done", "pending") for i in chosen]
    for job_id in chosen:
        assert queue.get(job_id)["status"] == "pending"
        last = queue.events(job_id)[-1]
        assert (last["event"], last["from_status"], last["to_status"], last["actor"]) == (
            "retried", "failed", "pending", "operator")
    assert queue.get(finished["cancelled"])["status"] == "cancelled"
    assert queue.get(finished["old"])["status"] == "completed"


def test_retry_with_yes_as_text(capsys, queue, finished):
    code, out, _ = run(capsys, "retry", "--error-like", "timeout", "--yes")
    assert code == 0
    assert out.splitlines() == [f"job {finished['timeout']} is pending again", "retried 1 of 1 job"]


def test_cancel_with_yes_cancels_pending_rows(capsys, queue, db):
    first, second = put(queue, db, "deploy", "pending"), put(queue, db, "deploy", "pending")
    other = put(queue, db, "build", "pending")
    code, out, err = run(capsys, "cancel", "--job", "deploy", "--reason", "release frozen", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(j["id"], j["status"]) for j in report["jobs"]] == [(first, "cancelled"), (second, "cancelled")]
    for job_id in (first, second):
        row = queue.get(job_id)
        assert (row["status"], row["last_error"]) == ("cancelled", "release frozen")
        assert queue.events(job_id)[-1]["actor"] == "operator"
    assert queue.get(other)["status"] == "pending"


def test_the_limit_bounds_a_bulk_run_and_says_how_many_more_match(capsys, queue, db):
    ids = [put(queue, db, "deploy", "failed", "boom") for _ in range(5)]
    code, out, _ = run(capsys, "retry", "--job", "deploy", "--limit", "2")
    assert code == 0 and out.startswith("5 jobs match; --limit 2 keeps the first 2")
    code, out, _ = run(capsys, "retry", "--job", "deploy", "--limit", "2", "--yes")
    assert code == 0 and out.splitlines()[-1] == "retried 2 of 2 jobs; 3 more match: run again for them"
    assert [queue.get(i)["status"] for i in ids] == ["pending", "pending", "failed", "failed", "failed"]


def test_several_ids_act_without_yes_and_count_what_could_not(capsys, queue, db):
    failed, done, pending = (put(queue, db, "deploy", "failed", "x"), put(queue, db, "deploy", "completed"),
                             put(queue, db, "deploy", "pending"))
    code, out, err = run(capsys, "retry", str(failed), str(done), str(pending), "424242", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(j["id"], j["outcome"]) for j in report["jobs"]] == [
        (failed, "done"), (done, "done"), (pending, "skipped"), (424242, "skipped")]
    assert report["jobs"][2]["message"] == f"job {pending} is already pending; nothing changed"
    assert "no job with id 424242" in report["jobs"][3]["message"]
    assert queue.get(failed)["status"] == queue.get(done)["status"] == "pending"


def test_one_id_works_as_before(capsys, queue, db):
    job_id = put(queue, db, "deploy", "failed", "x")
    code, out, _ = run(capsys, "retry", str(job_id))
    assert (code, out) == (0, f"job {job_id} is pending again\n")
    code, out, _ = run(capsys, "cancel", str(job_id), "--json")
    assert code == 0 and json.loads(out) == {"id": job_id, "status": "cancelled", "changed": True,
                                             "message": f"job {job_id} cancelled (it was pending)"}


@pytest.mark.parametrize("argv, message", [
    (["retry"], "name job ids or select jobs with"),
    (["cancel", "--yes"], "name job ids or select jobs with"),
    (["retry", "1", "--status", "failed"], "job ids or filters, not both"),
    (["cancel", "--status", "completed", "--yes"], "completed jobs are final and cannot be cancelled"),
    (["retry", "--status", "pending", "--yes"], "pending jobs have not finished"),
    (["retry", "--error-like", "", "--yes"], "--error-like needs some text"),
    (["retry", "--status", "done"], "invalid choice"),
    (["retry", "--job", "deploy", "--limit", "0"], "argument --limit: expected a whole number from 1 to"),
    (["cancel", "--since", "yesterday-ish"], "bad time"),
])
def test_bad_bulk_requests_exit_2_in_one_line_and_change_nothing(capsys, db, finished, argv, message):
    before = snapshot(db)
    assert exit_code(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert err.startswith("jenkins-dispatch")
    assert snapshot(db) == before


def test_json_before_the_command_in_a_subprocess(database_url, finished):
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "--json", "retry", "--status", "failed"],
                          env=dict(os.environ, DATABASE_URL=database_url), capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    report = json.loads(proc.stdout)
    assert report["dry_run"] is True and report["matched"] == 3


def test_rows_that_changed_after_the_selection_are_skipped(queue, db, finished):
    """The selection is one statement; each row is acted on later, fenced: rows that moved are counted."""
    targets = bulk.select_targets(queue, "retry", bulk.Filters(status="failed"), limit=100)
    assert [t.id for t in targets.rows] == sorted(finished[n] for n in ("timeout", "missing", "literal"))
    queue.retry_final(finished["timeout"])  # retried by someone else: pending now
    queue.retry_final(finished["missing"])  # retried, claimed and failed again: final, but not the row we saw
    db.run("UPDATE jenkins_jobs_queue SET status = 'failed', finished_at = now(), updated_at = now() "
           "WHERE id = :id", id=finished["missing"])
    outcomes = bulk.act(queue, dispatch_settings("http://127.0.0.1:9/"), "retry", targets.rows)
    assert [(o.id, o.outcome) for o in outcomes] == [
        (finished["timeout"], "skipped"), (finished["missing"], "skipped"), (finished["literal"], "done")]
    assert "changed since it was selected" in outcomes[1].message
    assert [e["event"] for e in queue.events(finished["missing"])].count("retried") == 1


def test_pending_rows_cancelled_meanwhile_are_skipped(queue, db):
    first, second = put(queue, db, "deploy", "pending"), put(queue, db, "deploy", "pending")
    targets = bulk.select_targets(queue, "cancel", bulk.Filters(job_name="deploy"), limit=100)
    queue.cancel_pending(first, "someone else")
    outcomes = bulk.act(queue, dispatch_settings("http://127.0.0.1:9/"), "cancel", targets.rows, reason="bulk")
    assert [(o.id, o.outcome, o.status) for o in outcomes] == [(first, "skipped", None), (second, "done", "cancelled")]
    assert queue.get(first)["last_error"] == "someone else"


def test_a_jenkins_wide_failure_stops_the_run_and_exits_1(capsys, queue, jenkins, monkeypatch):
    use_jenkins(monkeypatch, jenkins)
    ids = [queue.enqueue("waiting").id for _ in range(3)]  # 30 s quiet period: they stay queued in Jenkins
    run_pass(dispatch_settings(jenkins.base_url))
    capsys.readouterr()  # the pass's own log lines
    monkeypatch.setenv("JENKINS_API_TOKEN", "wrong")
    code, out, err = run(capsys, "cancel", "--status", "processing", "--yes", "--json")
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("jenkins-dispatch: error: ") and "wrong" not in err, err
    report = json.loads(out)
    assert [j["outcome"] for j in report["jobs"]] == ["failed", "not_attempted", "not_attempted"]
    assert [queue.get(i)["status"] for i in ids] == ["processing"] * 3


def test_bulk_cancel_of_processing_rows_goes_through_jenkins(capsys, queue, jenkins, monkeypatch):
    use_jenkins(monkeypatch, jenkins)
    running = [queue.enqueue("deploy", {"EMULATOR_DURATION": "30"}).id for _ in range(2)]
    later = queue.enqueue("deploy", scheduled_at=datetime.now(UTC) + timedelta(hours=1)).id
    run_pass(dispatch_settings(jenkins.base_url))
    assert wait_for(lambda: jenkins.builds("deploy"))  # the job runs one build at a time: the other waits queued
    code, out, err = run(capsys, "cancel", "--job", "deploy", "--status", "processing", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(j["id"], j["status"]) for j in report["jobs"]] == [(i, "cancelled") for i in running]
    # Triggered in parallel, either row may hold build #1; the other was queued behind it and, once that
    # stopped, may have started: stopped or dequeued.
    messages = sorted((j["message"] for j in report["jobs"]), key=lambda m: "stop build #1" not in m)
    assert "stop build #1" in messages[0], messages
    assert re.search(r"stop build #2|cancelled Jenkins queue item \d+", messages[1]), messages
    assert wait_for(lambda: {b.result for b in jenkins.builds("deploy")} == {"ABORTED"})
    assert queue.get(later)["status"] == "pending"
    for job_id in running:
        last = queue.events(job_id)[-1]
        assert (last["to_status"], last["actor"]) == ("cancelled", "operator")
