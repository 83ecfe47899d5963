"""Plain SQL on the table (issue 33, item 3). The seed's users fix rows by hand: `UPDATE jenkins_jobs_queue SET
status = 'pending' WHERE id = …` put a stuck job back in the queue. Done on a row whose build was queued or running,
it was accepted as it reads, claimed again under a new dispatch id, and Jenkins built the job twice. Now such an
UPDATE asks for a look under the same dispatch (the trigger jenkins_jobs_queue_plain_sql, PostgreSQL's migration
0019 and MySQL's 0017): the row stays processing, Jenkins is searched for its DISPATCH_ID, and it is sent again,
with the same DISPATCH_ID, only when nothing is there. The same UPDATE on a final row is the operator's retry.
Either way the row's history says so (actor plain_sql).

Each UPDATE runs as the user's own tool would run it: a session of its own, in a time zone of its own. Both engines;
the emulator over real HTTP."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.wakeup import WORK, work_signal
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import dispatch_settings, expire_leases, wait_for
from ..engines import row_lock_waiters, sql_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

REQUEUE = "UPDATE jenkins_jobs_queue SET status = 'pending' WHERE id IN ({ids})"


def plain_sql(database_url: str, sql: str, **params) -> None:
    """As the user's own tool runs it: its own session, its own time zone (not ours, UTC), no library of ours."""
    with Database(parse_database_url(database_url), application_name="their-tool") as tool:
        tool.run(sql_for(tool, postgresql="SET TIME ZONE 'Asia/Kolkata'", mysql="SET time_zone = '+05:30'"))
        tool.run(sql, **params)


def requeue(database_url: str, *ids: int) -> None:
    plain_sql(database_url, REQUEUE.format(ids=", ".join(str(i) for i in ids)))


def builds_with(jenkins, job: str, dispatch_id: str) -> int:
    """The builds of ``job`` that carry this DISPATCH_ID."""
    return sum(1 for build in jenkins.builds(job)
               if any(d.name == "DISPATCH_ID" and value == dispatch_id for d, value in build.parameters))


def last_event(queue: Queue, job_id: int) -> dict:
    return dict(queue.events(job_id)[-1])


def database_now(db) -> datetime:
    return db.run(sql_for(db, postgresql="SELECT now() AS t", mysql="SELECT UTC_TIMESTAMP(6) AS t"))[0]["t"]


def test_a_plain_sql_requeue_of_a_queued_a_building_and_a_lost_dispatch_builds_each_job_once(make_jenkins, db,
                                                                                              database_url):
    jenkins = make_jenkins(notification=None)  # no callbacks: what Jenkins did is learnt by the reconciler alone
    queue = Queue(db, lease_seconds=60)
    settings = dispatch_settings(jenkins.base_url, RESEND_QUIET_SECONDS="0")
    # Building: triggered, its build started and recorded, as the webhook's STARTED records it.
    building = queue.enqueue("deploy", {"ENV": "building", "EMULATOR_DURATION": "1"}).id
    run_pass(settings)
    assert jenkins.wait_until(lambda: len(jenkins.builds("deploy")) == 1)
    started = jenkins.builds("deploy")[0]
    row = queue.get(building)
    assert started.queue_id == row["jenkins_queue_id"]
    assert queue.record_progress(building, row["dispatch_id"], build_number=started.number,
                                 build_url=f"{jenkins.base_url}/job/deploy/{started.number}/", started=True)
    # Queued: triggered, its queue item held in Jenkins's queue (Jenkins is quieting down).
    jenkins.configure(quieting_down=True)
    queued = queue.enqueue("deploy", {"ENV": "queued"}).id
    run_pass(settings)
    # Lost: claimed, and the dispatcher died before its trigger was sent (or its answer was lost).
    lost = queue.enqueue("deploy", {"ENV": "lost"}).id
    assert [job.id for job in queue.claim_batch(10)] == [lost]
    ids = (queued, building, lost)
    before = {i: queue.get(i) for i in ids}
    assert before[queued]["jenkins_queue_id"] is not None and before[queued]["build_number"] is None
    assert before[building]["build_number"] == started.number and before[lost]["jenkins_queue_id"] is None

    requeue(database_url, *ids)

    now = database_now(db)
    for i in ids:
        row, was = queue.get(i), before[i]
        assert (row["status"], row["dispatch_id"]) == ("processing", was["dispatch_id"]), row
        for kept in ("attempts", "resends", "jenkins_queue_id", "build_number", "build_url", "finished_at"):
            assert row[kept] == was[kept], (kept, row)
        event = last_event(queue, i)
        assert {k: event[k] for k in ("event", "from_status", "to_status", "dispatch_id", "actor")} == {
            "event": "requeue_kept", "from_status": "processing", "to_status": "processing",
            "dispatch_id": was["dispatch_id"], "actor": "plain_sql"}, event
        assert event["detail"].startswith("set back to pending by plain SQL while processing"), event
    # Jenkins has the first two: they are looked at now. The third's trigger may still be on its way: its lease stands.
    for i in (queued, building):
        assert queue.get(i)["lease_expires_at"] <= now
        assert "Jenkins has it" in last_event(queue, i)["detail"]
    assert queue.get(lost)["lease_expires_at"] == before[lost]["lease_expires_at"] > now
    assert "searched for its DISPATCH_ID" in last_event(queue, lost)["detail"]

    summary = run_pass(settings)
    assert summary["reconciled"]["checked"] == 2 and summary["claimed"] == 0, summary
    assert jenkins.counters()["items_created"] == 2  # nothing sent again

    jenkins.configure(quieting_down=False)
    expire_leases(db)  # the lost one's lease, skipped: the reconciler searches, finds nothing, sends it again

    def all_final() -> bool:
        run_pass(settings)
        expire_leases(db)
        return all(queue.get(i)["status"] == "completed" for i in ids)

    assert wait_for(all_final, timeout=30, interval=0.2), [queue.get(i) for i in ids]
    for i in ids:
        row = queue.get(i)
        assert row["dispatch_id"] == before[i]["dispatch_id"] and row["attempts"] == 1, row
        assert jenkins.triggers_for(row["dispatch_id"]) == 1, row  # one queue item per job
        assert builds_with(jenkins, "deploy", row["dispatch_id"]) == 1, row  # one build per job
        assert sum(e["event"] == "settled" for e in queue.events(i)) == 1
    assert queue.get(lost)["resends"] == 1 and queue.get(queued)["resends"] == queue.get(building)["resends"] == 0
    assert len(jenkins.builds("deploy")) == 3


# Every column of the queue a plain UPDATE can set, each to a value the row does not hold (SQL both engines read
# alike). A column added later must be added here: the test says so.
OTHER_VALUES = {
    "id": "id + 1000", "job_name": "'someone/else'", "parameters": """'{"CHANGED": "yes"}'""",
    "status": "'pending'", "priority": "99", "scheduled_at": "'2030-01-01 00:00:00'", "attempts": "0",
    "max_attempts": "9", "dispatch_id": "'someone-else'", "jenkins_queue_id": "999999", "build_number": "999",
    "build_url": "'http://elsewhere/'", "jenkins_result": "'SUCCESS'", "last_error": "'changed'",
    "dedupe_key": "'changed-key'", "lease_expires_at": "'2030-01-01 00:00:00'",
    "started_at": "'2030-01-01 00:00:00'", "created_at": "'2030-01-01 00:00:00'",
    "updated_at": "'2030-01-01 00:00:00'", "finished_at": "'2030-01-01 00:00:00'", "resends": "5",
    "cancel_requested_at": "'2030-01-01 00:00:00'", "controller": "'elsewhere'",
    "concurrency_key": "'other:key'", "fairness_key": "'other-team'", "fair_round": "12345",
}


def test_nothing_else_a_plain_sql_requeue_sets_on_a_processing_row_is_kept(queue, db, database_url):
    """The dispatch stays as it was — its job, parameters (a re-send must match the original to merge with it in
    Jenkins's queue), controller, Jenkins's fields, counters — only its lease may come sooner."""
    columns = {r["name"] for r in db.run(sql_for(
        db, postgresql="SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() "
                       "AND table_name = 'jenkins_jobs_queue' AND is_generated = 'NEVER'",
        mysql="SELECT column_name AS name FROM information_schema.columns WHERE table_schema = DATABASE() "
              "AND table_name = 'jenkins_jobs_queue' AND extra NOT LIKE '%GENERATED%'"))}
    assert columns == set(OTHER_VALUES), "a column of the queue is missing here (or gone): " + str(
        columns ^ set(OTHER_VALUES))
    job_id = queue.enqueue("deploy", {"ENV": "prod"}).id
    [job] = queue.claim_batch(1)
    assert queue.mark_triggered(job, 17)
    read = "SELECT * FROM jenkins_jobs_queue WHERE id = :id"
    [before] = db.run(read, id=job_id)

    plain_sql(database_url, "UPDATE jenkins_jobs_queue SET " + ", ".join(
        f"{column} = {value}" for column, value in OTHER_VALUES.items()) + f" WHERE id = {job_id}")

    [after] = db.run(read, id=job_id)
    changed = {c for c in before if after[c] != before[c]}
    assert changed == {"updated_at", "lease_expires_at"}, {c: (before[c], after[c]) for c in changed}
    assert before["updated_at"] <= after["updated_at"] < datetime(2030, 1, 1, tzinfo=UTC)
    assert after["lease_expires_at"] <= database_now(db)  # Jenkins has it (queue item 17): looked at now
    assert last_event(queue, job_id)["event"] == "requeue_kept"


def test_a_plain_sql_requeue_of_a_job_the_old_worker_holds_keeps_its_cutover_window(queue, db, database_url):
    """A job the worker that ran before jenkins-dispatch holds (docs/cutover.md) is never sent by us: its lease is
    the cutover window, and a requeue by hand does not end it early."""
    job_id = queue.enqueue("deploy").id
    window_ends = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    db.run("UPDATE jenkins_jobs_queue SET status = 'processing', dispatch_id = :legacy, lease_expires_at = :ends "
           "WHERE id = :id", legacy=f"legacy-{job_id}", ends=window_ends, id=job_id)

    requeue(database_url, job_id)

    row = queue.get(job_id)
    assert (row["status"], row["dispatch_id"], row["lease_expires_at"]) == (
        "processing", f"legacy-{job_id}", window_ends), row
    event = last_event(queue, job_id)
    assert event["event"] == "requeue_kept" and "the worker that ran before jenkins-dispatch" in event["detail"], event


def test_a_plain_sql_requeue_wakes_the_dispatcher(queue, db, database_url):
    """The row is due for a look at once: a waiting dispatcher hears of it (PostgreSQL's NOTIFY, MySQL's poll of the
    queue's fingerprint), not only at its next periodic pass."""
    queue.enqueue("deploy")
    [job] = queue.claim_batch(1)
    assert queue.mark_triggered(job, 17)
    with Database(parse_database_url(database_url), application_name="jd-tests-listener") as session:
        signal = work_signal(session, poll_seconds=0.05)
        while signal.wait(0.3):  # the first wait reports the fresh session: start from silence
            pass
        requeue(database_url, job.id)
        assert WORK in signal.wait(5)


def test_a_plain_sql_requeue_of_a_final_row_is_the_operators_retry(queue, db, database_url):
    """The seed's habit for "retry a failed job". Taken as it reads, the row was claimed as "attempt 4 of 3" with its
    finish time, re-sends and requested cancel still set (a row cancelled while its trigger was on its way was then
    cancelled again at once). It is `jenkins-dispatch retry`'s retry: what else the UPDATE set stays."""
    failed = queue.enqueue("deploy", {"ENV": "failed"}, max_attempts=1).id
    cancelled = queue.enqueue("deploy", {"ENV": "cancelled"}).id
    completed = queue.enqueue("deploy", {"ENV": "completed"}).id
    jobs = {job.id: job for job in queue.claim_batch(3)}
    queue.settle(failed, jobs[failed].dispatch_id, "failed", result="FAILURE", build_number=3,
                 build_url="http://jenkins/job/deploy/3/", error="build #3 FAILURE")
    assert queue.request_cancel(cancelled, jobs[cancelled].dispatch_id, "no longer needed")
    queue.settle(cancelled, jobs[cancelled].dispatch_id, "cancelled", error="cancelled by operator")
    queue.settle(completed, jobs[completed].dispatch_id, "completed", result="SUCCESS", build_number=4)
    before = {i: queue.get(i) for i in jobs}
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)

    requeue(database_url, failed, cancelled)
    plain_sql(database_url, "UPDATE jenkins_jobs_queue SET status = 'pending', priority = 7, scheduled_at = :later "
                            "WHERE id = :id", later=later, id=completed)

    for i, was in before.items():
        row = queue.get(i)
        assert row["status"] == "pending" and row["dispatch_id"] == was["dispatch_id"], row
        for cleared in ("finished_at", "lease_expires_at", "cancel_requested_at", "jenkins_queue_id", "build_number",
                        "build_url", "jenkins_result", "last_error", "started_at"):
            assert row[cleared] is None, (cleared, row)
        assert (row["attempts"], row["resends"]) == (0, 0), row
        event = last_event(queue, i)
        assert {k: event[k] for k in ("event", "from_status", "to_status", "actor")} == {
            "event": "retried", "from_status": was["status"], "to_status": "pending", "actor": "plain_sql"}, event
        assert f"jenkins-dispatch retry {i}" in event["detail"], event
    assert queue.get(failed)["scheduled_at"] >= before[failed]["finished_at"]  # due now, as `retry` makes it
    assert (queue.get(completed)["priority"], queue.get(completed)["scheduled_at"]) == (7, later)  # what they set
    claimed = {job.id: job for job in queue.claim_batch(3)}
    assert set(claimed) == {failed, cancelled} and all(job.attempts == 1 for job in claimed.values())
    assert queue.mark_triggered_many([(claimed[cancelled], 21)]) == {cancelled: False}  # not cancelled again


@pytest.mark.parametrize("only_in_flight, ends", [(True, "completed"), (False, "pending")],
                         ids=["and-status-processing", "by-id-alone"])
def test_a_requeue_racing_the_settle_of_its_job_meets_the_row_final(queue, db, database_url, only_in_flight, ends):
    """The job's callback settles it while the requeue waits for the row: the UPDATE meets a completed row. Written
    `AND status = 'processing'` it then changes nothing (docs/operating.md advises it); by id alone it is a retry of
    the finished job, and its history says so."""
    job_id = queue.enqueue("deploy").id
    [job] = queue.claim_batch(1)
    assert queue.mark_triggered(job, 17)
    sql = REQUEUE.format(ids=job_id) + (" AND status = 'processing'" if only_in_flight else "")
    with Database(parse_database_url(database_url), application_name="jd-tests-webhook") as webhook:
        with webhook.transaction():
            assert Queue(webhook).settle(job_id, job.dispatch_id, "completed", result="SUCCESS", actor="webhook")
            requeuing = threading.Thread(target=plain_sql, args=(database_url, sql))
            requeuing.start()
            assert wait_for(lambda: row_lock_waiters(db) == 1, timeout=10), "the requeue never waited for the row"
        requeuing.join(10)
    row, event = queue.get(job_id), last_event(queue, job_id)
    assert row["status"] == ends, row
    assert (event["event"], event["actor"]) == (("settled", "webhook") if only_in_flight else ("retried", "plain_sql"))


def test_our_own_ways_back_to_pending_are_not_taken_for_plain_sql(queue):
    """release, retry_later and retry_final make rows pending too: each clears the lease and the finish time, which
    is how the trigger tells them from a hand-made UPDATE (tests/unit/test_statements.py reads the same rule)."""
    released, backed_off, retried = (queue.enqueue("deploy", {"N": str(n)}).id for n in range(3))
    jobs = {job.id: job for job in queue.claim_batch(3)}
    assert queue.release(released, jobs[released].dispatch_id, "Jenkins unavailable")
    assert queue.retry_later(backed_off, jobs[backed_off].dispatch_id, 0, "HTTP 500") == "pending"
    queue.settle(retried, jobs[retried].dispatch_id, "failed", result="FAILURE")
    queue.retry_final(retried)
    for job_id, event in ((released, "released"), (backed_off, "retry_scheduled"), (retried, "retried")):
        assert queue.get(job_id)["status"] == "pending"
        history = queue.events(job_id)
        assert history[-1]["event"] == event and history[-1]["actor"] in ("dispatcher", "operator"), history
        assert not [e for e in history if e["actor"] == "plain_sql"], history
