"""The emulator's configuration: what a key left out of a config means (``Settings``), the config used when none
is given (``DEFAULT_CONFIG``), and the shape check that names a malformed config's mistake in one line.

Owns the defaults; the package docstring documents the file's shape and refers here. Must not import the rest of
the package: everything else reads its configuration from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Settings:
    """Top-level settings of a config, each with the value a config that leaves it out gets."""

    executors: int = 2
    quiet_period_seconds: float = 0.0
    left_item_retention_seconds: float = 300.0
    version: str = "2.528"
    context_path: str = "/"
    root_url: str | None = None  # Jenkins' configured URL, used in task/executable/build urls
    location_base: str | None = None  # pretend a proxy: scheme://host:port put into Location headers
    crumb_mode: str = "password"  # password: crumbs needed unless an API token is used · always · off
    anonymous_read: bool = False
    bad_credentials: str = "reject"  # reject: 401 (Jenkins's own realm) · anonymous: go on as anonymous
    first_queue_id: int = 1

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Settings:
        """The settings a config names, the defaults for the rest, and the context path as ``/x/`` or ``/``."""
        settings = cls(**{k: config[k] for k in cls.__dataclass_fields__ if k in config})
        settings.context_path = normalise_context_path(settings.context_path)
        return settings


def normalise_context_path(path: str) -> str:
    """``jenkins``, ``/jenkins`` and ``/jenkins/`` all mean ``/jenkins/``; an empty path means ``/``."""
    path = "/" + path.strip("/")
    return path if path == "/" else path + "/"


# What `python -m jenkins_emulator` without --config and `JenkinsEmulator()` without a config run.
DEFAULT_CONFIG: dict[str, Any] = {
    "executors": 4,
    "anonymous_read": True,  # like "Allow anonymous read access": python-jenkins' get_version() runs unauthenticated
    "quiet_period_seconds": 0,
    "users": {"admin": {"api_token": "admin-token", "password": "admin"}},
    "jobs": [
        {"path": "deploy", "parameters": [{"name": "DISPATCH_ID"}, {"name": "ENV", "default": "dev"}], "duration_seconds": 2},
        {"path": "build-app", "kind": "pipeline", "parameters": [{"name": "DISPATCH_ID"}, {"name": "BRANCH", "default": "main"}], "duration_seconds": 1},
        {"path": "team/app/deploy", "parameters": [{"name": "DISPATCH_ID"}, {"name": "VERSION", "default": ""}], "duration_seconds": 2},
        {"path": "nightly", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 1},
    ],
}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _entry_problem(kind: str, index: int, spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return None if kind == "folders" and isinstance(spec, str) and spec else (
            f'{kind}[{index}] must be an object with a "path", got {_shown(spec)}')
    if not isinstance(spec.get("path"), str) or not spec["path"].strip("/"):
        return f'{kind}[{index}] has no "path": {_shown(spec)}'
    return None


def config_problem(config: Any) -> str | None:
    """The first thing wrong with an emulator config (the shape documented in the package docstring), or None."""
    if not isinstance(config, dict):
        return "the config must be a JSON object"
    for kind in ("folders", "jobs"):
        entries = config.get(kind) or []
        if not isinstance(entries, list):
            return f"{kind} must be a list of objects"
        for index, spec in enumerate(entries):
            problem = _entry_problem(kind, index, spec)
            if problem:
                return problem
            for position, parameter in enumerate(spec.get("parameters") or [] if isinstance(spec, dict) else []):
                if not (isinstance(parameter, str) and parameter) and not (isinstance(parameter, dict) and parameter.get("name")):
                    return f'{kind}[{index}] ({_shown(spec["path"])}) parameters[{position}] has no "name"'
    users = config.get("users") or {}
    if not isinstance(users, dict):
        return 'users must be an object: {"NAME": {"api_token": ...}}'
    for name, spec in users.items():
        if not isinstance(spec, dict):
            return f'users[{_shown(name)}] must be an object such as {{"api_token": "...", "password": "..."}}'
    notification = config.get("notification")
    if notification is not None and not isinstance(notification, str) and not (
            isinstance(notification, dict) and isinstance(notification.get("url", ""), str | None)):
        return 'notification must be a URL or an object with a "url"'
    return None
