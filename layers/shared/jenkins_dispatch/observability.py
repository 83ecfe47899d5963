"""Logger, metrics and tracing shared by every part of the package (Powertools, and Prometheus for `serve`).

Logs are JSON, one line per event, with job id and dispatch id as keys; on a terminal (or with LOG_FORMAT=text)
the same records as lines a person reads (``human_line``), since `serve` is also run by hand. Every metric goes through one call,
``metrics.add_metric(name=..., unit=..., value=...)``, which feeds two sinks:
- CloudWatch EMF lines on stdout (Powertools), which CloudWatch Logs turns into metrics: on in Lambda, off
  elsewhere unless METRICS_EMF=true (config.emf_wanted), where they would only crowd the log;
- Prometheus (prometheus_client, its own registry), once `serve` enables it for its GET /metrics.
Tracing (X-Ray) is loaded only when it is switched on: importing its SDK costs about 0.3 s of every cold start.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from .config import emf_wanted, log_format_wanted, set_powertools_defaults, tracing_wanted
from .errors import ConfigError

SERVICE = "jenkins-dispatch"
NAMESPACE = "JenkinsDispatch"
PROMETHEUS_PREFIX = "jenkins_dispatch_"

set_powertools_defaults(SERVICE, NAMESPACE)  # before the Logger below: Powertools reads them at construction

# Keys every record carries that a person at a terminal does not need on each line.
_QUIET_KEYS = ("level", "message", "timestamp", "service", "location", "exception", "exception_name",
               "stack_trace", "cold_start", "function_name", "function_memory_size", "function_arn",
               "function_request_id", "xray_trace_id", "sampling_rate")


def _shown(value: Any) -> str:
    """A value as a person reads it: plain words bare, anything with blanks or structure as JSON."""
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"=" for c in value):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def human_line(record: Mapping[str, Any]) -> str:
    """One log record (the dict Powertools would print as JSON) as a line: time, level, message, then the
    record's own keys as key=value; a traceback follows on its own lines."""
    stamp = str(record.get("timestamp", ""))
    clock = stamp[11:23] if len(stamp) >= 23 else stamp  # "2026-11-30 15:24:01,123+0000" -> the time of day
    keys = " ".join(f"{key}={_shown(value)}" for key, value in record.items()
                    if key not in _QUIET_KEYS and value is not None)
    line = f"{clock} {str(record.get('level', '')):<7} {record.get('message', '')}" + (f"  {keys}" if keys else "")
    if record.get("exception"):
        line += "\n" + str(record["exception"])
    return line


def _logs_as_text() -> bool:
    """Human lines when LOG_FORMAT asks for them or (by default) the log goes to a terminal; else JSON."""
    try:
        on_terminal = sys.stdout.isatty()  # Powertools writes to stdout
    except (AttributeError, ValueError):  # stdout replaced or closed
        on_terminal = False
    return log_format_wanted(on_terminal) == "text"


LOGS_AS_TEXT = _logs_as_text()
logger = Logger(service=SERVICE, logger_formatter=LambdaPowertoolsFormatter(
    json_serializer=human_line) if LOGS_AS_TEXT else LambdaPowertoolsFormatter())


# --------------------------------------------------------------------------- what each metric means

# Readings of a level (the latest value is the truth), as opposed to counts of events that add up.
GAUGES = frozenset({"InFlight", "Pending", "OldestPendingAgeSeconds", "OldestTransactionAgeSeconds", "PausedJobs",
                    "EverythingPaused", "StrandedInFlight"})

# Every metric the package emits under a fixed name, with its unit and meaning. Prometheus shows each from
# the start (a counter at 0), so an alert on one needs no first event; a name not listed here (trigger
# errors per class) appears when it first happens.
CATALOGUE: dict[str, tuple[MetricUnit, str]] = {
    "Claimed": (MetricUnit.Count, "Rows claimed by dispatcher passes."),
    "Triggered": (MetricUnit.Count, "Jobs Jenkins accepted (queue item recorded)."),
    "JobsCompleted": (MetricUnit.Count, "Jobs settled completed (dispatcher, reconciler or webhook)."),
    "JobsFailed": (MetricUnit.Count, "Jobs settled failed (build failed, permanent dispatch error, attempts spent)."),
    "RetriedLater": (MetricUnit.Count, "Triggers that failed for one job and were put back with a backoff."),
    "TriggerOutcomeUnknown": (MetricUnit.Count, "Triggers whose outcome is unknown (the reconciler searches later)."),
    "TriggerErrors": (MetricUnit.Count, "Triggers Jenkins refused or that failed, all classes."),
    "AdoptedAfterCrash": (MetricUnit.Count, "Expired leases whose build was found in Jenkins and adopted."),
    "LeasesExpired": (MetricUnit.Count, "Expired leases the reconciler looked at."),
    "SearchInconclusive": (MetricUnit.Count, "Searches for a dispatch in Jenkins that could not tell."),
    "JenkinsReadsFailed": (MetricUnit.Count, "Reads about one job that failed (no answer, a 500): that row waits "
                           "for its next lease, the pass goes on."),
    "DuplicatesCancelled": (MetricUnit.Count, "Copies of a dispatch cancelled in Jenkins's queue."),
    "DuplicatesSeen": (MetricUnit.Count, "Copies of a dispatch seen in Jenkins that could not be cancelled."),
    "LateArrivalsAfterCancel": (MetricUnit.Count, "Triggers of cancelled jobs that reached Jenkins late, then were "
                                                  "cancelled, stopped or seen finished."),
    "JenkinsUnavailable": (MetricUnit.Count, "Passes stopped because Jenkins as a whole failed (down, 5xx, 401/403)."),
    "PassesCompleted": (MetricUnit.Count, "Dispatcher passes that ran to their end."),
    "TicksEnqueued": (MetricUnit.Count, "Schedule ticks enqueued as rows (each tick by one dispatcher only)."),
    "TicksSkipped": (MetricUnit.Count, "Schedule ticks not enqueued: missed while no dispatcher ran (only the "
                     "latest missed tick of a schedule is), or skipped by a --no-overlap schedule whose previous run "
                     "was still in flight."),
    "RowsPruned": (MetricUnit.Count, "Finished jobs the pruner deleted with their history (PRUNE_FINISHED_AFTER)."),
    "PassDurationMs": (MetricUnit.Milliseconds, "How long dispatcher passes took."),
    "InFlight": (MetricUnit.Count, "Jobs processing (claimed, queued or running in Jenkins), after the last pass."),
    "Pending": (MetricUnit.Count, "Jobs pending (due or scheduled later), after the last pass."),
    "StrandedInFlight": (MetricUnit.Count, "Jobs in flight on a controller no longer configured: stranded until it is "
                                           "configured again or they are cancelled, counted against no cap."),
    "OldestPendingAgeSeconds": (MetricUnit.Seconds,
                                "Age of the oldest due pending job not held by a pause, after the last pass."),
    "PausedJobs": (MetricUnit.Count, "Jobs paused one by one (`jenkins-dispatch pause JOB`), after the last pass."),
    "EverythingPaused": (MetricUnit.Count, "1 while everything is paused (`jenkins-dispatch pause`), else 0."),
    "OldestTransactionAgeSeconds": (MetricUnit.Seconds,
                                    "Age of the database's oldest open transaction, after the last pass."),
    "NotificationsAccepted": (MetricUnit.Count, "Jenkins notifications applied."),
    "NotificationsDuplicate": (MetricUnit.Count, "Jenkins notifications already applied (repeats)."),
    "NotificationsIgnored": (MetricUnit.Count, "Notifications of builds that are not the dispatched job."),
    "NotificationsStale": (MetricUnit.Count, "Notifications of an earlier attempt's dispatch id."),
    "NotificationsUnknown": (MetricUnit.Count, "Notifications naming an unknown dispatch id."),
    "NotificationsRejectedAuth": (MetricUnit.Count, "Webhook requests without the right token (401)."),
    "NotificationsMalformed": (MetricUnit.Count, "Webhook requests answered 400 or 413."),
    "WebhookUnavailable": (MetricUnit.Count, "Webhook requests answered 503 (database unavailable)."),
    "WebhookNoRoute": (MetricUnit.Count, "Webhook requests to no known endpoint."),
    "WebhookInternalError": (MetricUnit.Count, "Webhook requests that failed unexpectedly (500)."),
    "NotificationLatency": (MetricUnit.Milliseconds, "Time to apply one Jenkins notification."),
}

# Counted per controller too (each lane's pass is one controller's): in Prometheus, beside the unlabelled family
# (every controller's together, which the alert rules and the dashboard read), a family of the same meaning named
# ``jenkins_dispatch_controller_*`` with the label ``controller``. Its values are the configured controllers' names
# only, so the series are bounded by the configuration. Metrics also counted elsewhere without a controller (the
# webhook's settles) are left out: their labelled family would count only part of them.
PER_CONTROLLER = frozenset({"Claimed", "Triggered", "RetriedLater", "TriggerOutcomeUnknown", "TriggerErrors",
                            "AdoptedAfterCrash", "LeasesExpired", "JenkinsUnavailable", "PassesCompleted"})
CONTROLLER_LABEL = "controller"
# Gauges read per controller as well, set apart from the unlabelled one (``MetricsFacade.set_per_controller``).
# StrandedInFlight's label values are the names rows give that the configuration lacks: as many as controllers
# were removed while their rows ran.
PER_CONTROLLER_GAUGES = frozenset({"InFlight", "StrandedInFlight"})

# Per concurrency key (`serve`'s /metrics only, label ``key``): each capped key's rows in flight on every controller
# and its cap, after the last pass. Label values are the keys of jenkins_key_limits, bounded by the configuration as
# the controllers' are; a key whose cap is removed loses its series.
KEY_LABEL = "key"
KEY_GAUGES: dict[str, tuple[str, str]] = {
    "in_flight": ("key_in_flight", "Rows holding a capped concurrency key in flight, on every controller, after the "
                  "last pass; label key."),
    "cap": ("key_cap", "A concurrency key's cap (`limits set --key K N`); label key."),
}

# Per-job histograms (`serve` only, from MetricsFacade.observe_settled): name -> (Prometheus name, help, buckets in
# seconds). A queue wait runs from milliseconds to the hours a job can be held back; a build, from seconds to hours.
JOB_HISTOGRAMS: dict[str, tuple[str, str, tuple[float, ...]]] = {
    "QueueWait": ("queue_wait_seconds", "Time from a job's insert (or an operator's retry) to the trigger Jenkins "
                  "accepted, observed when the webhook or the reconciler settles it; label job: its name, or \"other\".",
                  (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0)),
    "BuildDuration": ("build_duration_seconds", "Time from a build's start (its STARTED notification, or the "
                      "reconciler seeing it) to its settle, observed when the webhook or the reconciler settles "
                      "it; label job: its name, or \"other\".",
                      (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0)),
}
# The per-job label's bound: the first JOB_LABEL_LIMIT job names a process sees keep their own label for its
# life, every later one is counted under OTHER_JOBS. A series per bucket per label value: at most
# (JOB_LABEL_LIMIT + 1) x (buckets + 4) series per histogram, whatever the number of jobs.
JOB_LABEL_LIMIT = 50
OTHER_JOBS = "other"

_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TIME_UNITS = {"Milliseconds": 1000.0, "Seconds": 1.0}


def _unit_text(unit: MetricUnit | str) -> str:
    return unit.value if isinstance(unit, MetricUnit) else str(unit)


def prometheus_name(name: str, unit: MetricUnit | str, per_controller: bool = False) -> tuple[str, str]:
    """(kind, name) of a CloudWatch metric in Prometheus: "counter", "gauge" or "histogram" (times, in
    seconds); snake_case with the package's prefix (a counter's ``_total`` is added by the client), and
    ``controller_`` after it for the family labelled per controller."""
    unit_text = _unit_text(unit)
    kind = "gauge" if name in GAUGES else ("histogram" if unit_text in _TIME_UNITS else "counter")
    base = name[:-2] if unit_text == "Milliseconds" and name.endswith("Ms") else name
    snake = _WORD_BOUNDARY.sub("_", base).lower()
    if unit_text in _TIME_UNITS and not snake.endswith("_seconds"):
        snake += "_seconds"
    return kind, PROMETHEUS_PREFIX + ("controller_" if per_controller else "") + snake


# --------------------------------------------------------------------------- sinks


class PrometheusSink:
    """Each metric as a Prometheus counter, gauge or histogram in a registry of its own (never the client's
    global one, which would mix in whatever else the process registered)."""

    # Pass durations run from milliseconds (idle) to a lease; notification latencies stay well under a second.
    BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=True)
        self._lock = threading.Lock()
        self._families: dict[str, tuple[str, Any, float]] = {}
        self._extra: Callable[[], Iterable[Any]] | None = None
        self.registry.register(self)  # collect() below: the extra families of whoever runs the server
        for name, (unit, _help) in CATALOGUE.items():
            self._family(name, unit)
        self._per_controller: dict[str, Any] = {}
        self._gauge_labels: dict[str, set[str]] = {}  # each per-controller gauge's controllers read so far
        for name in sorted(PER_CONTROLLER | PER_CONTROLLER_GAUGES):
            self._per_controller[name] = self._controller_family(name, CATALOGUE[name][0])
        from prometheus_client import Histogram

        self._job_histograms = {
            name: Histogram(PROMETHEUS_PREFIX + suffix, help_text, ["job"], registry=self.registry, buckets=buckets)
            for name, (suffix, help_text, buckets) in JOB_HISTOGRAMS.items()}
        self._job_labels: set[str] = set()
        from prometheus_client import Gauge

        self._key_gauges = {name: Gauge(PROMETHEUS_PREFIX + suffix, help_text, [KEY_LABEL], registry=self.registry)
                            for name, (suffix, help_text) in KEY_GAUGES.items()}
        self._keys_seen: set[str] = set()

    def _family(self, name: str, unit: MetricUnit | str) -> tuple[str, Any, float]:
        with self._lock:
            found = self._families.get(name)
            if found is None:
                from prometheus_client import Counter, Gauge, Histogram

                kind, full_name = prometheus_name(name, unit)
                help_text = CATALOGUE[name][1] if name in CATALOGUE else f"{name} ({_unit_text(unit)})."
                family: Counter | Gauge | Histogram
                if kind == "counter":
                    family = Counter(full_name, help_text, registry=self.registry)
                elif kind == "gauge":
                    family = Gauge(full_name, help_text, registry=self.registry)
                else:
                    family = Histogram(full_name, help_text, registry=self.registry, buckets=self.BUCKETS)
                found = self._families[name] = (kind, family, _TIME_UNITS.get(_unit_text(unit), 1.0))
            return found

    def _controller_family(self, name: str, unit: MetricUnit | str) -> Any:
        from prometheus_client import Counter, Gauge

        kind, full_name = prometheus_name(name, unit, per_controller=True)
        kinds = {"counter": Counter, "gauge": Gauge}  # no histogram per controller: a series per bucket each
        return kinds[kind](full_name, f"{CATALOGUE[name][1]} Per controller (label controller).", [CONTROLLER_LABEL],
                           registry=self.registry)

    def record(self, name: str, unit: MetricUnit | str, value: float, controller: str | None = None) -> None:
        """Add one metric value to its Prometheus family (a counter, or a gauge in base units); with ``controller``
        also to its family per controller, if it has one (PER_CONTROLLER)."""
        kind, family, divisor = self._family(name, unit)
        if kind == "counter":
            if value > 0:
                family.inc(value)
        elif kind == "gauge":
            family.set(value / divisor)
        else:
            family.observe(value / divisor)
        per_controller = self._per_controller.get(name) if controller is not None and name in PER_CONTROLLER \
            else None
        if per_controller is not None:
            child = per_controller.labels(**{CONTROLLER_LABEL: controller})  # a 0 shows the controller is counted
            if value > 0:
                child.inc(value)

    def set_per_controller(self, name: str, values: Mapping[str, float]) -> None:
        """Readings of a gauge per controller (PER_CONTROLLER_GAUGES), each under its ``controller`` label; the
        unlabelled gauge is left as it is. A controller read before and missing now reads 0 (a level: none left)."""
        family = self._per_controller[name]
        with self._lock:
            before = self._gauge_labels.setdefault(name, set())
            for controller in before - set(values):
                family.labels(**{CONTROLLER_LABEL: controller}).set(0)
            before.update(values)
        for controller, value in values.items():
            family.labels(**{CONTROLLER_LABEL: controller}).set(value)

    def set_per_key(self, readings: Mapping[str, Mapping[str, float]]) -> None:
        """The capped keys' readings (key → {"in_flight": n, "cap": n}, KEY_GAUGES), each under its ``key`` label. A
        key read before and missing now (its cap removed) loses its series."""
        with self._lock:
            for key in self._keys_seen - set(readings):
                for family in self._key_gauges.values():
                    family.remove(key)
            self._keys_seen = set(readings)
        for key, values in readings.items():
            for name, family in self._key_gauges.items():
                family.labels(**{KEY_LABEL: key}).set(values[name])

    def job_label(self, job_name: str) -> str:
        """The job's label value: its own name while fewer than JOB_LABEL_LIMIT names have one, else "other"."""
        with self._lock:
            if job_name in self._job_labels:
                return job_name
            if len(self._job_labels) < JOB_LABEL_LIMIT and job_name != OTHER_JOBS:
                self._job_labels.add(job_name)
                return job_name
            return OTHER_JOBS

    def observe_job(self, name: str, job_name: str, seconds: float) -> None:
        """One observation of a per-job histogram (JOB_HISTOGRAMS), under the job's bounded label."""
        self._job_histograms[name].labels(job=self.job_label(job_name)).observe(seconds)

    def also_collect(self, source: Callable[[], Iterable[Any]] | None) -> None:
        """Add families read at scrape time (`serve`'s health: last pass, Jenkins and database up)."""
        self._extra = source

    def collect(self) -> Iterator[Any]:
        """The extra families of the server (prometheus_client's collector API)."""
        source = self._extra
        if source is not None:
            yield from source()

    def describe(self) -> list:
        """Nothing to describe ahead (prometheus_client's collector API)."""
        return []  # the extra families change with the server; nothing to check at registration


class MetricsFacade:
    """The one place metrics are recorded: EMF (when enabled) and Prometheus (when enabled), under a lock.

    The EMF metric set is shared by every thread in the process, and `serve` adds and flushes from the
    dispatcher thread and the webhook's threads at once: unguarded, a flush could iterate the set while
    another thread adds to it ("dictionary changed size during iteration") or flush a set another thread
    just emptied — and crash the process.
    """

    def __init__(self) -> None:
        self._emf = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=SERVICE)
        self._lock = threading.RLock()
        self._emf_enabled: bool | None = None  # None: as the environment says (config.emf_wanted)
        self._cold_start = True  # until the first invocation of this process
        self.prometheus: PrometheusSink | None = None

    @property
    def emf_enabled(self) -> bool:
        """Whether EMF lines are written (asked of config once; off when its value is invalid)."""
        if self._emf_enabled is None:
            try:
                self._emf_enabled = emf_wanted()
            except ConfigError:  # load_settings refuses the value with a proper message; stay quiet here
                self._emf_enabled = False
        return self._emf_enabled

    def configure(self, *, emf: bool | None) -> None:
        """Print EMF lines or not (from Settings.metrics_emf; None: back to what the environment says)."""
        with self._lock:
            if emf is False:
                self._emf.clear_metrics()
            self._emf_enabled = emf

    def enable_prometheus(self) -> Any:
        """Start feeding Prometheus (idempotent); returns its CollectorRegistry."""
        with self._lock:
            if self.prometheus is None:
                self.prometheus = PrometheusSink()
            return self.prometheus.registry

    def observe_settled(self, job_name: str, queue_wait_seconds: float | None, build_seconds: float | None) -> None:
        """A just-settled row's queue wait and build duration (``Outcomes.settle`` answers them; None: not known), in
        `serve`'s per-job histograms; nothing where Prometheus is off (Lambda)."""
        sink = self.prometheus
        if sink is None:
            return
        if queue_wait_seconds is not None:
            sink.observe_job("QueueWait", job_name, queue_wait_seconds)
        if build_seconds is not None:
            sink.observe_job("BuildDuration", job_name, build_seconds)

    def add_metric(self, *, name: str, unit: MetricUnit | str, value: float,
                   dimensions: Mapping[str, str] | None = None, controller: str | None = None) -> None:
        """Record one metric value in every sink that is on. With ``dimensions`` (``{"controller": "eu"}``)
        its EMF value is printed at once, in a line of its own, under two dimension sets: ``service`` alone,
        as without them (so alarms on it see every value), and ``service`` plus these (per controller).
        ``controller`` (else the one in ``dimensions``) labels it in Prometheus only: a labelled series costs
        nothing there, while each CloudWatch dimension set is a metric billed on its own."""
        with self._lock:
            if self.emf_enabled:
                if dimensions:
                    self._print_with_dimensions(name, unit, value, dimensions)
                else:
                    self._emf.add_metric(name=name, unit=unit, value=value)
        if self.prometheus is not None:
            label = controller if controller is not None else (dimensions or {}).get(CONTROLLER_LABEL)
            self.prometheus.record(name, unit, value, label)

    def set_per_controller(self, name: str, values: Mapping[str, float]) -> None:
        """Prometheus only: a gauge's reading per controller (``{"eu": 3, …}``), beside its unlabelled reading
        (given to ``add_metric``). CloudWatch gets no such series: each dimension set would be a metric billed."""
        if self.prometheus is not None:
            self.prometheus.set_per_controller(name, values)

    def set_per_key(self, readings: Mapping[str, Mapping[str, float]]) -> None:
        """Prometheus only: each capped concurrency key's rows in flight and cap (``PrometheusSink.set_per_key``).
        CloudWatch gets none: each key would be a dimension set, a metric billed on its own."""
        if self.prometheus is not None:
            self.prometheus.set_per_key(readings)

    def _print_with_dimensions(self, name: str, unit: MetricUnit | str, value: float,
                               dimensions: Mapping[str, str]) -> None:
        # Dimensions belong to a whole EMF line, not to one metric: added to the shared set they would move
        # every other metric of the pass off the dimension set the alarms watch. A provider of its own, then.
        line = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=SERVICE)
        for key, dimension in dimensions.items():
            line.add_dimension(name=key, value=dimension)
        line.add_metric(name=name, unit=unit, value=value)
        document = line.serialize_metric_set()
        for directive in document["_aws"]["CloudWatchMetrics"]:
            directive["Dimensions"] = [["service"], ["service", *dimensions]]
        print(json.dumps(document, separators=(",", ":")), flush=True)

    def flush_if_any(self) -> None:
        """Print what was added as one EMF line, if anything (an empty flush only warns, in Powertools)."""
        with self._lock:
            if self._emf.metric_set:
                self._emf.flush_metrics()

    def clear_metrics(self) -> None:
        """Drop the EMF metrics not flushed yet."""
        with self._lock:
            self._emf.clear_metrics()

    def log_metrics(self, handler: Callable[[Any, Any], Any] | None = None, *,
                    capture_cold_start_metric: bool = False) -> Any:
        """A Lambda handler's decorator: whatever is left is flushed when the invocation ends. With
        ``capture_cold_start_metric`` the process's first invocation also prints Powertools' ``ColdStart``
        metric (dimensions function_name and service) - when it starts, unlike Powertools' own decorator, which
        counts only cold starts whose invocation succeeded."""
        if handler is None:
            return functools.partial(self.log_metrics, capture_cold_start_metric=capture_cold_start_metric)

        @functools.wraps(handler)
        def wrapper(event: Any, context: Any) -> Any:
            if capture_cold_start_metric:
                self._count_cold_start(context)
            try:
                return handler(event, context)
            finally:
                self.flush_if_any()

        return wrapper

    def _count_cold_start(self, context: Any) -> None:
        with self._lock:
            cold, self._cold_start = self._cold_start, False
            if cold and self.emf_enabled:
                self._emf.add_cold_start_metric(context)  # its own EMF line, printed at once


metrics = MetricsFacade()

_tracer = None
_tracer_lock = threading.Lock()
_xray_missing = False  # tracing was asked for but the SDK is absent: said once, then off


def tracer():
    """The Powertools Tracer, created on first use; None while tracing is off (or its SDK is not installed)."""
    global _tracer, _xray_missing
    if _tracer is None and tracing_wanted() and not _xray_missing:
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


__all__ = ["logger", "metrics", "tracer", "subsegment", "MetricUnit", "MetricsFacade", "prometheus_name", "SERVICE",
           "NAMESPACE", "PER_CONTROLLER", "PER_CONTROLLER_GAUGES", "CONTROLLER_LABEL"]
