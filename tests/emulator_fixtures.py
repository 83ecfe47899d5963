"""Pytest fixtures for the Jenkins emulator: import them into a conftest or a test module.

``jenkins`` yields a started emulator with fresh state per test; ``make_jenkins(**overrides)`` starts one
with top-level config keys replaced (``jobs`` extends the default job list instead); ``receiver`` takes the
notifications an emulator sends.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jenkins_emulator import JenkinsEmulator

__all__ = ["jenkins", "make_jenkins", "receiver"]  # what conftest re-exports

ADMIN_TOKEN = "admin-token"

FAST_CONFIG: dict[str, Any] = {
    "executors": 4,
    "quiet_period_seconds": 0,
    "left_item_retention_seconds": 300,
    "users": {
        "admin": {"api_token": ADMIN_TOKEN, "password": "admin-password"},
        "viewer": {"api_token": "viewer-token", "permissions": "read"},
    },
    "jobs": [
        {"path": "deploy", "parameters": [{"name": "DISPATCH_ID"}, {"name": "ENV", "default": "dev"},
                                          {"name": "FLAG", "type": "boolean", "default": False},
                                          {"name": "COUNT"}, {"name": "PAYLOAD"}], "duration_seconds": 0.15},
        {"path": "team/app/deploy", "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION"}], "duration_seconds": 0.15},
        {"path": "Test Job", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1},
        {"path": "déploiement ünï", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1},
        {"path": "repo/feature%2Ffoo", "kind": "pipeline", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1},
        {"path": "waiting", "parameters": [{"name": "DISPATCH_ID"}], "quiet_period_seconds": 30},
        {"path": "serial", "concurrent": False, "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.4},
        {"path": "nightly", "parameterized": False, "duration_seconds": 0.1},
        {"path": "frozen", "disabled": True, "parameters": [{"name": "DISPATCH_ID"}]},
        {"path": "no-dispatch-id", "parameters": [{"name": "ENV", "default": "dev"}], "duration_seconds": 0.1},
        {"path": "vetoed", "refuse": True, "parameters": [{"name": "DISPATCH_ID"}]},
        {"path": "old/job", "parameters": [{"name": "DISPATCH_ID"}]},
    ],
    "folders": [{"path": "old", "disabled": True}],
}


@pytest.fixture
def make_jenkins() -> Iterator[Callable[..., JenkinsEmulator]]:
    started: list[JenkinsEmulator] = []

    def make(**overrides: Any) -> JenkinsEmulator:
        config = copy.deepcopy(FAST_CONFIG)
        extra_jobs = overrides.pop("jobs", [])
        config.update(overrides)
        config["jobs"] = config["jobs"] + list(extra_jobs)
        emulator = JenkinsEmulator(config)
        emulator.start()
        started.append(emulator)
        return emulator

    yield make
    for emulator in started:
        emulator.stop()


@pytest.fixture
def jenkins(make_jenkins: Callable[..., JenkinsEmulator]) -> JenkinsEmulator:
    return make_jenkins()


class NotificationReceiver:
    """An HTTP server standing in for the webhook: keeps every POST it gets (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                self.send_response(500)  # the plugin ignores the answer
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[NotificationReceiver]:
    """Where an emulator configured with ``notification`` sends its callbacks; closed after the test."""
    receiver = NotificationReceiver()
    yield receiver
    receiver.close()
