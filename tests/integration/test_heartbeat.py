"""Dispatcher heartbeats: every dispatcher (serve, Lambda, CLI) records who it is and how its last pass ended;
`stats` shows the live ones; a broken heartbeat never breaks a pass."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.heartbeat import Heartbeat
from jenkins_dispatch.dispatching.wakeup import work_signal
from jenkins_dispatch.errors import DatabaseUnavailable
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import dispatch_settings, wait_for
from ..stores import Queue


def ago(**delta) -> datetime:
    """A moment that long before now, handed to the SQL as a parameter (the same text on every dialect)."""
    return datetime.now(UTC) - timedelta(**delta)


@pytest.fixture
def no_dispatchers(db):
    """The dispatcher table as if no dispatcher had ever run (the shared fixture empties only the queue's)."""
    db.run("DELETE FROM jenkins_dispatchers")
    return db


pytestmark = pytest.mark.both_engines


# --------------------------------------------------------------------------- pure decisions


# --------------------------------------------------------------------------- the table


def test_a_heartbeat_is_one_row_per_dispatcher_updated_each_pass(no_dispatchers):
    queue = Queue(no_dispatchers)
    beat = Heartbeat("serve", interval=10.0)
    beat.record(queue, "ok", "queue empty")
    beat.record(queue, "ok", "cap reached", jenkins_ok=True)
    [row] = queue.dispatchers()
    assert (row["id"], row["kind"], row["passes"], row["last_outcome"], row["last_detail"], row["live"]) == (
        beat.dispatcher_id, "serve", 2, "ok", "cap reached", True)
    assert row["last_pass_seconds"] < 5 and row["pid"] > 0 and row["host"]
    assert beat.dispatcher_id.startswith("serve@")


def test_a_dispatcher_not_seen_within_its_window_is_not_live_and_one_gone_a_day_is_removed(no_dispatchers):
    queue = Queue(no_dispatchers)
    Heartbeat("serve", dispatcher_id="serve@old:1", interval=10.0).record(queue, "ok", "queue empty")
    Heartbeat("serve", dispatcher_id="serve@gone:1", interval=10.0).record(queue, "ok", "queue empty")
    no_dispatchers.run("UPDATE jenkins_dispatchers SET last_pass_at = :at WHERE id = 'serve@old:1'",
                       at=ago(minutes=10))
    no_dispatchers.run("UPDATE jenkins_dispatchers SET last_pass_at = :at WHERE id = 'serve@gone:1'",
                       at=ago(hours=25))
    assert {r["id"]: r["live"] for r in queue.dispatchers()} == {"serve@old:1": False}
    Heartbeat("lambda", dispatcher_id="lambda@stream-1").record(queue, "ok", "queue empty")
    assert {r["id"]: r["live"] for r in queue.dispatchers()} == {"lambda@stream-1": True, "serve@old:1": False}
    kept = no_dispatchers.run("SELECT id FROM jenkins_dispatchers ORDER BY id")
    assert [r["id"] for r in kept] == ["lambda@stream-1", "serve@old:1"]  # the next heartbeat removed it


def test_jenkins_unavailable_since_is_kept_until_jenkins_answers_again(no_dispatchers):
    queue = Queue(no_dispatchers)
    beat = Heartbeat("serve", interval=10.0)
    assert queue.jenkins_outage() is None
    beat.record(queue, "jenkins_unavailable", "Jenkins unavailable: HTTP 503", jenkins_ok=False,
                jenkins_reason="Jenkins unavailable: HTTP 503")
    first = queue.jenkins_outage()
    assert first["reason"] == "Jenkins unavailable: HTTP 503" and first["dispatcher_id"] == beat.dispatcher_id
    beat.record(queue, "jenkins_unavailable", "HTTP 401", jenkins_ok=False, jenkins_reason="HTTP 401")
    beat.record(queue, "ok", "queue empty")  # nothing to send: Jenkins not asked, the outage stands
    again = queue.jenkins_outage()
    assert again["since"] == first["since"] and again["reason"] == "HTTP 401"
    beat.record(queue, "ok", "queue empty", jenkins_ok=True)
    assert queue.jenkins_outage() is None


def test_the_latest_word_about_jenkins_wins_among_live_dispatchers(no_dispatchers):
    queue = Queue(no_dispatchers)
    Heartbeat("serve", dispatcher_id="serve@a:1").record(queue, "jenkins_unavailable", "x", jenkins_ok=False,
                                                          jenkins_reason="HTTP 503")
    Heartbeat("serve", dispatcher_id="serve@b:1").record(queue, "ok", "queue empty", jenkins_ok=True)
    assert queue.jenkins_outage() is None
    Heartbeat("serve", dispatcher_id="serve@b:1").record(queue, "jenkins_unavailable", "y", jenkins_ok=False,
                                                          jenkins_reason="HTTP 401")
    assert queue.jenkins_outage()["reason"] == "HTTP 401"


def test_a_failing_heartbeat_never_breaks_a_pass(jenkins, queue, no_dispatchers, monkeypatch, caplog):
    def refuse(*_args, **_kwargs):
        raise DatabaseUnavailable("lost the connection to PostgreSQL at db.example:5432")

    caplog.set_level(logging.WARNING, logger="jenkins-dispatch")
    monkeypatch.setattr(Queue, "record_heartbeat", refuse)
    queue.enqueue("deploy")
    summary = run_pass(dispatch_settings(jenkins.base_url), heartbeat=Heartbeat("cli"))
    assert summary["triggered"] == 1
    assert "could not record the dispatcher's heartbeat" in caplog.text


# --------------------------------------------------------------------------- every kind of dispatcher records


def test_the_loop_records_every_pass_even_idle(jenkins, queue, no_dispatchers):
    """An idle `serve` still passes every --interval, so its heartbeat stays fresh without work."""
    settings = dispatch_settings(jenkins.base_url)
    stop = threading.Event()
    beat = Heartbeat("serve", interval=0.2)
    with Database(settings.database) as session:
        loop = DispatchLoop(settings, session, work_signal(session, stop, poll_seconds=0.2), interval=0.2, shutdown=stop,
                            heartbeat=beat)
        runner = threading.Thread(target=loop.run)
        runner.start()
        try:
            assert wait_for(lambda: [r["passes"] for r in queue.dispatchers()] >= [4], timeout=10)
            [row] = queue.dispatchers()
            assert (row["kind"], row["last_outcome"], row["live"]) == ("serve", "ok", True)
            assert row["last_pass_seconds"] < 2
        finally:
            stop.set()
            runner.join(10)
    # Stopped on request (SIGTERM): it says so, and is no longer counted as live.
    [row] = queue.dispatchers()
    assert (row["last_outcome"], row["live"]) == ("stopped", False)


@contextmanager
def _serve_loop(settings):
    """A `serve`-like dispatch loop with its heartbeat, on a thread, for the ``with`` block."""
    stop = threading.Event()
    with Database(settings.database) as session:
        loop = DispatchLoop(settings, session, work_signal(session, stop, poll_seconds=0.2), interval=0.2, shutdown=stop,
                            heartbeat=Heartbeat("serve", interval=0.2))
        runner = threading.Thread(target=loop.run)
        runner.start()
        try:
            yield loop
        finally:
            stop.set()
            runner.join(20)


def test_the_loop_records_jenkins_unavailable_and_its_end(jenkins, queue, no_dispatchers):
    queue.enqueue("deploy")
    jenkins.add_fault(path="", status=503)
    with _serve_loop(dispatch_settings(jenkins.base_url)):
        assert wait_for(lambda: queue.jenkins_outage() is not None, timeout=10)
        [row] = queue.dispatchers()
        assert row["last_outcome"] == "jenkins_unavailable" and "503" in row["jenkins_reason"]
        jenkins.clear_faults()
        assert wait_for(lambda: queue.jenkins_outage() is None, timeout=30)
        assert queue.dispatchers()[0]["last_outcome"] == "ok"


def test_the_loop_records_jenkins_back_even_with_nothing_to_send(jenkins, queue, no_dispatchers):
    """The pass that finds Jenkins back by asking whoAmI (nothing was due) says so in the dispatcher's row too."""
    job_id = queue.enqueue("deploy").id
    jenkins.add_fault(path="", status=503)
    with _serve_loop(dispatch_settings(jenkins.base_url)):
        assert wait_for(lambda: queue.jenkins_outage() is not None, timeout=10)
        assert wait_for(lambda: queue.cancel_pending(job_id), timeout=10)  # nothing left to send
        jenkins.clear_faults()
        assert wait_for(lambda: queue.jenkins_outage() is None, timeout=30), queue.dispatchers()


class LambdaContext:
    function_name = "jd-dispatcher"
    log_stream_name = "2026/11/30/[$LATEST]0123abcd"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self):
        return 12_000


def test_a_single_pass_lambda_records_its_container(jenkins, queue, no_dispatchers, monkeypatch):
    from jenkins_dispatch import lambda_entry, runtime
    from jenkins_dispatch.lambda_entry import run_invocation

    # A new container: its heartbeat counts passes in this process, and the test may already have run here on
    # the other engine (both_engines), which would make these passes 3 and 4.
    monkeypatch.setattr(lambda_entry, "_heartbeats", {})
    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token",
                       "LEASE_SECONDS": "3", "JENKINS_TIMEOUT_SECONDS": "1", "DISPATCHER_MODE": "single"}.items():
        monkeypatch.setenv(key, value)
    runtime.reset()
    try:
        run_invocation(LambdaContext())
        run_invocation(LambdaContext())
    finally:
        runtime.reset()
    [row] = queue.dispatchers()
    assert (row["id"], row["kind"], row["passes"], row["live"]) == (
        "lambda@jd-dispatcher/2026/11/30/[$LATEST]0123abcd", "lambda", 2, True)


def _cli(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], env=env, capture_output=True,
                          text=True, timeout=60)


def test_cli_dispatch_records_a_pass_and_stats_shows_the_live_dispatchers(jenkins, queue, no_dispatchers):
    import os

    env = dict(os.environ, JENKINS_URL=jenkins.base_url, JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token",
               LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1")
    proc = _cli("stats", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "no dispatcher has passed in the last day" in proc.stdout
    assert _cli("dispatch", env=env).returncode == 0
    [row] = queue.dispatchers()
    assert (row["kind"], row["last_outcome"], row["passes"]) == ("cli", "ok", 1)
    proc = _cli("stats", env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("dispatchers:")]
    assert "1 live" in line and row["id"] in line and "ok (queue empty)" in line
    doc = json.loads(_cli("stats", "--json", env=env).stdout)
    [shown] = doc["dispatchers"]
    assert (shown["id"], shown["live"], shown["last_outcome"]) == (row["id"], True, "ok")


def test_stats_says_plainly_when_no_dispatcher_is_live(queue, no_dispatchers, capsys):
    from jenkins_dispatch.cli import main

    Heartbeat("serve", dispatcher_id="serve@old:7", interval=10.0).record(queue, "ok", "queue empty")
    no_dispatchers.run("UPDATE jenkins_dispatchers SET last_pass_at = :at", at=ago(hours=2))
    assert main(["stats"]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("dispatchers:")]
    assert line.startswith("dispatchers: none live") and "serve@old:7" in line and "2h00m ago" in line


# --------------------------------------------------------------------------- several controllers


def _two_controllers(make_jenkins):
    """Controllers `default` (answers) and `b` (503 to everything), as settings and as the CLI's environment."""
    import os

    a, b = make_jenkins(), make_jenkins()
    b.add_fault(path="", status=503)
    controllers = json.dumps({"b": {"url": b.base_url, "user": "admin", "api_token": "admin-token"}})
    env = dict(os.environ, JENKINS_URL=a.base_url, JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token",
               LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1", JENKINS_CONTROLLERS=controllers)
    return dispatch_settings(a.base_url, JENKINS_CONTROLLERS=controllers), env


def _controllers_of(queue) -> dict:
    rows = queue.dispatchers()
    return (rows[0].get("controllers") or {}) if rows else {}


def test_the_heartbeat_records_the_controllers_served_and_each_ones_breaker(make_jenkins, queue, no_dispatchers):
    settings, env = _two_controllers(make_jenkins)
    # Queued 30 s in Jenkins: still in flight when `stats` is read, however slowly this machine gets there (a
    # 0.15 s build was settled by the reconciler first on a loaded machine).
    on_default = queue.enqueue("waiting").id
    queue.enqueue("deploy", controller="b")
    with _serve_loop(settings):
        assert wait_for(lambda: queue.get(on_default)["jenkins_queue_id"] is not None, timeout=15)
        assert wait_for(lambda: _controllers_of(queue).get("b", {}).get("status") == "unavailable", timeout=15)
        assert wait_for(lambda: _controllers_of(queue).get("default", {}).get("status") == "ok", timeout=15)
        [row] = queue.dispatchers()
        assert sorted(row["controllers"]) == ["b", "default"]
        assert "503" in row["controllers"]["b"]["reason"] and row["controllers"]["b"]["since"]
        # `stats`, a process of its own, shows each controller's breaker as the live dispatcher recorded it.
        doc = json.loads(_cli("stats", "--json", env=env).stdout)
        [shown] = doc["dispatchers"]
        assert sorted(shown["controllers"]) == ["b", "default"]
        jenkins = {c["controller"]: c["jenkins"] for c in doc["controllers"]}
        assert jenkins["default"]["status"] == "ok" and jenkins["b"]["status"] == "unavailable", jenkins
        assert "503" in jenkins["b"]["reason"] and jenkins["b"]["seen_by"] == row["id"]
        out = _cli("stats", env=env).stdout
        lines = [line.split() for line in out.splitlines()]
        assert ["default", "0", "0", "1/-", "ok", "up"] in lines, out
        [b_line] = [line for line in lines if line[:1] == ["b"]]
        assert b_line[4:6] == ["ok", "down"], out
        [dispatchers] = [x for x in out.splitlines() if x.startswith("dispatchers:")]
        assert "controllers b, default" in dispatchers, out
        assert any(x.startswith("controller b: Jenkins unavailable since") and "503" in x for x in out.splitlines())


def test_a_single_pass_records_the_controllers_it_served(make_jenkins, queue, no_dispatchers):
    settings, _env = _two_controllers(make_jenkins)
    queue.enqueue("deploy", controller="b")
    run_pass(settings, heartbeat=Heartbeat("cli"))
    controllers = _controllers_of(queue)
    assert sorted(controllers) == ["b", "default"]
    assert controllers["b"]["status"] == "unavailable"
    assert controllers["default"]["status"] == "unknown"  # nothing was due there: not asked


def test_one_controller_is_shown_as_before(queue, no_dispatchers):
    """A heartbeat without controllers (written before the column existed) reads as None."""
    Heartbeat("serve", interval=10.0).record(queue, "ok", "queue empty")
    [row] = queue.dispatchers()
    assert row["controllers"] is None
