"""Logger, metrics and tracing shared by every part of the package (Powertools).

Logs are JSON, one line per event, with job id and dispatch id as keys. Metrics are EMF lines that
CloudWatch turns into metrics; outside Lambda they are printed like any log line. Tracing (X-Ray) is
loaded only when it is switched on: importing its SDK costs about 0.3 s of every cold start.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "jenkins-dispatch"
NAMESPACE = "JenkinsDispatch"

# Powertools reads these at construction; give local runs sane values without touching Lambda's.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", SERVICE)
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE)
if "AWS_LAMBDA_FUNCTION_NAME" not in os.environ:
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

_tracer = None
_tracer_lock = threading.Lock()


def tracing_enabled() -> bool:
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in ("true", "1")


def tracer():
    """The Powertools Tracer, created on first use; None while tracing is off."""
    global _tracer
    if _tracer is None and tracing_enabled():
        with _tracer_lock:
            if _tracer is None:
                from aws_lambda_powertools import Tracer

                _tracer = Tracer(service=SERVICE)
    return _tracer


@contextmanager
def subsegment(name: str) -> Iterator[None]:
    """An X-Ray subsegment around a database or Jenkins call; nothing at all when tracing is off."""
    active = tracer()
    if active is None:
        yield
        return
    with active.provider.in_subsegment(name):
        yield


__all__ = ["logger", "metrics", "tracer", "subsegment", "MetricUnit", "SERVICE", "NAMESPACE"]
