"""Checks a config's shape before the emulator uses it, so a mistake is named in one line, not a traceback."""

from __future__ import annotations

import json
from typing import Any


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
