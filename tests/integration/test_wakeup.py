"""Wake on enqueue: the schema's notifications, the dispatcher waiting on them, and what that buys —
a plain-SQL INSERT reaches Jenkins within a second under a Lambda invocation (under `serve`: tests/system), a capped job
starts as soon as its slot frees, overlapping continuous dispatchers keep every promise. On MySQL/MariaDB (no
notifications) the dispatcher polls: one cheap "anything to claim?" read a second while idle, a pass only when
it says yes.

Real PostgreSQL (and MariaDB for the polling tests), the emulator over real HTTP.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import contextmanager, suppress

import pytest

from jenkins_dispatch import runtime
from jenkins_dispatch.config import default_of, parse_database_url
from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.wakeup import SLOT, WORK, NotificationSignal, work_signal
from jenkins_dispatch.errors import DatabaseBusy, InvalidInput
from jenkins_dispatch.serve import WebhookServer
from jenkins_dispatch.store.db import Database, SessionPool

from ..dispatch_helpers import WEBHOOK_SECRET, dispatch_settings, wait_for
from ..stores import Queue


@pytest.fixture
def listener(database_url, db):
    with Database(parse_database_url(database_url), application_name="jd-tests-listener") as session:
        signal = NotificationSignal(session)
        signal.wait(0)  # the first wait reports the fresh session; start from silence
        yield signal


def drain(signal: NotificationSignal, *, expecting: bool = True, window: float = 0.3) -> list[set[str]]:
    """Every wake-up that comes: when ``expecting`` news, the first is waited for up to 10 s (a notification can
    come late on a loaded machine: one came after the 0.3 s this used to wait, on 3.13 beside two CPU burners),
    then whatever follows within ``window`` seconds; when not, only ``window`` seconds are watched."""
    woke = []
    if expecting:
        first = signal.wait(10)
        if not first:
            return woke
        woke.append(first)
    deadline = time.monotonic() + window
    while (left := deadline - time.monotonic()) > 0:
        news = signal.wait(left)
        if news:
            woke.append(news)
    return woke


def insert_plain_sql(database_url: str, sql: str) -> None:
    """As the user's application would: its own session, its own statement, no library of ours."""
    with Database(parse_database_url(database_url), application_name="their-app") as app:
        app.run(sql)


# --------------------------------------------------------------------------- the notifications


def test_a_plain_insert_from_another_session_wakes_the_listener_at_once(listener, database_url):
    threading.Timer(0.2, insert_plain_sql,
                    (database_url, "INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('deploy', '{}')")).start()
    # A wait that ends on its timeout says nothing ({}): news means the insert's notification ended it.
    assert listener.wait(30) == {WORK}


def test_a_ten_thousand_row_insert_sends_one_notification(listener, database_url):
    insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) SELECT 'deploy' FROM generate_series(1, 10000)")
    assert drain(listener) == [{WORK}]
    payloads = listener.db.wait_for_notifications(0.2)
    assert payloads == []  # nothing left behind either


def test_claims_send_nothing_releases_send_work_and_settles_free_a_slot(listener, queue):
    with queue.db.transaction():  # one commit, one notification: read in full before the claim
        queue.enqueue("deploy")
        queue.enqueue("deploy")
    assert drain(listener) == [{WORK}]
    jobs = queue.claim_batch(2)
    assert drain(listener, expecting=False) == []  # the claim itself is silent: no self-wakeup per claim
    queue.release(jobs[0].id, jobs[0].dispatch_id, "test")
    assert drain(listener) == [{WORK, SLOT}]  # pending again, and its slot is free
    queue.settle(jobs[1].id, jobs[1].dispatch_id, "completed", result="SUCCESS")
    assert drain(listener) == [{SLOT}]
    queue.set_limit("deploy", 3)
    assert drain(listener) == [{WORK}]


def test_a_listener_whose_session_was_killed_reconnects_and_says_so(listener, db, database_url):
    pid = listener.db.run("SELECT pg_backend_pid() AS pid")[0]["pid"]
    db.run("SELECT pg_terminate_backend(:pid)", pid=pid)
    from jenkins_dispatch.errors import DatabaseUnavailable

    # Where the server is, as the settings describe it: host:port, or the Unix socket of an embedded server.
    where = parse_database_url(database_url).describe()
    with pytest.raises(DatabaseUnavailable, match=re.escape(where)):
        listener.wait(10)  # ends as soon as the server's goodbye arrives
    assert "reconnected" in listener.wait(0.1)
    insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')")
    assert listener.wait(10) == {WORK}  # LISTEN was issued again on the new session


def test_scheduled_at_must_be_a_real_time(db, queue):
    from jenkins_dispatch.store.db import DatabaseError

    with pytest.raises(DatabaseError, match="jenkins_jobs_queue_scheduled_at_check"):
        db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('deploy', '-infinity')")
    with pytest.raises(InvalidInput, match="scheduled_at must be a real time"):
        queue.enqueue("deploy", scheduled_at="infinity")
    assert queue.stats()["pending"] == 0
    queue.gauges()  # and every gauge still computes


# --------------------------------------------------------------------------- sessions


def test_the_pool_never_holds_more_sessions_than_its_size_and_replaces_killed_ones(database_url, db):
    pool = SessionPool(parse_database_url(database_url), 2, application_name="jd-tests-pool")
    peak = 0
    from jenkins_dispatch.errors import DatabaseUnavailable

    def use():
        # A killed session reports it once (DatabaseUnavailable), then reopens.
        with pool.session() as session, suppress(DatabaseUnavailable):
            session.run("SELECT pg_sleep(0.02)")

    try:
        for _ in range(3):
            threads = [threading.Thread(target=use) for _ in range(12)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            count = db.run("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'jd-tests-pool'")
            peak = max(peak, count[0]["n"])
            db.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'jd-tests-pool'")
        assert peak == 2
        # Killed sessions fail their next statement once, then the pool's sessions reopen.
        for _ in range(3):
            use()
        with pool.session() as session:
            assert session.run("SELECT 1 AS one") == [{"one": 1}]
    finally:
        pool.close()


def test_a_lock_held_past_lock_timeout_is_a_busy_database_not_a_crash(jenkins, database_url, db, caplog):
    queue = Queue(db)
    queue.enqueue("deploy")
    settings = dispatch_settings(jenkins.base_url)
    holder = Database(parse_database_url(database_url), application_name="jd-tests-lock")
    holder.run("BEGIN")
    holder.run("LOCK TABLE jenkins_jobs_queue IN ACCESS EXCLUSIVE MODE")
    with Database(settings.database) as session:
        session.run("SET lock_timeout = 200")
        with pytest.raises(DatabaseBusy, match="busy: .*lock"):
            Queue(session).claim_batch(5)
        stop = threading.Event()
        loop = DispatchLoop(settings, session, NotificationSignal(session, stop), interval=0.2, shutdown=stop)
        caplog.set_level(logging.INFO, logger="jenkins-dispatch")
        runner = threading.Thread(target=loop.run)
        runner.start()
        try:
            assert wait_for(lambda: "the database is busy" in caplog.text, timeout=10)
            holder.run("ROLLBACK")
            assert wait_for(lambda: queue.stats()["processing"] == 1, timeout=10)
        finally:
            stop.set()
            runner.join(10)
            holder.close()
    assert "crashed" not in caplog.text and "Traceback" not in caplog.text


# --------------------------------------------------------------------------- latency, as users see it


def triggered_within(jenkins, predicate_count: int, seconds: float) -> float | None:
    """Seconds until the emulator has seen ``predicate_count`` trigger requests, or None."""
    started = time.monotonic()
    if wait_for(lambda: jenkins.counters()["trigger_requests"] >= predicate_count, timeout=seconds, interval=0.01):
        return time.monotonic() - started
    return None


class CountdownContext:
    """A Lambda context whose time left counts down, as Lambda's does."""

    function_name = "jenkins-dispatch-dispatcher"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-dispatcher"
    aws_request_id = "req-continuous"

    def __init__(self, seconds: float):
        self.ends_at = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.ends_at - time.monotonic()) * 1000))


class InvocationContext(CountdownContext):
    """A Lambda context whose time left the test sets (``time_left_ms``), as Lambda's would count it down."""

    def __init__(self, seconds: float):
        self.time_left_ms = int(seconds * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return self.time_left_ms


# Far longer than any wait of the tests below for a trigger (WOKEN_WITHIN_SECONDS): a trigger they see can only
# have followed the insert's notification, never the periodic pass or an expiring lease.
PERIODIC_SECONDS = 600
WOKEN_WITHIN_SECONDS = 20


def test_a_continuous_lambda_invocation_is_woken_by_a_plain_sql_insert_and_stops_when_time_is_nearly_up(
        jenkins, database_url, db, monkeypatch):
    from functions.dispatcher.app import lambda_handler
    from jenkins_dispatch import lambda_entry

    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": str(PERIODIC_SECONDS), "JENKINS_TIMEOUT_SECONDS": "1",
                       "TIME_MARGIN_SECONDS": "2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DISPATCHER_MODE", raising=False)  # continuous is the default
    monkeypatch.setattr(lambda_entry, "LAMBDA_INTERVAL_SECONDS", PERIODIC_SECONDS)
    runtime.reset()
    result: dict = {}
    context = InvocationContext(2 * PERIODIC_SECONDS)
    invocation = threading.Thread(target=lambda: result.update(lambda_handler({}, context)), daemon=True)
    invocation.start()
    try:
        for n in range(1, 4):
            insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')")
            assert triggered_within(jenkins, n, WOKEN_WITHIN_SECONDS) is not None, n
        # Less time left than the margin plus one Jenkins timeout (3 s): the next wake-up ends the invocation,
        # and the row that woke it is left to the next one.
        context.time_left_ms = 2500
        insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')")
        invocation.join(WOKEN_WITHIN_SECONDS)
        assert not invocation.is_alive()
    finally:
        context.time_left_ms = 0
        invocation.join(15)
        runtime.reset()
    # Not a pass per row: a pass that has just triggered a row claims again, and may find the next INSERT itself
    # (seen on eight workers beside two CPU burners: 2 passes, the second claiming 2 rows in 2 batches). Each row
    # triggered within seconds where the periodic pass is 10 minutes away is what only the wake-ups explain.
    assert result["triggered"] == 3 and result["passes"] >= 1 and result["stopped_because"] == "time nearly up"
    assert Queue(db).stats()["pending"] == 1 and jenkins.counters()["trigger_requests"] == 3


def test_a_capped_job_starts_when_its_slot_frees_woken_by_the_callback(make_jenkins, database_url, db):
    settings = dispatch_settings("http://unused/", LEASE_SECONDS="30", JENKINS_TIMEOUT_SECONDS="5")
    runtime.install(settings)
    webhook = WebhookServer(settings).start()
    jenkins = make_jenkins(notification={"url": f"{webhook.url}jenkins/notify?token={WEBHOOK_SECRET}"},
                           jobs=[{"path": "slow", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.3}])
    queue = Queue(db)
    queue.set_limit("slow", 1)
    stop = threading.Event()
    session = Database(dispatch_settings(jenkins.base_url).database)
    loop = DispatchLoop(dispatch_settings(jenkins.base_url, LEASE_SECONDS=str(PERIODIC_SECONDS),
                                          JENKINS_TIMEOUT_SECONDS="5"),
                        session, NotificationSignal(session, stop), interval=PERIODIC_SECONDS, shutdown=stop)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        first = queue.enqueue("slow").id
        second = queue.enqueue("slow").id
        assert wait_for(lambda: queue.get(first)["status"] == "completed", timeout=WOKEN_WITHIN_SECONDS)
        # Its slot freed by the callback's settle: only that notification can start the second this soon.
        assert wait_for(lambda: queue.get(second)["jenkins_queue_id"] is not None, timeout=WOKEN_WITHIN_SECONDS,
                        interval=0.01)
    finally:
        stop.set()
        runner.join(15)
        session.close()
        webhook.stop()
        runtime.reset()


def test_overlapping_continuous_dispatchers_trigger_each_job_once_within_caps(make_jenkins, database_url, db):
    """Consecutive Lambda invocations overlap by design: three loops at once, a stream of inserts."""
    settings = dispatch_settings("http://unused/", MAX_IN_FLIGHT="6")
    runtime.install(settings)
    webhook = WebhookServer(settings).start()
    jenkins = make_jenkins(executors=20, notification={"url": f"{webhook.url}jenkins/notify?token={WEBHOOK_SECRET}"},
                           jobs=[{"path": "svc", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1,
                                  "concurrent": True}])
    queue = Queue(db)
    queue.set_limit("svc", 2)
    stop = threading.Event()
    loops, sessions = [], []
    for _ in range(3):
        session = Database(settings.database)
        sessions.append(session)
        loop_settings = dispatch_settings(jenkins.base_url, MAX_IN_FLIGHT="6")
        loops.append(threading.Thread(target=DispatchLoop(loop_settings, session, NotificationSignal(session, stop),
                                                          interval=1, shutdown=stop).run))
    for t in loops:
        t.start()
    peaks = {"svc": 0, "all": 0}
    try:
        for i in range(60):
            queue.enqueue("svc" if i % 2 else "deploy")
            counts = {r["job_name"]: r["n"] for r in db.run(
                "SELECT job_name, count(*) AS n FROM jenkins_jobs_queue WHERE status = 'processing' GROUP BY 1")}
            peaks["svc"] = max(peaks["svc"], counts.get("svc", 0))
            peaks["all"] = max(peaks["all"], sum(counts.values()))
            time.sleep(0.02)
        assert wait_for(lambda: queue.stats()["completed_last_hour"] == 60, timeout=40), queue.stats()
    finally:
        stop.set()
        for t in loops:
            t.join(15)
        for session in sessions:
            session.close()
        webhook.stop()
        runtime.reset()
    rows = db.run("SELECT dispatch_id FROM jenkins_jobs_queue")
    assert all(jenkins.triggers_for(r["dispatch_id"]) == 1 for r in rows)
    assert peaks["svc"] <= 2 and peaks["all"] <= 6
    assert jenkins.peak_in_flight("svc") <= 2


def test_health_sees_jenkins_come_back_while_no_job_waits(jenkins, database_url, db):
    """After an outage, an idle dispatcher asks Jenkins itself (whoAmI) instead of reporting it unavailable
    until the next job arrives (found by a probe: 20 s and 24 idle passes later it still said unavailable)."""
    queue = Queue(db)
    job_id = queue.enqueue("deploy").id
    jenkins.add_fault(path="", status=503)
    settings = dispatch_settings(jenkins.base_url)
    stop = threading.Event()
    session = Database(settings.database)
    loop = DispatchLoop(settings, session, NotificationSignal(session, stop), interval=0.3, shutdown=stop)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        assert wait_for(lambda: loop.health.passes >= 1 and loop.breaker.is_open, timeout=10)  # row released
        assert queue.cancel_pending(job_id)  # nothing left to send
        jenkins.clear_faults()
        assert wait_for(lambda: loop.health.report()[1]["jenkins"]["status"] == "ok", timeout=20)
        assert loop.health.report()[1]["status"] == "ok"
    finally:
        stop.set()
        runner.join(20)
        session.close()


def test_a_backlog_longer_than_one_pass_keeps_flowing_without_waiting_for_the_interval(jenkins, db):
    """A `serve` pass ends on its budget with rows still due: the next pass must start at once. It used to
    sleep the whole --interval (800 rows: nothing sent for 10.6 s between passes, in the benchmark)."""
    jenkins.add_fault(path="buildWithParameters$", latency_seconds=0.1)
    db.run("INSERT INTO jenkins_jobs_queue (job_name) SELECT 'deploy' FROM generate_series(1, 40)")
    settings = dispatch_settings(jenkins.base_url, BATCH_SIZE="4", MAX_PARALLEL_TRIGGERS="2",
                                 LEASE_SECONDS=str(PERIODIC_SECONDS))
    stop = threading.Event()
    session = Database(settings.database)
    loop = DispatchLoop(settings, session, NotificationSignal(session, stop), interval=PERIODIC_SECONDS,
                        shutdown=stop, pass_budget_seconds=0.5)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        # 40 triggers / (2 threads / 0.1 s) = 2 s at best, in several passes of 0.5 s: all sent before the first
        # periodic pass could come, so no pass waited for the interval.
        assert wait_for(lambda: jenkins.counters()["trigger_requests"] >= 40, timeout=WOKEN_WITHIN_SECONDS)
    finally:
        stop.set()
        runner.join(20)
        session.close()
    assert loop.health.passes >= 3


# --------------------------------------------------------------------------- polling (MySQL: no notifications)

ON_MYSQL = pytest.mark.parametrize("engine", ["mysql"], indirect=True)
# While idle a dispatcher sends at most one cheap probe a poll (MySQL/MariaDB: every POLL_SECONDS; PostgreSQL
# LISTENs and sends none); a full pass costs ~5 statements.
IDLE_WINDOW_SECONDS = 3.0
POLLS_PER_SECOND = 1 / default_of("POLL_SECONDS")
MAX_IDLE_STATEMENTS_PER_SECOND = {"postgresql": 1.2, "mysql": 1.2 * POLLS_PER_SECOND}


@contextmanager
def polling_loop(settings, interval: float):
    """A DispatchLoop on its own session, waiting on what work_signal gives it, run on a thread."""
    stop = threading.Event()
    session = Database(settings.database, application_name="jd-tests-poller")
    loop = DispatchLoop(settings, session, work_signal(session, stop), interval=interval, shutdown=stop)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        yield loop, session
    finally:
        stop.set()
        runner.join(15)
        session.close()


def settled(loop: DispatchLoop, quiet: float = 1.6, timeout: float = 10) -> bool:
    """Once the loop has passed and then run no pass for ``quiet`` seconds (a poll, and a pass it asked for)."""
    if not wait_for(lambda: loop.health.passes >= 1, timeout=timeout):
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        passes = loop.health.passes
        time.sleep(quiet)
        if loop.health.passes == passes:
            return True
    return False


def idle_cost(loop: DispatchLoop, session: Database, seconds: float = IDLE_WINDOW_SECONDS) -> tuple[int, float]:
    """(passes, statements per second) of the loop's session over ``seconds``."""
    passes, statements, started = loop.health.passes, session.statements, time.monotonic()
    time.sleep(seconds)
    return loop.health.passes - passes, (session.statements - statements) / (time.monotonic() - started)


@pytest.mark.both_engines
def test_the_queue_fingerprint_moves_with_everything_a_pass_acts_on(db, queue, database_url):
    def moved(change) -> bool:
        before = queue.fingerprint()
        change()
        return queue.fingerprint() != before

    assert not moved(lambda: None)
    assert moved(lambda: insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')"))
    assert moved(lambda: queue.enqueue("deploy"))
    jobs = []
    assert moved(lambda: jobs.extend(queue.claim_batch(2)))
    assert moved(lambda: queue.release(jobs[0].id, jobs[0].dispatch_id, "test"))
    assert moved(lambda: queue.retry_later(jobs[1].id, jobs[1].dispatch_id, 60, "test"))
    assert moved(lambda: queue.set_limit("deploy", 1))
    assert moved(lambda: queue.set_limit("deploy", 2))
    assert moved(lambda: queue.remove_limit("deploy"))
    assert moved(lambda: queue.pause("deploy"))
    assert moved(lambda: queue.resume("deploy"))
    assert moved(lambda: queue.pause(None))
    assert not moved(lambda: (queue.stats(), queue.gauges(), queue.claim_batch(5)))  # reads, an empty claim
    assert moved(lambda: queue.resume(None))


@ON_MYSQL
def test_a_paused_or_capped_backlog_stays_quiet_until_the_pause_lifts_or_the_cap_rises(make_jenkins, db):
    jenkins = make_jenkins(jobs=[{"path": path, "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 60,
                                  "concurrent": True, "notify": False} for path in ("held", "capped")])
    queue = Queue(db)
    queue.pause("held")
    queue.set_limit("capped", 1)
    for _ in range(6):
        queue.enqueue("held")
        queue.enqueue("capped")
    settings = dispatch_settings(jenkins.base_url, LEASE_SECONDS="60", JENKINS_TIMEOUT_SECONDS="5")
    with polling_loop(settings, interval=PERIODIC_SECONDS) as (loop, session):
        assert wait_for(lambda: jenkins.counters()["trigger_requests"] == 1, timeout=10)
        assert settled(loop)
        passes, per_second = idle_cost(loop, session)
        assert (passes, jenkins.counters()["trigger_requests"]) == (0, 1)
        assert per_second <= MAX_IDLE_STATEMENTS_PER_SECOND["mysql"], per_second

        # Woken by the poll that saw the change, not by the periodic pass.
        queue.resume("held")
        assert triggered_within(jenkins, 7, WOKEN_WITHIN_SECONDS) is not None
        queue.set_limit("capped", 2)
        assert triggered_within(jenkins, 8, WOKEN_WITHIN_SECONDS) is not None


@ON_MYSQL
def test_a_polling_dispatcher_at_the_global_cap_stays_quiet(make_jenkins, db):
    jenkins = make_jenkins(jobs=[{"path": "deploy", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 60,
                                  "concurrent": True, "notify": False}])
    queue = Queue(db)
    for _ in range(4):
        queue.enqueue("deploy")
    settings = dispatch_settings(jenkins.base_url, LEASE_SECONDS="60", JENKINS_TIMEOUT_SECONDS="5", MAX_IN_FLIGHT="2")
    with polling_loop(settings, interval=PERIODIC_SECONDS) as (loop, session):
        assert wait_for(lambda: jenkins.counters()["trigger_requests"] == 2, timeout=10)
        assert settled(loop)
        passes, per_second = idle_cost(loop, session)
    assert passes == 0 and jenkins.counters()["trigger_requests"] == 2
    assert per_second <= MAX_IDLE_STATEMENTS_PER_SECOND["mysql"], per_second


@ON_MYSQL
def test_an_idle_polling_dispatcher_sends_one_cheap_statement_a_poll_yet_its_poll_sees_an_insert(
        jenkins, database_url, db):
    """It used to answer "work" every poll: a full pass (~5 statements) a poll on an empty queue."""
    with polling_loop(dispatch_settings(jenkins.base_url, LEASE_SECONDS=str(PERIODIC_SECONDS)),
                      interval=PERIODIC_SECONDS) as (loop, session):
        assert settled(loop)
        passes, per_second = idle_cost(loop, session)
        assert passes == 0
        assert per_second <= MAX_IDLE_STATEMENTS_PER_SECOND["mysql"], per_second
        for n in range(1, 4):
            time.sleep(0.37 * n)  # at different points of the poll interval
            insert_plain_sql(database_url, "INSERT INTO jenkins_jobs_queue (job_name) VALUES ('deploy')")
            assert triggered_within(jenkins, n, WOKEN_WITHIN_SECONDS) is not None, n  # by a poll
