"""`jenkins-dispatch serve` as a user runs it: a subprocess, its HTTP endpoints, its log."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .dispatch_helpers import WEBHOOK_SECRET, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5):
    """(status, JSON body), or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
    except OSError:
        return None


def http_post(url: str, doc, timeout: float = 5):
    request = urllib.request.Request(url, data=json.dumps(doc).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@dataclass
class ServeProcess:
    proc: subprocess.Popen
    base: str  # http://127.0.0.1:PORT
    log_path: Path

    @property
    def notify_url(self) -> str:
        return f"{self.base}/jenkins/notify?token={WEBHOOK_SECRET}"

    def health(self):
        """(status, document) of GET /healthz, or None when nothing answers."""
        return http_get(self.base + "/healthz")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, then its exit code; one that has not stopped within ``timeout`` prints its threads' stacks
        (SIGUSR1) before it is killed, and the test fails with them."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1)
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"serve did not stop within {timeout} s of SIGTERM; its log, stacks last:\n"
                                     + self.log()[-12000:]) from None
        return self.proc.wait()


def completed_notification(row: dict, number: int = 7) -> dict:
    """The Notification plugin's COMPLETED/SUCCESS body for ``row``'s dispatch (job ``deploy``)."""
    return {"name": "deploy", "url": "job/deploy/", "build": {
        "number": number, "queue_id": row["jenkins_queue_id"], "phase": "COMPLETED", "status": "SUCCESS",
        "url": f"job/deploy/{number}/", "parameters": {"DISPATCH_ID": row["dispatch_id"]}}}


def serve_env(database_url: str, jenkins_url: str, **overrides: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL=jenkins_url, JENKINS_USER="admin",
               JENKINS_API_TOKEN="admin-token", WEBHOOK_SECRET=WEBHOOK_SECRET, LEASE_SECONDS="30",
               JENKINS_TIMEOUT_SECONDS="5", BATCH_SIZE="8", MAX_PARALLEL_TRIGGERS="2", TIME_MARGIN_SECONDS="0")
    env.update(overrides)
    return env


def _listening_or_gone(served: ServeProcess) -> bool:
    return not served.alive() or "serving" in served.log()


def _answering_or_gone(served: ServeProcess) -> bool:
    return served.health() is not None or not served.alive()


def start_serve(env: dict[str, str], log_path: Path, *args: str, wait_healthy: bool = True,
                port: int | None = None) -> ServeProcess:
    """Start `python -m jenkins_dispatch.cli serve` on ``port`` (default: a free one); wait until /healthz answers
    (and, with ``wait_healthy``, until the dispatcher has reached the database)."""
    for _ in range(3):
        # A free port is free when asked, not always when serve binds it (another test worker may take it between):
        # a port of our choosing that was taken meanwhile is chosen again. serve prints "serving" once it listens.
        chosen = port or free_port()
        log = open(log_path, "w+")  # noqa: SIM115 - the process writes to it for its whole life
        proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--port", str(chosen), *args],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        served = ServeProcess(proc, f"http://127.0.0.1:{chosen}", log_path)
        wait_for(partial(_listening_or_gone, served), timeout=20)
        if port is None and not served.alive() and "Address already in use" in served.log():
            continue
        break
    if not wait_for(partial(_answering_or_gone, served), timeout=20):
        served.stop()
        raise AssertionError(f"serve never answered /healthz:\n{served.log()[-3000:]}")
    if wait_healthy:
        try:
            healthy = wait_for(lambda: (served.health() or (0, {}))[1].get("database", {}).get("status") == "ok",
                               timeout=15)
        except Exception:
            healthy = False
        if not healthy:
            served.stop()  # never leak a process when the test cannot start
            raise AssertionError(f"serve never reached the database:\n{served.log()[-3000:]}")
    return served
