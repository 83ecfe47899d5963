"""`jenkins-dispatch serve` through Jenkins outages: the process stays up, /healthz says why, and once Jenkins
is back every job is built exactly once.

`serve` runs as a user runs it (a subprocess, its own HTTP port); Jenkins is the emulator over real HTTP,
whose Notification plugin calls serve's webhook, so jobs finish through callbacks. Jobs are enqueued the way
an application would: a plain INSERT on its own connection. Each build carries a unique MARKER parameter that
the emulator counts, so "built exactly once" is counted by Jenkins, not by us.

One test per kind of outage: a 503 storm on triggers, a Jenkins restart window, Jenkins unreachable (a TCP
forwarder in front of the emulator that closes its port and reopens it), a wrong API token, and a 403 on
one job only (which is that job's problem, not an outage). Each runs on PostgreSQL (serve woken by LISTEN) and on
MySQL/MariaDB (serve polling).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from ..dispatch_helpers import wait_for
from ..engines import sql_for
from ..serve_helpers import ServeProcess, serve_env, start_serve

pytestmark = pytest.mark.both_engines

BUILD_JOB = "svc/build"
LOCKED_JOB = "svc/locked"  # the per-job 403 test's user may read it, not build it
JOBS = [{"path": path, "parameters": [{"name": "DISPATCH_ID"}, {"name": "MARKER"}], "duration_seconds": 0.2,
         "concurrent": True} for path in (BUILD_JOB, LOCKED_JOB)]
# Short settings: the lease must outlast the HTTP timeout (the product refuses to start otherwise).
SHORT = {"LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1"}
INTERVAL = ("--interval", "1")
FAILED_PASSES = 3  # "several": the retry backoff (1 s doubling, jittered) makes this 1.5–3 s


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def servers():
    """Every serve process a test starts is stopped when it ends, whatever happened."""
    started: list[ServeProcess] = []
    yield started
    for served in started:
        served.stop(timeout=10)


def _start(servers: list[ServeProcess], tmp_path, database_url: str, jenkins_url: str, name: str = "serve",
           **overrides: str) -> ServeProcess:
    # wait_healthy=False and our own wait: it also understands the /healthz of the serve before c226501
    # ("database": "ok" instead of an object), so that these tests fail there for their real reason.
    served = start_serve(serve_env(database_url, jenkins_url, **{**SHORT, **overrides}), tmp_path / f"{name}.log",
                         *INTERVAL, wait_healthy=False)
    servers.append(served)
    assert wait_for(lambda: _database_ok(served) or not served.alive(), timeout=15), served.log()[-3000:]
    assert served.alive(), f"serve exited at start ({served.proc.returncode}):\n{served.log()[-3000:]}"
    return served


def _health_doc(served: ServeProcess) -> dict:
    answer = served.health()
    return answer[1] if answer else {}


def _database_ok(served: ServeProcess) -> bool:
    database = _health_doc(served).get("database")
    return database == "ok" or (isinstance(database, dict) and database.get("status") == "ok")


def _jenkins_health(served: ServeProcess) -> dict:
    jenkins = _health_doc(served).get("jenkins")
    return jenkins if isinstance(jenkins, dict) else {}


def _messages(served: ServeProcess) -> list[str]:
    """The `message` of every JSON log line."""
    found = []
    for line in served.log().splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                found.append(str(doc.get("message", "")))
    return found


def _notify_serve(jenkins, served: ServeProcess) -> None:
    """Point the emulator's Notification plugin at this serve's webhook."""
    jenkins.configure(notification={"url": served.notify_url})


def _insert(db, count: int, job: str = BUILD_JOB, **extra: str) -> dict[int, str]:
    """Enqueue like an application: one plain INSERT of ``count`` rows, parameters written as JSON text.
    Returns {row id: marker}."""
    markers = [uuid.uuid4().hex for _ in range(count)]
    value = sql_for(db, postgresql="(:job, CAST(:p{n} AS jsonb))", mysql="(:job, :p{n})")
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES "
           + ", ".join(value.format(n=n) for n in range(count)), job=job,
           **{f"p{n}": json.dumps({"MARKER": marker, **extra}) for n, marker in enumerate(markers)})
    marker_of = sql_for(db, postgresql="parameters->>'MARKER'", mysql="JSON_VALUE(parameters, '$.MARKER')")
    rows = db.run(f"SELECT id, {marker_of} AS marker FROM jenkins_jobs_queue WHERE job_name = :job", job=job)
    return {row["id"]: row["marker"] for row in rows if row["marker"] in markers}


def _rows(db, ids) -> dict[int, dict]:
    listed = ", ".join(str(int(i)) for i in ids) or "NULL"
    return {row["id"]: row for row in db.run(
        "SELECT id, status, attempts, dispatch_id, jenkins_queue_id, jenkins_result, last_error "
        f"FROM jenkins_jobs_queue WHERE id IN ({listed})")}


def _assert_failing(served: ServeProcess, *causes: str) -> dict:
    """Several passes failed on Jenkins as a whole; the process is still up and /healthz says why."""
    wait_for(lambda: not served.alive() or _jenkins_health(served).get("consecutive_failures", 0) >= FAILED_PASSES,
             timeout=25, interval=0.1)
    assert served.alive(), (f"serve exited (code {served.proc.returncode}) during a Jenkins outage:\n"
                            f"{served.log()[-3000:]}")
    status, doc = served.health()
    assert status == 200, doc  # the database answers: the webhook can work, so serve is not "down"
    jenkins = doc["jenkins"]
    assert jenkins["status"] == "unavailable" and jenkins["consecutive_failures"] >= FAILED_PASSES, doc
    assert doc["status"] == "degraded", doc
    reason = jenkins["reason"].lower()
    assert any(cause.lower() in reason for cause in causes), (causes, jenkins["reason"])
    since = datetime.fromisoformat(jenkins["since"])
    assert datetime.now(UTC) - timedelta(minutes=1) < since <= datetime.now(UTC) + timedelta(seconds=1), jenkins
    assert "stopped" not in _messages(served)
    return doc


def _assert_waiting_untouched(db, ids) -> None:
    """Nothing was sent, nothing spent: the rows wait, pending, with all their attempts (a pass that is
    running at this instant may hold them for a few milliseconds)."""
    def untouched():
        rows = _rows(db, ids).values()
        return all(r["status"] == "pending" and r["attempts"] == 0 for r in rows)

    assert wait_for(untouched, timeout=5), list(_rows(db, ids).values())


def _assert_recovered(served: ServeProcess, since_failure: str | None = None) -> None:
    assert wait_for(lambda: not served.alive() or _jenkins_health(served).get("status") == "ok", timeout=25,
                    interval=0.1), _health_doc(served)
    assert served.alive(), served.log()[-3000:]
    status, doc = served.health()
    assert status == 200 and doc["status"] == "ok", doc
    assert doc["jenkins"]["consecutive_failures"] == 0 and doc["jenkins"]["reason"] is None, doc
    if since_failure is not None:
        assert doc["jenkins"]["since"] >= since_failure, doc


def _wait_final(db, served: ServeProcess, ids) -> None:
    def unfinished():
        return [r for r in _rows(db, ids).values() if r["status"] not in ("completed", "failed", "cancelled")]

    wait_for(lambda: not unfinished() or not served.alive(), timeout=30, interval=0.1)
    assert served.alive(), f"serve exited (code {served.proc.returncode}):\n{served.log()[-3000:]}"
    assert unfinished() == []


def _assert_built_once(db, jenkins, served: ServeProcess, markers: dict[int, str], attempts: int | None = 1) -> None:
    """Every row final and completed, built exactly once (counted by Jenkins per MARKER and DISPATCH_ID)."""
    _wait_final(db, served, markers)
    per_marker = jenkins.counters()["triggers_by_parameter"].get("MARKER", {})
    rows = _rows(db, markers)
    wrong = []
    for job_id, marker in markers.items():
        row = rows[job_id]
        if (row["status"], row["jenkins_result"]) != ("completed", "SUCCESS"):
            wrong.append((job_id, row["status"], row["jenkins_result"], row["last_error"]))
        elif per_marker.get(marker) != 1 or jenkins.triggers_for(row["dispatch_id"]) != 1:
            wrong.append((job_id, "built", per_marker.get(marker), jenkins.triggers_for(row["dispatch_id"])))
        elif attempts is not None and row["attempts"] != attempts:
            wrong.append((job_id, "attempts", row["attempts"]))
    assert wrong == [], wrong[:10]


class TcpForwarder:
    """127.0.0.1:port → the emulator. ``refuse()`` closes the port and every connection through it (Jenkins
    unreachable: connection refused); ``accept()`` opens the same port again."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.port = self._open(None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _open(self, port: int | None) -> int:
        # A port below the ephemeral range, so no outgoing connection takes it while it is closed.
        candidates = [port] if port else random.sample(range(20000, 32000), 50)
        for candidate in candidates:
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("127.0.0.1", candidate))
            except OSError:
                listener.close()
                continue
            listener.listen(64)
            listener.settimeout(0.05)
            self._listener = listener
            self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
            self._thread.start()
            return candidate
        raise AssertionError(f"the forwarder could not listen on {candidates[:3]}…")

    def accept(self) -> None:
        assert self._listener is None
        self._open(self.port)

    def refuse(self) -> None:
        listener, self._listener = self._listener, None
        if self._thread is not None:
            self._thread.join()
        if listener is not None:
            listener.close()
        with self._lock:
            open_sockets, self._sockets = list(self._sockets), set()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def _connection(self, client: socket.socket) -> None:
        client.setblocking(True)
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._sockets.update((client, upstream))
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join()
        with self._lock:
            self._sockets.difference_update((client, upstream))
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# --------------------------------------------------------------------------- the outages


def test_a_503_storm_on_triggers_ends_passes_not_the_process(make_jenkins, db, database_url, tmp_path, servers):
    jenkins = make_jenkins(jobs=JOBS)
    served = _start(servers, tmp_path, database_url, jenkins.base_url)
    _notify_serve(jenkins, served)
    storm = jenkins.add_fault(path="buildWithParameters$", status=503)
    markers = _insert(db, 6)

    doc = _assert_failing(served, "503")
    assert storm.hits >= FAILED_PASSES
    _assert_waiting_untouched(db, markers)
    assert jenkins.counters()["items_created"] == 0

    jenkins.clear_faults()
    _assert_built_once(db, jenkins, served, markers)
    _assert_recovered(served, doc["jenkins"]["since"])
    assert served.stop() == 0


def test_a_jenkins_restart_window_is_waited_out(make_jenkins, db, database_url, tmp_path, servers):
    jenkins = make_jenkins(jobs=JOBS)
    served = _start(servers, tmp_path, database_url, jenkins.base_url)
    _notify_serve(jenkins, served)
    # Builds running across the restart (longer than the lease, so the reconciler asks about them too).
    running = _insert(db, 3, EMULATOR_DURATION="4")
    assert wait_for(lambda: jenkins.counters()["builds_started"] == 3, timeout=10), jenkins.counters()
    jenkins.restart(window_seconds=6)
    markers = _insert(db, 6)

    doc = _assert_failing(served, "restarting")
    _assert_waiting_untouched(db, markers)

    # The window ends by itself: Jenkins is back.
    _assert_built_once(db, jenkins, served, markers)
    _assert_built_once(db, jenkins, served, running)
    _assert_recovered(served, doc["jenkins"]["since"])
    assert served.stop() == 0


def test_an_unreachable_jenkins_is_waited_out(make_jenkins, db, database_url, tmp_path, servers):
    jenkins = make_jenkins(jobs=JOBS)
    forwarder = TcpForwarder(jenkins.port)
    try:
        served = _start(servers, tmp_path, database_url, forwarder.url)
        _notify_serve(jenkins, served)
        warm_up = _insert(db, 2)  # through the forwarder, before the outage: it works
        _assert_built_once(db, jenkins, served, warm_up)

        forwarder.refuse()
        markers = _insert(db, 6)
        doc = _assert_failing(served, "cannot connect")
        _assert_waiting_untouched(db, markers)

        forwarder.accept()
        _assert_built_once(db, jenkins, served, markers)
        _assert_recovered(served, doc["jenkins"]["since"])
        assert served.stop() == 0
    finally:
        forwarder.refuse()


def test_a_wrong_api_token_keeps_serve_up_and_spends_nothing(make_jenkins, db, database_url, tmp_path, servers):
    jenkins = make_jenkins(jobs=JOBS)
    served = _start(servers, tmp_path, database_url, jenkins.base_url, name="wrong-token",
                    JENKINS_API_TOKEN="not-the-token")
    markers = _insert(db, 5)

    doc = _assert_failing(served, "JENKINS_API_TOKEN")
    assert "credentials" in doc["jenkins"]["reason"], doc
    _assert_waiting_untouched(db, markers)
    assert jenkins.counters()["trigger_requests"] == 0

    # A token is read at start: the operator fixes it and restarts serve.
    assert served.stop() == 0
    fixed = _start(servers, tmp_path, database_url, jenkins.base_url, name="right-token")
    _notify_serve(jenkins, fixed)
    _assert_built_once(db, jenkins, fixed, markers)
    _assert_recovered(fixed)
    assert fixed.stop() == 0


def test_a_403_on_one_job_fails_that_row_and_dispatch_goes_on(make_jenkins, db, database_url, tmp_path, servers):
    users = {"admin": {"api_token": "admin-token"},
             "dispatch": {"api_token": "dispatch-token", "permissions": {"deny_build": [LOCKED_JOB]}}}
    jenkins = make_jenkins(jobs=JOBS, users=users)
    served = _start(servers, tmp_path, database_url, jenkins.base_url, JENKINS_USER="dispatch",
                    JENKINS_API_TOKEN="dispatch-token")
    _notify_serve(jenkins, served)

    for wave in range(2):  # the second wave proves that passes went on after the 403
        locked = _insert(db, 1, job=LOCKED_JOB)
        markers = _insert(db, 5)
        _assert_built_once(db, jenkins, served, markers)
        _wait_final(db, served, locked)
        (job_id, marker), = locked.items()
        row = _rows(db, locked)[job_id]
        assert row["status"] == "failed", (wave, row)
        assert "Job/Build" in row["last_error"] and "dispatch" in row["last_error"], row["last_error"]
        assert jenkins.counters()["triggers_by_parameter"].get("MARKER", {}).get(marker) is None
        assert served.alive(), served.log()[-3000:]

    status, doc = served.health()
    assert status == 200 and doc["status"] == "ok", doc
    assert doc["jenkins"]["status"] == "ok" and doc["jenkins"]["consecutive_failures"] == 0, doc
    assert not any("Jenkins unavailable" in m or "pass stopped" in m for m in _messages(served)), (
        served.log()[-3000:])
    assert served.stop() == 0
