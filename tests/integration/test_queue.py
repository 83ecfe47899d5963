"""Queue transitions against the real database, on each engine: order, fencing, dedupe, history, constraints."""

import re
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.errors import Conflict, InvalidInput, NotFound
from jenkins_dispatch.jenkins.jobs import JsonNumber
from jenkins_dispatch.store.db import DatabaseError
from jenkins_dispatch.store.queue import Settlement

from ..dispatch_helpers import expire_leases
from ..engines import ago, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines


def claim_all(queue: Queue, n: int = 100):
    return queue.claim_batch(n)


def test_plain_insert_is_a_valid_enqueue(db, queue):
    db.run("""INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('deploy', '{"ENV":"prod"}')""")
    [job] = claim_all(queue)
    assert (job.job_name, job.parameters, job.attempts, job.max_attempts) == ("deploy", {"ENV": "prod"}, 1, 3)
    assert job.dispatch_id.startswith(f"jd-{job.id}-")


def test_claim_order_is_priority_then_scheduled_at_then_id(queue):
    now = datetime.now(UTC)
    low_old = queue.enqueue("a", priority=0, scheduled_at=now - timedelta(minutes=5)).id
    high_new = queue.enqueue("a", priority=9, scheduled_at=now - timedelta(minutes=1)).id
    high_old = queue.enqueue("a", priority=9, scheduled_at=now - timedelta(minutes=2)).id
    low_new_1 = queue.enqueue("a", priority=0, scheduled_at=now - timedelta(minutes=1)).id
    future = queue.enqueue("a", priority=99, scheduled_at=now + timedelta(hours=1)).id
    first = [j.id for j in queue.claim_batch(2)]
    rest = [j.id for j in queue.claim_batch(10)]
    assert first == [high_old, high_new]
    assert rest == [low_old, low_new_1]
    assert future not in first + rest
    assert queue.get(future)["status"] == "pending"


def test_each_claim_gets_a_fresh_dispatch_id_and_a_lease(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    row = queue.get(job.id)
    assert row["status"] == "processing" and row["lease_expires_at"] > datetime.now(UTC)
    queue.release(job.id, job.dispatch_id, "test")
    [again] = queue.claim_batch(1)
    assert again.id == job.id and again.dispatch_id != job.dispatch_id
    assert again.attempts == 1  # the release spent nothing


def test_dedupe_key_returns_the_unfinished_row(queue):
    first = queue.enqueue("deploy", {"v": 1}, dedupe_key="release-42")
    second = queue.enqueue("deploy", {"v": 2}, dedupe_key="release-42")
    assert first.created and not second.created and second.id == first.id
    [job] = queue.claim_batch(5)
    assert queue.enqueue("deploy", dedupe_key="release-42").id == first.id  # processing is unfinished too
    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    third = queue.enqueue("deploy", dedupe_key="release-42")
    assert third.created and third.id != first.id


def test_fencing_a_stale_dispatch_id_changes_nothing(queue):
    queue.enqueue("a")
    [old] = queue.claim_batch(1)
    queue.release(old.id, old.dispatch_id, "test")
    [new] = queue.claim_batch(1)
    before = queue.get(new.id)
    assert not queue.settle(old.id, old.dispatch_id, "failed", error="late")
    assert not queue.release(old.id, old.dispatch_id, "late")
    assert not queue.mark_triggered(old, 7)
    assert not queue.record_progress(old.id, old.dispatch_id, build_number=3, started=True)
    assert queue.retry_later(old.id, old.dispatch_id, 1, "late") is None
    assert queue.get(new.id) == before


def test_a_settled_row_never_changes_again(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    queue.mark_triggered(job, 11)
    assert queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS", build_number=4)
    final = queue.get(job.id)
    assert not queue.settle(job.id, job.dispatch_id, "failed", result="FAILURE")
    assert not queue.record_progress(job.id, job.dispatch_id, build_number=5, started=True)
    assert not queue.release(job.id, job.dispatch_id, "late")
    assert queue.retry_later(job.id, job.dispatch_id, 0, "x") is None
    assert not queue.cancel_pending(job.id)
    assert queue.claim_batch(10) == []
    assert queue.get(job.id) == final  # updated_at included
    assert (final["status"], final["jenkins_result"], final["build_number"], final["dispatch_id"]) == (
        "completed", "SUCCESS", 4, job.dispatch_id)


def test_retry_later_backs_off_then_fails_when_attempts_are_spent(queue):
    queue.enqueue("a", max_attempts=2)
    [job] = queue.claim_batch(1)
    assert queue.retry_later(job.id, job.dispatch_id, 3600, "Jenkins job is disabled") == "pending"
    assert queue.claim_batch(1) == []  # not before its backoff
    queue.db.run("UPDATE jenkins_jobs_queue SET scheduled_at = now() WHERE id = :id", id=job.id)
    [second] = queue.claim_batch(1)
    assert second.attempts == 2
    assert queue.retry_later(second.id, second.dispatch_id, 1, "Jenkins job is disabled") == "failed"
    row = queue.get(job.id)
    assert row["status"] == "failed" and row["finished_at"] is not None
    assert "gave up after 2 attempts" in row["last_error"]


def test_release_refuses_a_row_whose_lease_ran_out(queue, db):
    """A reconciler may own it by now and be sending it again under the same dispatch_id."""
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    expire_leases(db)
    assert not queue.release(job.id, job.dispatch_id, "shutdown")
    assert queue.retry_later(job.id, job.dispatch_id, 1, "disabled") is None
    assert queue.get(job.id)["status"] == "processing"


def test_uncapped_claims_leave_capped_jobs_alone(queue):
    """A cap set while a dispatcher's pass runs without caps must still hold."""
    queue.enqueue("capped")
    free = queue.enqueue("free").id
    queue.set_limit("capped", 5)
    assert [j.id for j in queue.claim_batch(10, capped=False)] == [free]
    assert [j.job_name for j in queue.claim_batch(10, capped=True)] == ["capped"]


def test_enqueue_refuses_a_job_path_jenkins_cannot_have(queue):
    for bad in ("a//b", "/deploy", "deploy/"):
        with pytest.raises(InvalidInput, match="single '/'"):
            queue.enqueue(bad)


def test_enqueue_refuses_dot_segments_in_one_line(queue):
    """``a/../b`` would reach job ``a/b`` (HTTP clients resolve dot segments) and run outside its cap."""
    for bad in ("a/../b", "team/../app/deploy", "./deploy", "deploy/.", ".."):
        with pytest.raises(InvalidInput, match=r"'\.' and '\.\.'") as refused:
            queue.enqueue(bad)
        assert "\n" not in str(refused.value)
    assert queue.list_jobs() == []


def test_claims_and_expired_leases_read_parameters_with_numbers_as_written(queue, db):
    """Numbers keep the digits jsonb prints (1.10, not the float 1.1); JSON null stays None (not sent).
    MariaDB keeps the JSON text as written, so there 1e-400 stays 1e-400 (jsonb prints its numeric's digits)."""
    text = '{"A": 1.10, "B": 19.990, "C": 1e-400, "D": {"z": 2.50}, "E": null, "F": "1.10", "G": true}'
    tiny = "1e-400" if db.dialect == "mysql" else "0." + "0" * 399 + "1"
    expected = {"A": "1.10", "B": "19.990", "C": tiny, "D": {"z": "2.50"}, "E": None, "F": "1.10", "G": True}
    for _ in range(2):
        # MySQL's JSON column takes the text as it is (MariaDB keeps it verbatim; MySQL 8 would store 1.1).
        db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('a', CAST(:p AS jsonb))",
                       mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('a', :p)"), p=text)
    [uncapped] = queue.claim_batch(1)
    [capped] = queue.claim_batch(1, capped=True)
    expire_leases(db)
    expired = queue.take_expired_leases()
    for parameters in (uncapped.parameters, capped.parameters, *(row.parameters for row in expired)):
        assert parameters == expected
        assert isinstance(parameters["A"], JsonNumber) and not isinstance(parameters["F"], JsonNumber)
    assert len(expired) == 2


def test_release_refuses_a_row_jenkins_already_accepted(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    queue.mark_triggered(job, 5)
    assert not queue.release(job.id, job.dispatch_id, "shutdown")
    assert queue.get(job.id)["status"] == "processing"


def test_expired_leases_go_to_exactly_one_reconciler(db):
    queue = Queue(db, lease_seconds=1)
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    assert queue.take_expired_leases() == []
    expire_leases(db)
    [expired] = queue.take_expired_leases()
    assert (expired.id, expired.dispatch_id) == (job.id, job.dispatch_id)
    assert queue.take_expired_leases() == []  # its lease was renewed by the take


def test_record_resend_is_bounded_and_needs_the_lease_it_was_handed(db):
    queue = Queue(db, lease_seconds=60)
    queue.enqueue("a", max_attempts=1)
    queue.claim_batch(1)
    expire_leases(db)
    [mine] = queue.take_expired_leases()
    expire_leases(db)
    [theirs] = queue.take_expired_leases()  # my lease ran out: another reconciler took the row
    assert queue.record_resend(mine, max_resends=2, quiet_seconds=9) is None
    assert queue.record_resend(theirs, max_resends=2, quiet_seconds=9) == 1
    [again] = (expire_leases(db),
               queue.take_expired_leases())[1]
    assert again.resends == 1 and queue.record_resend(again, max_resends=2, quiet_seconds=9) == 2
    expire_leases(db)
    [last] = queue.take_expired_leases()
    assert queue.record_resend(last, max_resends=2, quiet_seconds=9) is None  # none left
    row = queue.get(last.id)
    assert (row["attempts"], row["resends"]) == (1, 2)  # attempts untouched
    assert "held 9 s in Jenkins's queue" in queue.events(last.id)[-1]["detail"]


def test_cancel_and_operator_retry(queue):
    pending = queue.enqueue("a").id
    assert queue.cancel_pending(pending)
    assert queue.get(pending)["status"] == "cancelled"
    queue.retry_final(pending)
    row = queue.get(pending)
    assert (row["status"], row["attempts"], row["finished_at"]) == ("pending", 0, None)
    with pytest.raises(Conflict, match="only completed, failed or cancelled"):
        queue.retry_final(pending)
    with pytest.raises(NotFound):
        queue.retry_final(999_999)


def test_history_records_each_transition_once_in_order(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    queue.mark_triggered(job, 3)
    queue.record_progress(job.id, job.dispatch_id, build_number=8, build_url="http://j/8/", started=True)
    queue.record_progress(job.id, job.dispatch_id, build_number=8, build_url="http://j/8/", started=True)
    queue.settle(job.id, job.dispatch_id, "failed", result="FAILURE", error="build #8 FAILURE", actor="webhook")
    events = [(e["event"], e["from_status"], e["to_status"], e["actor"]) for e in queue.events(job.id)]
    assert events == [
        ("enqueued", None, "pending", "operator"),
        ("claimed", "pending", "processing", "dispatcher"),
        ("triggered", "processing", "processing", "dispatcher"),
        ("started", "processing", "processing", "webhook"),
        ("settled", "processing", "failed", "webhook"),
    ]


def test_prune_removes_old_finished_rows_and_their_events_in_batches(db, queue):
    for _ in range(25):
        queue.enqueue("a")
    for job in queue.claim_batch(20):
        queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    db.run("UPDATE jenkins_jobs_queue SET finished_at = :t WHERE id <= 15", t=ago(days=10))
    assert queue.prune(7, batch=4) == 15
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"] == 10
    assert db.run("SELECT count(*) AS n FROM jenkins_job_events WHERE job_id <= 15")[0]["n"] == 0


def test_stats_and_limits(queue):
    for _ in range(3):
        queue.enqueue("deploy")
    queue.enqueue("test", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    queue.set_limit("deploy", 2)
    [job, *_] = queue.claim_batch(10, capped=True)
    queue.settle(job.id, job.dispatch_id, "failed", error="x")
    stats = queue.stats()
    assert (stats["pending"], stats["due"], stats["processing"], stats["failed_last_hour"]) == (2, 1, 1, 1)
    per_job = {r["job_name"]: r for r in queue.stats_per_job()}
    assert (per_job["deploy"]["in_flight"], per_job["deploy"]["cap"], per_job["deploy"]["pending"]) == (1, 2, 1)
    assert per_job["test"]["cap"] is None
    assert queue.limits() == [{"controller": "default", "job_name": "deploy", "max_in_flight": 2, "in_flight": 1,
                               "per_minute": None, "started_last_minute": 0}]
    assert queue.remove_limit("deploy") and queue.limits() == []


@pytest.mark.parametrize(
    "sql, constraint",
    [
        ("INSERT INTO jenkins_jobs_queue (job_name, status) VALUES ('a', 'done')", "status_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('  ')", "job_name_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('a', '[1]')", "parameters_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('a', '\"x\"')", "parameters_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name, max_attempts) VALUES ('a', -1)", "max_attempts_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name, status) VALUES ('a', 'processing')", "processing_check"),
        ("INSERT INTO jenkins_jobs_queue (job_name, jenkins_result) VALUES ('a', 'GREEN')", "result_check"),
    ],
)
def test_constraints_reject_plain_sql_nonsense(db, sql, constraint):
    """Users enqueue with their own SQL: the table itself refuses nonsense, naming the rule broken."""
    with pytest.raises(DatabaseError, match=constraint):
        db.run(sql)
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"] == 0


def test_enqueue_validates_before_writing(queue):
    with pytest.raises(InvalidInput, match="JSON object"):
        queue.enqueue("a", ["not", "a", "dict"])
    with pytest.raises(InvalidInput, match="must not be empty"):
        queue.enqueue("")
    with pytest.raises(InvalidInput, match="max_attempts: expected a whole number from 1 to 2147483647"):
        queue.enqueue("a", max_attempts=0)
    # What the columns cannot hold, or a name with a control character (issue 33): refused before the database.
    with pytest.raises(InvalidInput, match="priority: expected a whole number from -2147483648 to 2147483647"):
        queue.enqueue("a", priority=2**31)
    with pytest.raises(InvalidInput, match="control character"):
        queue.enqueue("de\tploy")
    with pytest.raises(InvalidInput, match=re.escape("parameter name 'A\\nB' holds a control character (U+000A)")):
        queue.enqueue("a", {"A\nB": 1})
    with pytest.raises(InvalidInput, match="a dedupe key holds at most 255 characters"):
        queue.enqueue("a", dedupe_key="k" * 256)
    assert queue.list_jobs() == []


def test_batch_transitions_are_fenced_per_row(queue):
    for _ in range(4):
        queue.enqueue("a")
    jobs = queue.claim_batch(4)
    stale = jobs[3]
    queue.release(stale.id, stale.dispatch_id, "not sent")
    recorded = queue.mark_triggered_many([(j, 100 + j.id) for j in jobs])
    assert set(recorded) == {j.id for j in jobs[:3]} and not any(recorded.values())
    assert [queue.get(j.id)["jenkins_queue_id"] for j in jobs] == [101, 102, 103, None]
    settled = queue.settle_many([
        Settlement(jobs[0].id, jobs[0].dispatch_id, "completed", "SUCCESS"),
        Settlement(jobs[1].id, jobs[1].dispatch_id, "failed", "FAILURE", "build #1 FAILURE"),
        Settlement(jobs[2].id, "jd-stale", "completed", "SUCCESS"),
        Settlement(stale.id, stale.dispatch_id, "completed", "SUCCESS"),
    ])
    assert settled == {jobs[0].id, jobs[1].id}
    assert [queue.get(j.id)["status"] for j in jobs] == ["completed", "failed", "processing", "pending"]
    assert [e["event"] for e in queue.events(jobs[1].id)] == ["enqueued", "claimed", "triggered", "settled"]


def test_a_relative_build_url_never_replaces_an_absolute_one(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    assert queue.record_progress(job.id, job.dispatch_id, build_number=4, build_url="job/a/4/", started=True)
    assert queue.get(job.id)["build_url"] == "job/a/4/"  # better than nothing
    assert queue.record_progress(job.id, job.dispatch_id, build_url="https://ci.example.com/job/a/4/")
    assert not queue.record_progress(job.id, job.dispatch_id, build_number=4, build_url="job/a/4/", started=True)
    assert queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS", build_url="job/a/4/")
    assert queue.get(job.id)["build_url"] == "https://ci.example.com/job/a/4/"
    assert [e["event"] for e in queue.events(job.id)].count("started") == 2


def test_a_new_attempt_starts_with_a_clean_last_error_and_the_history_keeps_every_reason(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    assert queue.release(job.id, job.dispatch_id, "not sent: the pass stopped before this trigger")
    assert queue.get(job.id)["last_error"] == "not sent: the pass stopped before this trigger"
    [again] = queue.claim_batch(1)
    assert queue.get(again.id)["last_error"] is None  # processing, and no word of the earlier attempt
    assert queue.retry_later(again.id, again.dispatch_id, 0, "Jenkins answered 500") == "pending"
    [third] = queue.claim_batch(1)
    assert queue.get(third.id)["last_error"] is None
    details = {e["event"]: e["detail"] for e in queue.events(job.id)}
    assert details["released"] == "not sent: the pass stopped before this trigger"
    assert details["retry_scheduled"].startswith("Jenkins answered 500; next try not before")


def test_a_release_or_a_backoff_without_a_reason_is_refused(queue):
    queue.enqueue("a")
    [job] = queue.claim_batch(1)
    with pytest.raises(ValueError, match="reason"):
        queue.release(job.id, job.dispatch_id, " ")
    with pytest.raises(ValueError, match="reason"):
        queue.retry_later(job.id, job.dispatch_id, 0, "")
    assert queue.get(job.id)["status"] == "processing"


def test_a_cancel_requested_while_the_trigger_was_in_flight_ends_the_row_when_jenkins_never_took_it(queue):
    """cancel ID on a row whose trigger is on its way records the request; if that trigger then was not
    taken (released: never sent; backed off: refused for its job), the row used to go back to pending and
    be claimed and sent again — the operator's cancel lost. It ends cancelled instead, saying why."""
    released_id = queue.enqueue("deploy").id
    backed_off_id = queue.enqueue("frozen").id
    released, backed_off = queue.claim_batch(2)
    for job in (released, backed_off):
        assert queue.request_cancel(job.id, job.dispatch_id, "wrong version")
    assert queue.release(released.id, released.dispatch_id, "not sent: Jenkins unavailable")
    assert queue.retry_later(backed_off.id, backed_off.dispatch_id, 0, "job is disabled") == "cancelled"
    for job_id in (released_id, backed_off_id):
        row = queue.get(job_id)
        assert row["status"] == "cancelled" and row["finished_at"] is not None, row
        assert "cancel" in row["last_error"]
        last = queue.events(job_id)[-1]
        assert (last["from_status"], last["to_status"]) == ("processing", "cancelled")
    assert queue.claim_batch(10) == []
