"""What logs, metrics and traces ask before any Settings exist (the logger is built at import): whether EMF lines
and tracing are on, the log's format, and Powertools' own defaults, which it reads from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .reading import _bool, _text


def emf_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether metrics go out as CloudWatch EMF lines on stdout: METRICS_EMF when set, else only in Lambda
    (AWS_LAMBDA_FUNCTION_NAME set), where CloudWatch Logs turns them into metrics. Elsewhere they would
    only crowd the log. ``env``: ``os.environ`` unless given."""
    env = os.environ if env is None else env
    if _text(env, "METRICS_EMF") == "":
        return bool(_text(env, "AWS_LAMBDA_FUNCTION_NAME"))
    return _bool(env, "METRICS_EMF")


def log_format_wanted(is_terminal: bool, env: Mapping[str, str] | None = None) -> str:
    """"json" or "text": LOG_FORMAT when it says which, else text only on a terminal (``is_terminal``: the log's
    stream is one). Read before any Settings exist (the logger is built at import), so an unknown value cannot
    stop the command: it counts as ``auto``, which keeps machines' logs JSON."""
    env = os.environ if env is None else env
    wanted = _text(env, "LOG_FORMAT").lower()
    if wanted in ("json", "text"):
        return wanted
    return "text" if is_terminal else "json"


def tracing_wanted() -> bool:
    """Whether X-Ray tracing is on: Powertools' own POWERTOOLS_TRACE_DISABLED (set_powertools_defaults turns it
    off outside Lambda unless set)."""
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in ("true", "1")


def set_powertools_defaults(service: str, namespace: str) -> None:
    """Powertools reads its settings from the environment when its objects are built: give local runs sane
    values (service name, metrics namespace, no tracing outside Lambda) without overriding Lambda's."""
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", service)
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", namespace)
    if "AWS_LAMBDA_FUNCTION_NAME" not in os.environ:
        os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

