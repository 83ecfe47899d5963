"""`jenkins-dispatch serve` through database outages: its sessions stay bounded, /healthz tells the truth.

serve runs in a subprocess whose DATABASE_URL points at a TCP proxy in front of the database (PostgreSQL, and
MySQL/MariaDB: each test runs on both); the test itself talks to the database directly. Jobs are plain SQL
INSERTs, the Jenkins emulator triggers them and calls serve's webhook back over real HTTP. Meanwhile the path
to the database is cut and restored, serve's sessions are killed (pg_terminate_backend; MySQL's KILL), /healthz
and the webhook are hit from many concurrent clients, and a sampler counts serve's server-side sessions
(pg_stat_activity; information_schema.processlist) every ~100 ms.

serve's sessions are the server's sessions whose client port is one of the proxy's upstream ports (so sessions
of other tests in this pytest process never count); on PostgreSQL their application_name starts with
"jenkins-dispatch" (-serve for the dispatcher loop, -webhook for the pool; MySQL shows no such name without
performance_schema). Bound: WEBHOOK_DB_POOL_SIZE + 1.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database, DatabaseError

from ..dispatch_helpers import WEBHOOK_SECRET, most_at_once, wait_for
from ..engines import numbers, sql_for
from ..serve_helpers import ServeProcess, http_get, serve_env, start_serve
from ..tcp_proxy import TcpProxy

POOL_SIZE = 3
SESSION_BOUND = POOL_SIZE + 1  # the webhook's pool + the dispatcher loop's one session
APP_PREFIX = "jenkins-dispatch"
JOB = "outage"
CLIENTS = 12
FINAL = ("completed", "failed", "cancelled")
KEYS = ("outage:a", "outage:b")  # the concurrency keys the waves take in turn, each capped at KEY_CAP
KEY_CAP = 2

pytestmark = pytest.mark.both_engines


# --------------------------------------------------------------------------- serve behind a proxy


def _upstream(database_url: str) -> tuple[str, int] | str:
    where = parse_database_url(database_url)
    return where.unix_socket or (where.host, where.port)


def _direct(database_url: str, name: str) -> Database:
    return Database(parse_database_url(database_url), application_name=name)


def _through(proxy: TcpProxy, database_url: str) -> str:
    """``database_url`` with the proxy as its server: the same user, password and options, whatever server the
    tests were given (a Unix socket's ``host=`` option, the embedded server's, is dropped: the proxy is TCP)."""
    parts = urlsplit(database_url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "host"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _start_serve_behind(proxy: TcpProxy, database_url: str, jenkins_url: str, log_path) -> ServeProcess:
    env = serve_env(_through(proxy, database_url), jenkins_url,
                    WEBHOOK_DB_POOL_SIZE=str(POOL_SIZE), LEASE_SECONDS="4", JENKINS_TIMEOUT_SECONDS="2",
                    DB_CONNECT_TIMEOUT_SECONDS="2", BATCH_SIZE="8", MAX_PARALLEL_TRIGGERS="4")
    serve = start_serve(env, log_path, "--interval", "1", wait_healthy=False)
    if not wait_for(lambda: _healthy(serve.health()) or not serve.alive(), timeout=20):
        serve.stop()
        raise AssertionError(f"serve never reported a healthy database:\n{serve.log()[-3000:]}")
    return serve


def _database_state(doc: Any) -> tuple[str | None, str | None]:
    """(status, reason) of the database in a /healthz document; ('<old shape>', text) if it is not an object."""
    database = doc.get("database") if isinstance(doc, dict) else None
    if isinstance(database, dict):
        return database.get("status"), database.get("reason")
    return "<not an object>", None if database is None else str(database)


def _healthy(answer) -> bool:
    if answer is None:
        return False
    status, doc = answer
    return status == 200 and (_database_state(doc)[0] == "ok" or (isinstance(doc, dict) and doc.get("database") == "ok"))


class ServeSessions:
    """serve's server-side sessions, seen from a direct connection."""

    def __init__(self, database_url: str, proxy: TcpProxy, name: str, terminated: set[int] | None = None):
        self.db = _direct(database_url, name)
        self.proxy = proxy
        # Sessions killed here, never counted again: the server ends a killed session on its own time (a
        # PostgreSQL backend after its FATAL; a MariaDB thread shows as 'Killed' until it notices), while serve
        # has already opened its replacement. Shared with the sampler, which would otherwise count both (seen
        # once: 5 sessions against the bound of 4, 0.5 s after a KILL, in a run on 8 workers).
        self.terminated: set[int] = set() if terminated is None else terminated

    def list(self) -> list[dict[str, Any]]:
        ports = self.proxy.upstream_ports(ever=True)
        rows = self.db.run(sql_for(
            self.db,
            postgresql="SELECT pid, application_name, client_port FROM pg_stat_activity "
                       "WHERE datname = current_database() AND backend_type = 'client backend'",
            # HOST is 'address:port'; no session names without performance_schema.
            mysql=f"SELECT id AS pid, '{APP_PREFIX}' AS application_name, "
                  "CAST(SUBSTRING_INDEX(host, ':', -1) AS UNSIGNED) AS client_port "
                  "FROM information_schema.processlist WHERE db = DATABASE() AND host LIKE '%:%'"))
        return [r for r in rows if r["client_port"] in ports and r["pid"] not in self.terminated]

    def terminate_all(self) -> int:
        victims = [r["pid"] for r in self.list()]
        self.terminated.update(victims)
        for pid in victims:
            if self.db.dialect == "mysql":
                with suppress(DatabaseError):  # it ended between the listing and the KILL
                    self.db.run(f"KILL {int(pid)}")
            else:
                self.db.run(f"SELECT pg_terminate_backend({int(pid)})")
        return len(victims)

    def close(self) -> None:
        self.db.close()


@dataclass
class Sample:
    t: float
    count: int
    names: dict[str, int]


@dataclass
class Recorder:
    """What the background threads saw; lists only appended to (atomic under the GIL)."""

    t0: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    health: list[tuple[float, int, str | None, str | None]] = field(default_factory=list)  # t, code, db status, reason
    health_errors: list[str] = field(default_factory=list)
    webhook: Counter = field(default_factory=Counter)  # HTTP status → count
    webhook_errors: list[str] = field(default_factory=list)
    dead_at: float | None = None
    thread_errors: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.t0

    @property
    def max_sessions(self) -> int:
        return max((s.count for s in self.samples), default=0)

    def over(self, bound: int) -> list[Sample]:
        return [s for s in self.samples if s.count > bound]


class Background:
    """Threads that loop until stopped; a crash is recorded, never silent."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def loop(self, name: str, step: Callable[[], None], pause: float, setup=None, teardown=None) -> None:
        def run() -> None:
            state = setup() if setup else None
            try:
                while not self.stop.is_set():
                    step(state) if setup else step()
                    self.stop.wait(pause)
            except Exception as exc:  # recorded and asserted on
                self.recorder.thread_errors.append(f"{name}: {type(exc).__name__}: {exc}")
            finally:
                if teardown:
                    teardown(state)

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(15)


class KeepAlive:
    """One HTTP/1.1 connection reused for every request (reopened after an error)."""

    def __init__(self, base: str, timeout: float = 10.0):
        parts = urlsplit(base)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            self.conn.request(method, path, body=body, headers=headers)
            answer = self.conn.getresponse()
            data = answer.read()
            if answer.will_close:
                self.close()
            return answer.status, json.loads(data) if data else None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _one_shot(base: str, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    """A request on a connection of its own (a new server thread each time)."""
    client = KeepAlive(base)
    try:
        return client.request(method, path, body)
    finally:
        client.close()


def _unknown_callback() -> bytes:
    """A well-formed COMPLETED callback for a DISPATCH_ID nobody sent: the webhook needs the database to
    say so (404), or answers 503 without one."""
    return json.dumps({"name": JOB, "url": f"job/{JOB}/", "build": {
        "number": 1, "queue_id": 999_999, "phase": "COMPLETED", "status": "SUCCESS", "url": f"job/{JOB}/1/",
        "parameters": {"DISPATCH_ID": f"flood-{uuid.uuid4().hex}"}}}).encode()


def _start_sampler(bg: Background, rec: Recorder, database_url: str, proxy: TcpProxy, serve: ServeProcess,
                   sessions_holder: list, killed: set[int]) -> None:
    def setup():
        sessions = ServeSessions(database_url, proxy, "jd-outage-sampler", terminated=killed)
        sessions_holder.append(sessions)
        return sessions

    def step(sessions: ServeSessions) -> None:
        rows = sessions.list()
        rec.samples.append(Sample(rec.now(), len(rows), dict(Counter(r["application_name"] for r in rows))))
        if rec.dead_at is None and not serve.alive():
            rec.dead_at = rec.now()

    bg.loop("session-sampler", step, 0.1, setup=setup, teardown=lambda s: s.close())


def _start_health_callers(bg: Background, rec: Recorder, base: str, n: int, pause: float) -> None:
    def step(client: KeepAlive) -> None:
        try:
            code, doc = client.request("GET", "/healthz")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            rec.health_errors.append(f"{rec.now():.2f}s {type(exc).__name__}: {exc}")
            return
        rec.health.append((rec.now(), code, *_database_state(doc)))

    for i in range(n):
        bg.loop(f"healthz-{i}", step, pause, setup=lambda: KeepAlive(base), teardown=lambda c: c.close())


def _start_webhook_callers(bg: Background, rec: Recorder, base: str, n: int, pause: float,
                           keep_alive: Callable[[int], bool]) -> None:
    path = f"/jenkins/notify?token={WEBHOOK_SECRET}"

    def caller(i: int):
        def step(client: KeepAlive | None) -> None:
            try:
                if client is None:
                    code, _ = _one_shot(base, "POST", path, _unknown_callback())
                else:
                    code, _ = client.request("POST", path, _unknown_callback())
            except (OSError, http.client.HTTPException, ValueError) as exc:
                rec.webhook_errors.append(f"{rec.now():.2f}s {type(exc).__name__}: {exc}")
                return
            rec.webhook[code] += 1

        setup = (lambda: KeepAlive(base)) if keep_alive(i) else (lambda: None)
        return step, setup

    for i in range(n):
        step, setup = caller(i)
        bg.loop(f"webhook-{i}", step, pause, setup=setup, teardown=lambda c: c and c.close())


def _summary(rec: Recorder) -> str:
    peaks = sorted(rec.samples, key=lambda s: -s.count)[:3]
    return (f"{len(rec.samples)} samples, max {rec.max_sessions} sessions (bound {SESSION_BOUND}); peaks "
            f"{[(round(s.t, 2), s.count, s.names) for s in peaks]}; healthz answers {len(rec.health)} "
            f"(errors {len(rec.health_errors)}), webhook answers {dict(rec.webhook)} "
            f"(errors {len(rec.webhook_errors)})")


def _first_traceback(serve: ServeProcess) -> str | None:
    log = serve.log()
    if "Traceback" in log:
        at = log.index("Traceback")
        return log[max(0, at - 500):at + 2500]
    return None


# --------------------------------------------------------------------------- tests


def test_serve_rides_out_database_cuts_and_killed_sessions(make_jenkins, database_url, db, queue, tmp_path):
    """The claims run in fair-share order under key caps (each wave's rows hold one of two keys capped at 2, and
    one of three teams' fairness keys): the keyed claim, and on MySQL the pass's turns, ride out the outage too."""
    jenkins = make_jenkins(executors=4, jobs=[{"path": JOB, "parameters": [{"name": "DISPATCH_ID"}, {"name": "WAVE"}],
                                               "duration_seconds": 0.3, "concurrent": True}])
    for key in KEYS:
        queue.set_key_limit(key, KEY_CAP)
    rec = Recorder()
    problems: list[str] = []
    notes: dict[str, Any] = {}
    with ExitStack() as stack:
        proxy = stack.enter_context(TcpProxy(_upstream(database_url)))
        serve = _start_serve_behind(proxy, database_url, jenkins.base_url, tmp_path / "serve.log")
        stack.callback(serve.stop)
        jenkins.configure(notification={"url": serve.notify_url, "timeout_seconds": 10})
        killer = ServeSessions(database_url, proxy, "jd-outage-killer")
        stack.callback(killer.close)
        enqueuer = _direct(database_url, "jd-outage-enqueuer")
        stack.callback(enqueuer.close)

        bg = Background(rec)
        stack.callback(bg.close)
        sampler_sessions: list[ServeSessions] = []
        _start_sampler(bg, rec, database_url, proxy, serve, sampler_sessions, killer.terminated)
        _start_health_callers(bg, rec, serve.base, CLIENTS, pause=0.1)
        _start_webhook_callers(bg, rec, serve.base, CLIENTS, pause=0.1, keep_alive=lambda i: i % 2 == 0)

        waves = iter(range(1, 1000))

        def enqueue(n: int = 2) -> None:
            wave = next(waves)
            parameters = sql_for(enqueuer, postgresql=f"jsonb_build_object('WAVE', '{wave}')",
                                 mysql=f"JSON_OBJECT('WAVE', '{wave}')")
            enqueuer.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, concurrency_key, fairness_key) "
                         f"SELECT '{JOB}', {parameters}, '{KEYS[wave % len(KEYS)]}', 'team-{wave % 3}' "
                         f"FROM {numbers(enqueuer, n)}")

        enqueuing, enqueuer_idle = threading.Event(), threading.Event()
        enqueuing.set()

        def enqueue_step() -> None:
            if enqueuing.is_set():
                enqueue()
            else:  # one step in one thread: any insert the enqueuer made before this one has landed
                enqueuer_idle.set()

        bg.loop("enqueuer", enqueue_step, 0.4)

        def completed() -> int:
            return db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status = 'completed'")[0]["n"]

        # 1. Work flows: jobs are triggered and completed by callbacks.
        assert wait_for(lambda: completed() >= 5, timeout=20), serve.log()[-3000:]
        notes["flowing_at_s"] = round(rec.now(), 2)

        # 2. Kill serve's sessions: it reopens them.
        notes["terminated"] = [killer.terminate_all()]
        time.sleep(1.5)

        # 3. Cut the path for 6 s while work and callbacks keep coming.
        done_before_cut = completed()
        t_cut = rec.now()
        notes["reset_by_cut"] = proxy.cut()
        if not wait_for(lambda: not killer.list(), timeout=5):
            problems.append(f"serve's backends outlived the cut: {killer.list()}")
        host = f"127.0.0.1:{proxy.port}"

        def reports_outage() -> bool:
            answer = http_get(serve.base + "/healthz")
            if answer is None or answer[0] != 503:
                return False
            status, reason = _database_state(answer[1])
            notes["outage_reason"] = reason
            return status == "unavailable" and host in (reason or "")

        if not wait_for(reports_outage, timeout=5, interval=0.1):
            problems.append(f"/healthz never said 503 / database unavailable naming {host} during the cut: "
                            f"{http_get(serve.base + '/healthz')}")
        while rec.now() - t_cut < 6:
            time.sleep(0.1)
        t_restore = rec.now()
        proxy.restore()

        # 4. Back to healthy, then more killed sessions while work goes on.
        if not wait_for(lambda: _healthy(http_get(serve.base + "/healthz")), timeout=20, interval=0.1):
            problems.append(f"/healthz not back to 200 / database ok 20 s after the restore: "
                            f"{http_get(serve.base + '/healthz')}")
        notes["recovered_after_s"] = round(rec.now() - t_restore, 2)
        for _ in range(2):
            notes["terminated"].append(killer.terminate_all())
            time.sleep(1.0)
        enqueuing.clear()

        # 5. Every job ends, each built exactly once.
        def all_final() -> bool:
            return db.run("SELECT count(*) AS n FROM jenkins_jobs_queue "
                          "WHERE status NOT IN ('completed', 'failed', 'cancelled')")[0]["n"] == 0

        if not enqueuer_idle.wait(10):
            problems.append("the enqueuer never stopped enqueuing")
        t_drain = rec.now()
        finished = wait_for(all_final, timeout=40, interval=0.2)
        notes["drained_in_s"] = round(rec.now() - t_drain, 2)
        bg.close()
        t_end = rec.now()
        healthz_after = http_get(serve.base + "/healthz")
        alive_at_end = serve.alive()
        exit_code = serve.stop()

    rows = db.run("SELECT id, status, dispatch_id, last_error FROM jenkins_jobs_queue ORDER BY id")
    builds = Counter(value for build in jenkins.builds(JOB) for definition, value in build.parameters
                     if definition.name == "DISPATCH_ID")
    print(f"\nouter test: {len(rows)} jobs, {done_before_cut} completed before the cut; {_summary(rec)}; "
          f"cut at {t_cut:.1f}s, restore at {t_restore:.1f}s; {notes}")

    over = rec.over(SESSION_BOUND)
    if over:
        problems.append(f"serve held more than {SESSION_BOUND} sessions in {len(over)} samples, max "
                        f"{rec.max_sessions}: {[(round(s.t, 2), s.count, s.names) for s in over[:5]]}")
    names = {name for s in rec.samples for name in s.names}
    if any(not name.startswith(APP_PREFIX) for name in names):
        problems.append(f"sessions through the proxy with foreign application names: {names}")
    in_cut = [h for h in rec.health if t_cut + 0.5 < h[0] < t_restore]
    if not any(code == 503 and status == "unavailable" and host in (reason or "") for _, code, status, reason in in_cut):
        problems.append(f"the concurrent /healthz callers never saw 503 / unavailable / {host} during the cut "
                        f"({Counter((code, status) for _, code, status, _ in in_cut)})")
    last = [h for h in rec.health if h[0] > t_end - 1.0]
    if not _healthy(healthz_after) or any(code != 200 for _, code, _, _ in last[-CLIENTS:]):
        problems.append(f"/healthz not 200 at the end: {healthz_after}")
    if rec.health_errors:
        problems.append(f"{len(rec.health_errors)} /healthz requests failed: {rec.health_errors[:3]}")
    if rec.webhook_errors:
        problems.append(f"{len(rec.webhook_errors)} webhook requests failed: {rec.webhook_errors[:3]}")
    unexpected = {code: n for code, n in rec.webhook.items() if code not in (404, 503)}
    if unexpected:
        problems.append(f"webhook answered unknown DISPATCH_IDs with {unexpected} (expected 404, or 503 when down)")
    if rec.thread_errors:
        problems.append(f"test threads crashed: {rec.thread_errors}")
    if rec.dead_at is not None or not alive_at_end:
        problems.append(f"serve died at {rec.dead_at}s (exit {serve.proc.poll()})")
    if exit_code != 0:
        problems.append(f"serve exited {exit_code} on SIGTERM")
    if not finished:
        problems.append(f"not every job is final: {Counter(r['status'] for r in rows)}")
    not_completed = [r for r in rows if r["status"] != "completed"]
    if not_completed:
        problems.append(f"{len(not_completed)} jobs did not complete: {not_completed[:3]}")
    twice = {r["dispatch_id"]: jenkins.triggers_for(r["dispatch_id"]) for r in rows
             if jenkins.triggers_for(r["dispatch_id"]) != 1 or builds.get(r["dispatch_id"]) != 1}
    if twice or sum(builds.values()) != len(rows):
        problems.append(f"not built exactly once: {len(rows)} jobs, {sum(builds.values())} builds; "
                        f"DISPATCH_ID → queue items: {dict(list(twice.items())[:5])}")
    spans: dict[str, list[tuple[float, float]]] = {key: [] for key in KEYS}
    for build in jenkins.builds(JOB):
        wave = int(dict((definition.name, value) for definition, value in build.parameters)["WAVE"])
        spans[KEYS[wave % len(KEYS)]].append((build.started, build.started + build.duration_ms / 1000))
    at_once = {key: most_at_once(key_spans) for key, key_spans in spans.items()}
    if any(n > KEY_CAP for n in at_once.values()):
        problems.append(f"a key's cap of {KEY_CAP} did not hold at Jenkins: most builds at once per key {at_once}")
    traceback = _first_traceback(serve)
    if traceback:
        problems.append(f"serve's log has a traceback:\n{traceback}")
    assert len(rows) >= 20
    assert not problems, "\n".join(problems) + f"\n{_summary(rec)}\nserve log tail:\n{serve.log()[-2000:]}"


def test_concurrent_healthz_and_webhook_callers_stay_within_the_pool(jenkins, database_url, db, tmp_path):
    rec = Recorder()
    with ExitStack() as stack:
        proxy = stack.enter_context(TcpProxy(_upstream(database_url)))
        serve = _start_serve_behind(proxy, database_url, jenkins.base_url, tmp_path / "serve.log")
        stack.callback(serve.stop)
        sessions = ServeSessions(database_url, proxy, "jd-pool-probe")
        stack.callback(sessions.close)
        assert wait_for(lambda: len(sessions.list()) >= 1, timeout=5)  # the dispatcher loop's session
        time.sleep(0.5)
        before = proxy.stats().forwarded

        # /healthz alone: 12 keep-alive callers, answered from memory: no session is opened.
        bg = Background(rec)
        stack.callback(bg.close)
        _start_sampler(bg, rec, database_url, proxy, serve, [], killed=set())  # nothing is killed here
        _start_health_callers(bg, rec, serve.base, CLIENTS, pause=0.02)
        assert wait_for(lambda: len(rec.health) >= 300, timeout=20), _summary(rec)
        healthz_sessions_opened = proxy.stats().forwarded - before
        healthz_max = rec.max_sessions

        # ... plus 12 keep-alive webhook callers: at most the pool, plus the loop's session.
        _start_webhook_callers(bg, rec, serve.base, CLIENTS, pause=0.02, keep_alive=lambda i: True)
        assert wait_for(lambda: sum(rec.webhook.values()) >= 300, timeout=30), _summary(rec)
        at_the_end = len(sessions.list())  # every caller's connection is still open here
        bg.close()
        opened_total = proxy.stats().forwarded
        alive = serve.alive()

    print(f"\npool test: healthz-only max {healthz_max} sessions, opened {healthz_sessions_opened}; "
          f"{_summary(rec)}; sessions ever opened {opened_total}, at the end {at_the_end}")
    assert rec.max_sessions <= SESSION_BOUND and at_the_end <= SESSION_BOUND, _summary(rec)
    assert healthz_sessions_opened == 0, f"{healthz_sessions_opened} sessions opened for /healthz alone"
    assert opened_total <= SESSION_BOUND, f"{opened_total} sessions opened in all: no churn expected"
    assert {code for _, code, _, _ in rec.health} == {200}, Counter(code for _, code, _, _ in rec.health)
    assert set(rec.webhook) == {404}, rec.webhook
    assert not rec.health_errors and not rec.webhook_errors and not rec.thread_errors, (
        rec.health_errors[:3], rec.webhook_errors[:3], rec.thread_errors)
    assert alive
    assert _first_traceback(serve) is None, _first_traceback(serve)
