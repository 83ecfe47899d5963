"""`serve`'s per-job histograms of queue wait and build duration, fed by the emulator's real callbacks, and its
log as lines for a person when asked (LOG_FORMAT=text) or on a terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import urllib.request

from ..dispatch_helpers import WEBHOOK_SECRET, wait_for
from ..serve_helpers import free_port, serve_env, start_serve
from ..unit.test_observability import _families, _value

SLOW = {"path": "slowish", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.8}


def _scrape(base: str) -> dict:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        return _families(answer.read().decode())


def test_queue_wait_and_build_duration_per_job_from_real_callbacks(make_jenkins, database_url, queue, tmp_path):
    port = free_port()
    jenkins = make_jenkins(jobs=[SLOW], notification={
        "url": f"http://127.0.0.1:{port}/jenkins/notify?token={WEBHOOK_SECRET}"})
    served = start_serve(serve_env(database_url, jenkins.base_url, LOG_FORMAT="json"), tmp_path / "serve.log",
                         "--interval", "0.3", port=port)
    try:
        enqueued = time.monotonic()
        ids = [queue.enqueue("slowish", {"N": n}).id for n in range(2)] + [queue.enqueue("deploy").id]
        assert wait_for(lambda: all(queue.get(i)["status"] == "completed" for i in ids), timeout=30), [
            (queue.get(i)["status"], queue.get(i)["last_error"]) for i in ids]
        time.sleep(0.3)  # the last callback's answer is sent after its observation; be generous
        families = _scrape(served.base)
        lasted = time.monotonic() - enqueued  # no wait or build of these rows can be longer
    finally:
        assert served.stop() == 0
    wait, build = "jenkins_dispatch_queue_wait_seconds", "jenkins_dispatch_build_duration_seconds"
    assert _value(families, wait, wait + "_count", job="slowish") == 2
    assert _value(families, wait, wait + "_count", job="deploy") == 1
    assert 0 < _value(families, wait, wait + "_sum", job="slowish") <= 2 * lasted
    assert _value(families, build, build + "_count", job="slowish") == 2
    # Two builds of 0.8 s each, timed from the STARTED callback's arrival to the settle. The STARTED callback leaves
    # once the build has begun and may wait on a loaded machine, so a build can read well short of its length (0.58 s
    # seen under load ~11): only that something was timed, and no longer than the test, is asserted.
    assert 0 < _value(families, build, build + "_sum", job="slowish") <= 2 * lasted
    assert _value(families, build, build + "_bucket", job="slowish", le="1.0") <= 2


def test_rows_the_reconciler_settles_are_timed_too(make_jenkins, database_url, queue, tmp_path):
    """No notification reaches serve (the emulator sends none): each row is settled by the reconciler once its lease
    runs out, from the build's result in Jenkins, and still counted in both histograms. (A trigger whose answer is
    lost is adopted from its finished build, with no moment Jenkins took it: no queue wait. The timeout is long
    enough that a loaded machine does not turn an answer into a lost one.)"""
    jenkins = make_jenkins(jobs=[{**SLOW, "duration_seconds": 0.3}])
    served = start_serve(serve_env(database_url, jenkins.base_url, LEASE_SECONDS="8", JENKINS_TIMEOUT_SECONDS="4"),
                         tmp_path / "serve.log", "--interval", "0.3")
    try:
        ids = [queue.enqueue("slowish", {"N": n}).id for n in range(2)]
        assert wait_for(lambda: all(queue.get(i)["status"] == "completed" for i in ids), timeout=40), [
            (queue.get(i)["status"], queue.get(i)["last_error"]) for i in ids]
        assert {e["actor"] for i in ids for e in queue.events(i) if e["event"] == "settled"} == {"reconciler"}
        families = _scrape(served.base)
    finally:
        assert served.stop() == 0
    # A trigger whose answer was lost all the same (a CI run beside another suite: one of two) is adopted from its
    # finished build with no moment Jenkins took it or began it: such a row has nothing to time. Every row whose
    # history has those moments is timed.
    histories = {i: [e["event"] for e in queue.events(i)] for i in ids}
    triggered = sum(1 for events in histories.values() if {"triggered", "adopted"} & set(events))
    started = sum(1 for events in histories.values() if "started" in events)
    wait, build = "jenkins_dispatch_queue_wait_seconds", "jenkins_dispatch_build_duration_seconds"
    assert _value(families, wait, wait + "_count", job="slowish") == triggered, histories
    assert _value(families, build, build + "_count", job="slowish") == started, histories
    assert triggered + served.log().count("adopted a finished build") >= 2, histories  # only that excuses a row


def test_serve_logs_lines_for_a_person_when_asked(jenkins, database_url, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url, LOG_FORMAT="text"), tmp_path / "serve.log",
                         "--interval", "0.3")
    try:
        time.sleep(1)
    finally:
        assert served.stop() == 0
    lines = [line for line in served.log().splitlines() if line.strip()]
    assert lines[0] == "serving" and any(line.split()[:1] == ["webhook"] for line in lines[1:5])
    logged = [line for line in lines if " INFO " in line]
    assert any("pass finished  summary=" in line for line in logged), lines[:20]
    for line in lines:
        assert not line.startswith("{"), line  # no JSON at all


def test_serve_on_a_terminal_logs_lines_for_a_person(jenkins, database_url):
    """No LOG_FORMAT: text because stdout is a terminal (a pseudo-terminal here), as when run by hand."""
    env = serve_env(database_url, jenkins.base_url)
    env.pop("LOG_FORMAT", None)
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--port", str(free_port()),
                             "--interval", "0.3"], env=env, stdout=child, stderr=child, stdin=subprocess.DEVNULL)
    os.close(child)
    seen = b""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and b"pass finished" not in seen:
            if select.select([main], [], [], 0.5)[0]:
                try:
                    seen += os.read(main, 65536)
                except OSError:
                    break
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        os.close(main)
    text = seen.decode(errors="replace")
    assert "pass finished  summary=" in text, text[-2000:]
    assert '"message"' not in text
    assert json.dumps({"message": "serving"})[:-1] not in text
