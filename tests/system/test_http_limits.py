"""`serve` and `ui` as subprocesses against clients that misbehave (issue 21): hundreds of connections that send
nothing and clients that send a body a byte at a time hold no thread, are closed after the idle timeout, and
/healthz (the page's static files) keep answering meanwhile; a client that goes away is one line of the log."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ..dispatch_helpers import wait_for
from ..serve_helpers import serve_env, start_serve

IDLE_SECONDS = 2  # HTTP_IDLE_TIMEOUT_SECONDS for these tests: the default is 20
IDLE_CONNECTIONS = 300
SLOW_CLIENTS = 5
CLOSED_WITHIN_SECONDS = 20  # generous: they close after IDLE_SECONDS + at most 2 s of sweeping
EXTRA_THREADS_ALLOWED = 4  # over the process's threads before the clients came


def test_the_default_idle_timeout_closes_a_silent_connection_within_30_seconds():
    from jenkins_dispatch.config import default_of
    from jenkins_dispatch.http_service import HttpLimits

    assert HttpLimits(idle_seconds=default_of("HTTP_IDLE_TIMEOUT_SECONDS")).closes_within() <= 30


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no thread count for process {pid}")


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed this connection (end of stream or reset), without waiting."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1024) == b""
    except OSError:
        return True


class SlowClient(threading.Thread):
    """A POST whose headers promise a body that then comes a byte every 0.2 s, until the server hangs up."""

    def __init__(self, address: tuple[str, int], path: str):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(address, timeout=5)
        self.sock.sendall(f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                          "Content-Length: 100000\r\n\r\n{".encode())
        self.hung_up = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            if closed_by_server(self.sock):
                self.hung_up.set()
                return
            try:
                self.sock.sendall(b" ")
            except OSError:
                self.hung_up.set()
                return


def get_ok(url: str) -> None:
    with urllib.request.urlopen(url, timeout=30) as answer:
        answer.read()
        assert answer.status == 200


def misbehave_against(pid: int, base: str, probe: str, slow_path: str) -> None:
    """Open the idle connections and the slow clients, watch the process's threads and the probe's answer
    times until the server has closed them all, and check the limits."""
    host, port = base.split("//")[1].rstrip("/").rsplit(":", 1)
    address = (host, int(port))
    baseline = threads_of(pid)
    idle = [socket.create_connection(address, timeout=5) for _ in range(IDLE_CONNECTIONS)]
    slow = [SlowClient(address, slow_path) for _ in range(SLOW_CLIENTS)]
    opened = time.monotonic()
    for client in slow:
        client.start()
    open_idle, peak = list(idle), baseline
    try:
        while time.monotonic() - opened < CLOSED_WITHIN_SECONDS:
            peak = max(peak, threads_of(pid))
            # It answers meanwhile; how fast is `make bench`'s to say: that no connection holds a thread (the
            # bound on threads below) is what keeps it answering.
            get_ok(base.rstrip("/") + probe)
            open_idle = [sock for sock in open_idle if not closed_by_server(sock)]
            if not open_idle and all(client.hung_up.is_set() for client in slow):
                break
            time.sleep(0.2)  # a sampling interval: every check above waits on its own condition
        took = time.monotonic() - opened
    finally:
        for client in slow:
            client.stop.set()
        for sock in idle + [client.sock for client in slow]:
            sock.close()
    assert peak <= baseline + EXTRA_THREADS_ALLOWED, (
        f"{IDLE_CONNECTIONS} idle and {SLOW_CLIENTS} slow connections took the process from {baseline} to "
        f"{peak} threads")
    assert not open_idle, f"{len(open_idle)} idle connections still open after {took:.0f} s"
    assert all(client.hung_up.is_set() for client in slow), "a slow client was never hung up on"


def test_serve_keeps_its_threads_and_closes_idle_and_slow_connections(jenkins, database_url, db, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url, HTTP_IDLE_TIMEOUT_SECONDS=str(IDLE_SECONDS)),
                         tmp_path / "serve.log")
    try:
        misbehave_against(served.proc.pid, served.base, "/healthz", "/jenkins/notify")
    finally:
        assert served.stop() == 0, served.log()[-3000:]


def test_ui_keeps_its_threads_and_closes_idle_and_slow_connections(database_url, db):
    env = {k: v for k, v in os.environ.items() if not k.startswith("UI_TOKEN")}
    env.update(DATABASE_URL=database_url, HTTP_IDLE_TIMEOUT_SECONDS=str(IDLE_SECONDS))
    proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "ui", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(proc.stdout.readline())["url"]
        misbehave_against(proc.pid, url, "/static/ui.css", "/login")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_a_client_that_goes_away_before_its_answer_is_one_log_line(jenkins, database_url, db, tmp_path, path):
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log")
    try:
        host, port = served.base.split("//")[1].rsplit(":", 1)
        # A reset that reaches the server before it read the request discards the request (nothing happened, nothing
        # to say), and one after its answer left says nothing either: only one between is "went away". That window is
        # a matter of scheduling (a 3.13 CI run missed it once for /healthz), so the client tries up to 20 times;
        # whatever happens, each try says at most that one line, never a traceback.
        logged = 0
        for _ in range(20):
            before = len(served.log().splitlines())
            client = socket.create_connection((host, int(port)), timeout=5)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
            client.close()  # gone before any answer could reach it
            assert served.health()[0] == 200

            def said(since: int = before) -> list[str]:
                return [line for line in served.log().splitlines()[since:]
                        if not line.startswith("{") or "went away" in line]

            wait_for(said, timeout=2)  # what the server had to say of this try is said by then
            about = said()
            assert len(about) <= 1, "\n".join(served.log().splitlines()[before:])
            if about:
                assert json.loads(about[0])["message"] == "client went away before its answer was sent"
                logged += 1
                break
        assert logged == 1, "nothing was logged in 20 tries"
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("command", ["serve", "ui"])
def test_a_taken_port_is_one_line_naming_the_option(jenkins, database_url, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = {k: v for k, v in serve_env(database_url, jenkins.base_url).items() if not k.startswith("UI_TOKEN")}
        proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", command, "--port", str(port)], env=env,
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"127.0.0.1:{port}" in proc.stderr and "Address already in use" in proc.stderr
    assert "--port" in proc.stderr
