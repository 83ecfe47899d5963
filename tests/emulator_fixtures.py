"""Pytest fixtures for the Jenkins emulator: import them into a conftest or a test module.

``jenkins`` yields a started emulator with fresh state per test; ``make_jenkins(**overrides)`` starts one
with top-level config keys replaced (``jobs`` extends the default job list instead).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jenkins_emulator import JenkinsEmulator

__all__ = ["jenkins", "make_jenkins"]  # what conftest re-exports

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
