"""The dispatcher against the real database and the Jenkins emulator over real HTTP."""

import io
import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from functions.dispatcher.app import max_jobs_from_event
from jenkins_dispatch import runtime
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.observability import logger

from ..dispatch_helpers import dispatch_settings, expire_leases, wait_for
from ..engines import ago

pytestmark = pytest.mark.both_engines

EVENTS = Path(__file__).resolve().parents[2] / "events"


def statuses(queue):
    return {r["id"]: r["status"] for r in queue.list_jobs(limit=10_000)}


def test_a_pass_triggers_every_due_job_once_and_records_the_queue_item(jenkins, queue, database_url):
    ids = [queue.enqueue("deploy" if i % 2 else "team/app/deploy", {"ENV": f"e{i}"}).id for i in range(25)]
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert (summary["claimed"], summary["triggered"], summary["failed"]) == (25, 25, 0)
    assert summary["stopped_because"] == "queue empty"
    for job_id in ids:
        row = queue.get(job_id)
        assert row["status"] == "processing" and row["jenkins_queue_id"] is not None
        assert jenkins.triggers_for(row["dispatch_id"]) == 1
    # Happy path cost: one claim per batch and one record per batch, plus a few per pass.
    assert summary["db_statements"] <= 1.2 * 25


def test_parameters_are_sent_as_jenkins_form_fields(jenkins, queue):
    queue.enqueue("deploy", {"ENV": "prod", "FLAG": True, "COUNT": 3, "PAYLOAD": {"a": [1, 2]}})
    # A lease long enough that a slow machine's pass still sends it (a 3 s one may end before the trigger goes).
    run_pass(dispatch_settings(jenkins.base_url, LEASE_SECONDS="30"))
    assert jenkins.wait_until(lambda: jenkins.builds("deploy"))
    [build] = jenkins.builds("deploy")
    params = dict(build.parameter_values()) if hasattr(build, "parameter_values") else None
    counters = jenkins.counters()["triggers_by_parameter"]
    assert counters["ENV"] == {"prod": 1}
    assert counters["FLAG"] == {"true": 1}
    assert counters["COUNT"] == {"3": 1}
    assert json.loads(next(iter(counters["PAYLOAD"]))) == {"a": [1, 2]}
    assert params is None or params


def test_job_errors_fail_or_retry_that_row_and_the_rest_is_triggered(jenkins, queue, db):
    unknown = queue.enqueue("no/such/job").id
    undeclared = queue.enqueue("no-dispatch-id").id
    disabled = queue.enqueue("frozen", max_attempts=2).id
    good = queue.enqueue("deploy").id
    settings = dispatch_settings(jenkins.base_url, RETRY_BASE_SECONDS="600", RETRY_MAX_SECONDS="600")
    summary = run_pass(settings)
    assert summary["triggered"] == 1 and summary["failed"] == 2 and summary["retried_later"] == 1
    assert queue.get(good)["status"] == "processing"
    row = queue.get(unknown)
    assert row["status"] == "failed" and "no job 'no/such/job'" in row["last_error"]
    row = queue.get(undeclared)
    assert row["status"] == "failed" and "add a String parameter named DISPATCH_ID" in row["last_error"]
    row = queue.get(disabled)
    assert row["status"] == "pending" and "disabled" in row["last_error"]
    scheduled_at = db.run("SELECT scheduled_at FROM jenkins_jobs_queue WHERE id = :id", id=disabled)[0]["scheduled_at"]
    delay = (scheduled_at - datetime.now(UTC)).total_seconds()
    assert 290 < delay <= 600  # exponential backoff with jitter: 50-100 % of the base for attempt 1
    db.run("UPDATE jenkins_jobs_queue SET scheduled_at = now() WHERE id = :id", id=disabled)
    run_pass(settings)  # the second and last attempt
    assert queue.get(disabled)["status"] == "failed"
    assert "gave up after 2 attempts" in queue.get(disabled)["last_error"]


def test_jenkins_down_releases_everything_without_spending_attempts(queue):
    for _ in range(5):
        queue.enqueue("deploy")
    summary = run_pass(dispatch_settings("http://127.0.0.1:9/"))
    assert summary["triggered"] == 0 and summary["released"] == 5
    assert summary["stopped_because"].startswith("Jenkins unavailable")
    assert all(r["status"] == "pending" and r["attempts"] == 0 for r in queue.list_jobs())


def test_jenkins_restarting_mid_batch_releases_the_unsent_rows(jenkins, queue):
    for _ in range(10):
        queue.enqueue("deploy")
    jenkins.add_fault(path="buildWithParameters$", status=503)
    summary = run_pass(dispatch_settings(jenkins.base_url, MAX_PARALLEL_TRIGGERS="1", LEASE_SECONDS="30"))
    assert summary["released"] == 10 and summary["triggered"] == 0
    assert "503" in summary["stopped_because"] or "restarting" in summary["stopped_because"].lower()
    assert all(r["attempts"] == 0 for r in queue.list_jobs())


def test_auth_rejected_stops_the_pass_and_says_to_check_the_token(jenkins, queue):
    queue.enqueue("deploy")
    summary = run_pass(dispatch_settings(jenkins.base_url, JENKINS_API_TOKEN="wrong-token-value"))
    assert summary["released"] == 1
    assert "JENKINS_API_TOKEN" in summary["stopped_because"]
    assert "wrong-token-value" not in json.dumps(summary)
    assert queue.list_jobs()[0]["attempts"] == 0


def test_time_nearly_up_stops_cleanly_and_releases_what_was_not_sent(jenkins, queue):
    for _ in range(10):
        queue.enqueue("deploy")
    budget = iter([60_000, 60_000] + [10] * 1000)  # enough to reconcile and claim, then time runs out
    summary = run_pass(dispatch_settings(jenkins.base_url, TIME_MARGIN_SECONDS="5"),
                       remaining_ms=lambda: next(budget))
    assert summary["claimed"] > 0 and summary["released"] == summary["claimed"]
    assert summary["stopped_because"] == "time nearly up"
    assert jenkins.counters()["trigger_requests"] == 0
    assert all(r["status"] == "pending" and r["attempts"] == 0 for r in queue.list_jobs())


def test_max_jobs_budget(jenkins, queue):
    for _ in range(7):
        queue.enqueue("deploy")
    summary = run_pass(dispatch_settings(jenkins.base_url, BATCH_SIZE="3"), max_jobs=5)
    assert summary["triggered"] == 5 and summary["stopped_because"] == "max_jobs reached"


def test_lost_answer_is_adopted_not_resent(jenkins, queue, db):
    """Jenkins queued the build but the answer never came: after the lease, find it by DISPATCH_ID."""
    job_id = queue.enqueue("deploy").id
    jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=1)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["outcome_unknown"] == 1 and summary["triggered"] == 0
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["jenkins_queue_id"] is None
    assert run_pass(dispatch_settings(jenkins.base_url))["reconciled"]["checked"] == 0  # lease still running
    expire_leases(db)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["reconciled"]["adopted"] == 1 and summary["reconciled"]["requeued"] == 0
    assert jenkins.triggers_for(row["dispatch_id"]) == 1
    assert [e["event"] for e in queue.events(job_id)][-1] in ("adopted", "settled")


def test_trigger_lost_before_jenkins_acted_is_resent_with_the_same_dispatch_id(jenkins, queue, db):
    job_id = queue.enqueue("deploy").id
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=1.5, status=500, times=1)  # times out first
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["attempts"] == 1
    expire_leases(db)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["reconciled"]["requeued"] == 1
    again = queue.get(job_id)
    # Same DISPATCH_ID; no attempt spent (Jenkins never saw the first), one re-send counted.
    assert again["dispatch_id"] == row["dispatch_id"] and (again["attempts"], again["resends"]) == (1, 1)
    assert again["jenkins_queue_id"] is not None
    assert jenkins.triggers_for(row["dispatch_id"]) == 1
    events = [e["event"] for e in queue.events(job_id)]
    assert events == ["enqueued", "claimed", "resent", "triggered"]


def test_reconciler_settles_a_job_whose_notifications_never_came(jenkins, queue, db):
    ok = queue.enqueue("deploy").id
    bad = queue.enqueue("deploy", {"EMULATOR_RESULT": "FAILURE"}).id
    run_pass(dispatch_settings(jenkins.base_url))
    assert jenkins.wait_idle()
    expire_leases(db)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["reconciled"]["settled"] == 2
    ok_row, bad_row = queue.get(ok), queue.get(bad)
    assert (ok_row["status"], ok_row["jenkins_result"]) == ("completed", "SUCCESS")
    assert ok_row["build_number"] is not None and ok_row["build_url"].endswith(f"/{ok_row['build_number']}/")
    assert (bad_row["status"], bad_row["jenkins_result"]) == ("failed", "FAILURE")
    assert "FAILURE" in bad_row["last_error"]


def test_still_running_builds_only_renew_the_lease(jenkins, queue, db):
    job_id = queue.enqueue("deploy", {"EMULATOR_DURATION": "30"}).id
    run_pass(dispatch_settings(jenkins.base_url))
    assert wait_for(lambda: jenkins.builds("deploy"))
    expire_leases(db)
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["reconciled"]["waiting"] == 1 and summary["reconciled"]["settled"] == 0
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["build_number"] == 1 and row["started_at"] is not None


def test_a_send_jenkins_never_saw_spends_no_attempt_even_with_max_attempts_1(jenkins, queue, db):
    """Issue 11 #10: a dispatcher dies between claim and trigger (here: the request never reaches Jenkins);
    the reconciler finds nothing. It used to fail the row "gave up after 1 attempts"."""
    job_id = queue.enqueue("deploy", max_attempts=1).id
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=1.5, status=500, times=1)
    run_pass(dispatch_settings(jenkins.base_url))
    expire_leases(db)
    run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(job_id)
    assert row["status"] == "processing" and (row["attempts"], row["resends"]) == (1, 1)
    assert jenkins.triggers_for(row["dispatch_id"]) == 1


def test_re_sends_jenkins_never_shows_are_bounded(jenkins, queue, db):
    job_id = queue.enqueue("deploy").id
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=1.5, status=500)  # every request is lost
    settings = dispatch_settings(jenkins.base_url, MAX_RESENDS="2")
    run_pass(settings)
    for _ in range(3):
        expire_leases(db)
        run_pass(settings)
    row = queue.get(job_id)
    assert row["status"] == "failed" and "sent 3 times" in row["last_error"] and row["attempts"] == 1
    assert jenkins.counters()["items_created"] == 0


@pytest.mark.parametrize("event, expected", [({}, None), ({"max_jobs": 4}, 4),
                                             ({"source": "aws.scheduler", "schedule_arn": "x"}, None)])
def test_max_jobs_from_event(event, expected):
    assert max_jobs_from_event(event) == expected


@pytest.mark.parametrize("bad", [0, -1, "5", True, 2.5])
def test_bad_max_jobs_is_a_clear_error(bad):
    with pytest.raises(InvalidInput, match="max_jobs"):
        max_jobs_from_event({"max_jobs": bad})


class LambdaContext:
    """Like Lambda's: the time left counts down from the function's timeout."""

    function_name = "jenkins-dispatch-dispatcher"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-dispatcher"
    aws_request_id = "req-1"

    def __init__(self, seconds: float = 12.0):
        self.ends_at = time.monotonic() + seconds

    def get_remaining_time_in_millis(self):
        return max(0, int((self.ends_at - time.monotonic()) * 1000))


@pytest.mark.parametrize("name", sorted(p.name for p in EVENTS.glob("dispatcher-*.json")))
def test_handler_accepts_every_dispatcher_event(name, jenkins, queue, monkeypatch, capsys):
    from functions.dispatcher.app import lambda_handler

    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1",
                       # One pass, with room: a 12 s invocation keeps 11 s in reserve (TIME_MARGIN_SECONDS +
                       # the timeout), and a loaded machine spent its one second before the first trigger.
                       # The continuous mode has its own tests (test_wakeup).
                       "DISPATCHER_MODE": "single",
                       "AWS_LAMBDA_FUNCTION_NAME": "jd-dispatcher"}.items():
        monkeypatch.setenv(key, value)
    runtime.reset()
    for _ in range(6):
        queue.enqueue("deploy")
    event = json.loads((EVENTS / name).read_text())
    log_stream = io.StringIO()
    previous = logger.registered_handler.setStream(log_stream)
    try:
        summary = lambda_handler(event, LambdaContext(seconds=30))
    finally:
        logger.registered_handler.setStream(previous)
        runtime.reset()
    expected = event.get("max_jobs") or 6
    assert summary["triggered"] == min(6, expected)
    out = capsys.readouterr().out
    assert '"Triggered"' in out  # the EMF metrics line was flushed (in Lambda; outside only when asked)
    # Every log line names the event that woke the function (a manual invoke has no id) and the invocation.
    logged = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert logged and {entry.get("correlation_id") for entry in logged} == {event.get("id") or event.get("execution_id")}
    assert {entry.get("function_request_id") for entry in logged} == {LambdaContext.aws_request_id}


def test_the_handler_with_an_event_claims_in_fair_share_order_under_a_key_cap(jenkins, queue, db, monkeypatch):
    """The dispatcher Lambda as events/dispatcher-max-jobs.json invokes it ({"max_jobs": 5}): team-a's eight rows
    came first, team-b's one row after them, three rows share a concurrency key capped at 1. The pass's five are
    taken in turn across the teams, and one row of the key."""
    from functions.dispatcher.app import lambda_handler

    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1", "DISPATCHER_MODE": "single",
                       "AWS_LAMBDA_FUNCTION_NAME": "jd-dispatcher"}.items():
        monkeypatch.setenv(key, value)
    runtime.reset()
    queue.set_key_limit("env:prod", 1)
    team_a = [queue.enqueue("deploy", fairness_key="team-a",
                            concurrency_key="env:prod" if n < 3 else None).id for n in range(8)]
    [team_b] = [queue.enqueue("deploy", fairness_key="team-b").id]
    try:
        summary = lambda_handler(json.loads((EVENTS / "dispatcher-max-jobs.json").read_text()),
                                 LambdaContext(seconds=30))
    finally:
        runtime.reset()
    started = {i for i in [*team_a, team_b] if queue.get(i)["status"] != "pending"}
    assert summary["triggered"] == 5 and team_b in started, (summary, started)
    assert len(started & set(team_a[:3])) == 1  # the key's cap
    for job_id in started:
        assert jenkins.triggers_for(queue.get(job_id)["dispatch_id"]) == 1


def test_a_row_left_processing_by_the_old_dispatcher_is_failed_not_run_again(jenkins, queue, db):
    """The migration gives such rows a legacy dispatch id and no attempts left (see 0001_queue.sql)."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name, status, dispatch_id, lease_expires_at, attempts) "
           "VALUES ('deploy', 'processing', 'legacy-1', now(), 3)")
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["reconciled"]["settled"] == 1 and summary["triggered"] == 0
    row = queue.get(1)
    assert row["status"] == "failed" and "before jenkins-dispatch" in row["last_error"]
    assert jenkins.counters()["trigger_requests"] == 0


def test_cli_dispatch_prints_only_the_summary_on_stdout(jenkins, queue, monkeypatch, capsys):
    from jenkins_dispatch.cli import main

    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1"}.items():
        monkeypatch.setenv(key, value)
    queue.enqueue("deploy")
    queue.enqueue("no/such/job")
    assert main(["dispatch", "--max-jobs", "5"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["triggered"], summary["failed"]) == (1, 1)
    assert '"message":"triggered"' in err.replace(" ", "")


def test_lambda_defaults_leave_room_to_claim(jenkins, queue):
    """Template defaults: a 50 s function, 10 s Jenkins timeout, 10 s margin, batches of 32 on 8 threads."""
    queue.enqueue("deploy")
    settings = dispatch_settings(jenkins.base_url, JENKINS_TIMEOUT_SECONDS="10", LEASE_SECONDS="300",
                                 BATCH_SIZE="32", MAX_PARALLEL_TRIGGERS="8", TIME_MARGIN_SECONDS="10")
    summary = run_pass(settings, remaining_ms=lambda: 49_900)
    assert summary["triggered"] == 1 and summary["stopped_because"] == "queue empty"


def test_a_job_path_jenkins_cannot_have_fails_that_row_only(jenkins, queue, db):
    db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('a//b'), ('deploy')")
    db.run("INSERT INTO jenkins_jobs_queue (job_name, status, dispatch_id, lease_expires_at, attempts) "
           "VALUES ('/x', 'processing', 'jd-3-0', :expired, 1)", expired=ago(seconds=1))
    summary = run_pass(dispatch_settings(jenkins.base_url))
    assert summary["triggered"] == 1 and summary["failed"] == 2
    assert [queue.get(i)["status"] for i in (1, 2, 3)] == ["failed", "processing", "failed"]
    assert "single '/'" in queue.get(1)["last_error"] and "single '/'" in queue.get(3)["last_error"]


def test_no_trigger_is_sent_after_its_lease_so_a_reconciler_never_sends_it_too(make_jenkins, queue):
    """A slow Jenkins and a big batch: rows the batch cannot send within the lease are released, and a
    second dispatcher reconciling right after the lease finds nothing to send twice. (Enough executors
    that builds start at once: a queued duplicate would merge and hide the problem.)"""
    jenkins = make_jenkins(executors=200)
    jenkins.add_job({"path": "slow", "concurrent": True, "duration_seconds": 60, "notify": False,
                     "parameters": [{"name": "DISPATCH_ID"}]})
    for i in range(96):
        queue.enqueue("slow", {"N": str(i)}, priority=i)  # sent last = taken first by the reconciler
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=0.4)
    settings = dispatch_settings(jenkins.base_url, LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1",
                                 BATCH_SIZE="128", MAX_PARALLEL_TRIGGERS="8")
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("a", run_pass(settings)))
    first.start()
    time.sleep(3.2)
    results["b"] = run_pass(settings)
    first.join()
    per_dispatch = jenkins.counters()["triggers_by_dispatch_id"]
    assert per_dispatch and max(per_dispatch.values()) == 1
    # Every queue item is one a pass sent: answered (triggered) or with its answer lost to the 1 s timeout while
    # Jenkins made the item (outcome unknown: the row keeps its lease, no one sends it again).
    sent = sum(results[p]["triggered"] + results[p]["outcome_unknown"] for p in ("a", "b"))
    assert jenkins.counters()["items_created"] == sent, results


class NoHttp:
    """A Jenkins client that must not be called."""

    def __getattr__(self, name):
        raise AssertionError(f"unexpected Jenkins call: {name}")


def test_batch_size_follows_the_time_and_the_lease_left(db):
    from jenkins_dispatch.dispatching.dispatcher import Dispatcher

    short = Dispatcher(dispatch_settings("http://x/", LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1",
                                         MAX_PARALLEL_TRIGGERS="8"), db, NoHttp())
    assert short._rows_that_fit() == 16  # two waves of 8 end within the 3 s lease
    lambda_like = Dispatcher(dispatch_settings("http://x/", LEASE_SECONDS="300", JENKINS_TIMEOUT_SECONDS="10",
                                               MAX_PARALLEL_TRIGGERS="8", TIME_MARGIN_SECONDS="10"),
                             db, NoHttp(), remaining_ms=lambda: 49_900)
    assert lambda_like._rows_that_fit() == 24  # three 10 s waves before the 10 s margin
    nearly_over = Dispatcher(lambda_like.settings, db, NoHttp(), remaining_ms=lambda: 19_000)
    assert nearly_over._rows_that_fit() == 0


def test_a_trigger_that_could_outlive_its_lease_is_not_sent(db):
    from jenkins_dispatch.dispatching.dispatcher import Dispatcher
    from jenkins_dispatch.store.queue import ClaimedJob

    dispatcher = Dispatcher(dispatch_settings("http://x/", LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1"),
                            db, NoHttp())
    job = ClaimedJob(id=1, job_name="deploy", parameters={}, attempts=1, max_attempts=3, dispatch_id="jd-1-x")
    # 2 s since the claim: a 1 s request could end past the 3 s lease.
    assert dispatcher._send(job, batch_started=time.monotonic() - 2.0) is None
