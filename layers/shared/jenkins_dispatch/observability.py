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


class SerializedMetrics:
    """Powertools' Metrics behind one lock.

    Its metric set is shared by every user in the process, and `serve` adds and flushes from the
    dispatcher thread and the webhook's threads at once: unguarded, a flush could iterate the set while
    another thread adds to it ("dictionary changed size during iteration") or flush a set another
    thread just emptied — and crash the process.
    """

    def __init__(self, inner: Metrics):
        self._inner = inner
        self._lock = threading.RLock()

    def add_metric(self, **kwargs) -> None:
        with self._lock:
            self._inner.add_metric(**kwargs)

    def flush_metrics(self, **kwargs) -> None:
        with self._lock:
            self._inner.flush_metrics(**kwargs)

    def flush_if_any(self) -> None:
        """Flush what was added, if anything (an empty flush is an error in Powertools)."""
        with self._lock:
            if self._inner.metric_set:
                self._inner.flush_metrics()

    def clear_metrics(self) -> None:
        with self._lock:
            self._inner.clear_metrics()

    @property
    def metric_set(self) -> dict:
        with self._lock:
            return dict(self._inner.metric_set)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)  # log_metrics (Lambda handlers: one invocation at a time), …


metrics = SerializedMetrics(Metrics(namespace=NAMESPACE, service=SERVICE))

_tracer = None
_tracer_lock = threading.Lock()
_xray_missing = False  # tracing was asked for but the SDK is absent: said once, then off


def tracing_enabled() -> bool:
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in ("true", "1")


def tracer():
    """The Powertools Tracer, created on first use; None while tracing is off (or its SDK is not installed)."""
    global _tracer, _xray_missing
    if _tracer is None and tracing_enabled() and not _xray_missing:
        with _tracer_lock:
            if _tracer is None:
                try:
                    from aws_lambda_powertools import Tracer

                    _tracer = Tracer(service=SERVICE)
                except ImportError as exc:  # the X-Ray SDK is the "aws" extra: trace nothing rather than fail
                    logger.warning("tracing is on but the X-Ray SDK is not installed: pip install "
                                   "'jenkins-dispatch[aws]'; tracing off", extra={"missing": exc.name})
                    _xray_missing = True
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
