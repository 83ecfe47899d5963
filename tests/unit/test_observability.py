"""Metrics without a server: when EMF is on, the Prometheus names, one call feeding both sinks, and the
catalogue naming every metric the code emits."""

from __future__ import annotations

import json
import warnings

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jenkins_dispatch.config import emf_wanted, load_settings
from jenkins_dispatch.errors import ConfigError
from jenkins_dispatch.observability import MetricsFacade, MetricUnit, prometheus_name

BASE_ENV = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(families: dict, family: str, sample: str | None = None, **labels) -> float:
    for s in families[family].samples:
        if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {sample or family} {labels} in {families[family]}")


@pytest.mark.parametrize(("env", "expected"), [
    ({}, False),
    ({"AWS_LAMBDA_FUNCTION_NAME": "jd-dispatcher"}, True),
    ({"METRICS_EMF": "true"}, True),
    ({"METRICS_EMF": "1"}, True),
    ({"AWS_LAMBDA_FUNCTION_NAME": "jd-dispatcher", "METRICS_EMF": "false"}, False),
    ({"METRICS_EMF": ""}, False),
])
def test_emf_only_in_lambda_unless_asked(env, expected):
    assert emf_wanted(env) is expected
    assert load_settings({**BASE_ENV, **env}).metrics_emf is expected


def test_a_bad_metrics_emf_value_is_refused():
    with pytest.raises(ConfigError, match="METRICS_EMF"):
        load_settings({**BASE_ENV, "METRICS_EMF": "sometimes"})


@pytest.mark.parametrize(("name", "unit", "expected"), [
    ("Triggered", MetricUnit.Count, ("counter", "jenkins_dispatch_triggered")),
    ("JenkinsUnavailable", MetricUnit.Count, ("counter", "jenkins_dispatch_jenkins_unavailable")),
    ("TriggerErrorsHTTP404", MetricUnit.Count, ("counter", "jenkins_dispatch_trigger_errors_http404")),
    ("InFlight", MetricUnit.Count, ("gauge", "jenkins_dispatch_in_flight")),
    ("Pending", MetricUnit.Count, ("gauge", "jenkins_dispatch_pending")),
    ("OldestPendingAgeSeconds", MetricUnit.Seconds, ("gauge", "jenkins_dispatch_oldest_pending_age_seconds")),
    ("OldestTransactionAgeSeconds", MetricUnit.Seconds,
     ("gauge", "jenkins_dispatch_oldest_transaction_age_seconds")),
    ("PassDurationMs", MetricUnit.Milliseconds, ("histogram", "jenkins_dispatch_pass_duration_seconds")),
    ("NotificationLatency", MetricUnit.Milliseconds, ("histogram", "jenkins_dispatch_notification_latency_seconds")),
    ("PassesCompleted", MetricUnit.Count, ("counter", "jenkins_dispatch_passes_completed")),
])
def test_prometheus_names(name, unit, expected):
    assert prometheus_name(name, unit) == expected


def test_one_call_feeds_both_sinks_and_emf_stays_silent_unless_enabled(capsys):
    from prometheus_client import generate_latest

    facade = MetricsFacade()
    registry = facade.enable_prometheus()
    facade.configure(emf=False)
    facade.add_metric(name="Triggered", unit=MetricUnit.Count, value=3)
    facade.add_metric(name="InFlight", unit=MetricUnit.Count, value=7)
    facade.add_metric(name="InFlight", unit=MetricUnit.Count, value=5)
    facade.add_metric(name="PassDurationMs", unit=MetricUnit.Milliseconds, value=250)
    facade.flush_if_any()
    assert capsys.readouterr().out == ""
    families = _families(generate_latest(registry).decode())
    assert _value(families, "jenkins_dispatch_triggered", "jenkins_dispatch_triggered_total") == 3
    assert _value(families, "jenkins_dispatch_in_flight") == 5  # a gauge holds the latest reading
    assert _value(families, "jenkins_dispatch_pass_duration_seconds", "jenkins_dispatch_pass_duration_seconds_sum") \
        == pytest.approx(0.25)
    # Known families exist (at zero) before anything happened: alerts on them need no first event.
    assert _value(families, "jenkins_dispatch_jenkins_unavailable", "jenkins_dispatch_jenkins_unavailable_total") == 0

    facade.configure(emf=True)
    facade.add_metric(name="Triggered", unit=MetricUnit.Count, value=1)
    facade.flush_if_any()
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "Triggered"


def test_a_count_per_controller_gets_a_labelled_family_beside_the_sum(capsys):
    from prometheus_client import generate_latest

    facade = MetricsFacade()
    registry = facade.enable_prometheus()
    facade.configure(emf=True)
    facade.add_metric(name="Triggered", unit=MetricUnit.Count, value=2, controller="eu")
    facade.add_metric(name="Triggered", unit=MetricUnit.Count, value=3, controller="us")
    facade.add_metric(name="JenkinsUnavailable", unit=MetricUnit.Count, value=1, dimensions={"controller": "us"})
    facade.add_metric(name="JobsFailed", unit=MetricUnit.Count, value=1, controller="eu")  # not per controller
    facade.flush_if_any()
    families = _families(generate_latest(registry).decode())
    assert _value(families, "jenkins_dispatch_triggered", "jenkins_dispatch_triggered_total") == 5
    assert _value(families, "jenkins_dispatch_controller_triggered", "jenkins_dispatch_controller_triggered_total",
                  controller="eu") == 2
    assert _value(families, "jenkins_dispatch_controller_triggered", "jenkins_dispatch_controller_triggered_total",
                  controller="us") == 3
    assert _value(families, "jenkins_dispatch_controller_jenkins_unavailable",
                  "jenkins_dispatch_controller_jenkins_unavailable_total", controller="us") == 1
    assert "jenkins_dispatch_controller_jobs_failed" not in families
    # A gauge per controller is set apart: the unlabelled reading stays the one add_metric gave.
    facade.add_metric(name="InFlight", unit=MetricUnit.Count, value=4)
    facade.set_per_controller("InFlight", {"eu": 3, "us": 1})
    facade.set_per_controller("InFlight", {"eu": 0, "us": 1})
    families = _families(generate_latest(registry).decode())
    assert _value(families, "jenkins_dispatch_in_flight") == 4
    assert _value(families, "jenkins_dispatch_controller_in_flight", controller="eu") == 0
    assert _value(families, "jenkins_dispatch_controller_in_flight", controller="us") == 1
    # EMF: a Prometheus-only label adds no CloudWatch dimension; only ``dimensions`` do.
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dimension_sets = [d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for d in lines]
    assert [["service"], ["service", "controller"]] in dimension_sets
    assert sum(1 for d in lines if "controller" in d) == 1


def test_each_capped_key_gets_its_series_and_loses_them_with_its_cap(capsys):
    from prometheus_client import generate_latest

    facade = MetricsFacade()
    registry = facade.enable_prometheus()
    facade.configure(emf=True)
    facade.set_per_key({"deploy:prod": {"in_flight": 1, "cap": 1}, "deploy:dev": {"in_flight": 0, "cap": 3}})
    families = _families(generate_latest(registry).decode())
    assert _value(families, "jenkins_dispatch_key_in_flight", key="deploy:prod") == 1
    assert _value(families, "jenkins_dispatch_key_cap", key="deploy:dev") == 3
    facade.set_per_key({"deploy:prod": {"in_flight": 0, "cap": 2}})
    families = _families(generate_latest(registry).decode())
    assert {s.labels["key"] for s in families["jenkins_dispatch_key_cap"].samples} == {"deploy:prod"}
    assert _value(families, "jenkins_dispatch_key_cap", key="deploy:prod") == 2
    facade.flush_if_any()
    assert capsys.readouterr().out == ""  # CloudWatch gets no series per key


def test_an_invocation_that_published_nothing_warns_nothing(capsys):
    """Powertools' own decorator warned "No application metrics to publish" (a non-JSON stderr line) after
    every continuous invocation: the loop flushes after each pass, so nothing is left at the end."""
    facade = MetricsFacade()
    facade.configure(emf=True)

    @facade.log_metrics
    def handler(event, context):
        return "done"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert handler({}, None) == "done"
        facade.flush_if_any()
    assert [str(w.message) for w in caught] == []
    assert capsys.readouterr().out == ""


def test_every_fixed_metric_name_in_the_code_is_in_the_catalogue():
    """Prometheus declares the catalogue's metrics up front with their meaning; a name emitted by the code
    but missing there would appear only once it happened, with no help text."""
    import re
    from pathlib import Path

    from jenkins_dispatch.callbacks.webhook import OUTCOMES
    from jenkins_dispatch.observability import CATALOGUE

    package = Path(__file__).resolve().parents[2] / "layers/shared/jenkins_dispatch"
    source = "".join(p.read_text() for p in package.rglob("*.py"))
    emitted = set(re.findall(r'add_metric\(name="(\w+)"', source))
    emitted |= set(re.findall(r'\("(\w+)", s\.[\w.]+\)', source))  # the pass summary's counts, in a loop
    emitted |= {name for name, _level in OUTCOMES.values()} | {"JobsCompleted", "JobsFailed"}
    assert {"Triggered", "JenkinsUnavailable", "PassesCompleted", "NotificationsAccepted"} <= emitted
    assert sorted(emitted - set(CATALOGUE)) == []


class _Context:
    function_name = "jenkins-dispatch-webhook"
    function_version = "7"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-webhook:live"
    memory_limit_in_mb = 256
    aws_request_id = "c0ffee00-0000-4000-8000-000000000002"


def _emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_the_first_invocation_of_a_process_counts_one_cold_start(capsys):
    """Powertools' capture_cold_start_metric: one ColdStart (dimensions function_name and service) from the
    first invocation only - counted when it starts, so a cold start whose invocation fails is counted too."""
    facade = MetricsFacade()
    facade.configure(emf=True)
    calls = []

    @facade.log_metrics(capture_cold_start_metric=True)
    def handler(event, context):
        calls.append(event)
        if event == "fail":
            raise RuntimeError("boom")
        return "done"

    with pytest.raises(RuntimeError):
        handler("fail", _Context())
    [cold] = _emf_lines(capsys.readouterr().out)
    [definition] = cold["_aws"]["CloudWatchMetrics"]
    assert definition["Namespace"] == "JenkinsDispatch"
    assert [m["Name"] for m in definition["Metrics"]] == ["ColdStart"]
    assert set(definition["Dimensions"][0]) == {"function_name", "service"}
    assert (cold["ColdStart"], cold["function_name"], cold["service"]) == (
        [1.0] if isinstance(cold["ColdStart"], list) else 1.0, "jenkins-dispatch-webhook", "jenkins-dispatch")
    assert handler("warm", _Context()) == "done"
    assert _emf_lines(capsys.readouterr().out) == []
    assert calls == ["fail", "warm"]


def test_no_cold_start_metric_without_emf_or_without_asking(capsys):
    quiet = MetricsFacade()
    quiet.configure(emf=False)
    plain = MetricsFacade()
    plain.configure(emf=True)
    quiet.log_metrics(capture_cold_start_metric=True)(lambda e, c: None)({}, _Context())
    plain.log_metrics(lambda e, c: None)({}, _Context())
    assert capsys.readouterr().out == ""


def test_every_handler_counts_cold_starts_and_says_why_tracing_and_metrics_are_lazy():
    from pathlib import Path

    functions = Path(__file__).resolve().parents[2] / "functions"
    for name in ("dispatcher", "webhook", "migrate"):
        source = (functions / name / "app.py").read_text()
        if name != "migrate":  # the custom resource runs once per deploy: always cold, no metric to add
            assert "@metrics.log_metrics(capture_cold_start_metric=True)" in source, name
        assert "cold start" in source.lower() and "lazy" in source.lower(), name


@pytest.mark.parametrize(("value", "terminal", "expected"), [
    (None, True, "text"), (None, False, "json"), ("auto", True, "text"), ("json", True, "json"),
    ("text", False, "text"), (" TEXT ", False, "text"), ("yaml", True, "text"), ("yaml", False, "json"),
])
def test_log_format_text_on_a_terminal_unless_told(value, terminal, expected):
    from jenkins_dispatch.config import log_format_wanted

    assert log_format_wanted(terminal, {} if value is None else {"LOG_FORMAT": value}) == expected


def test_a_log_record_as_a_line_for_a_person():
    from jenkins_dispatch.observability import human_line

    line = human_line({"level": "WARNING", "location": "run:12", "message": "pass stopped",
                       "timestamp": "2026-11-30 15:24:01,123+0000", "service": "jenkins-dispatch",
                       "reason": "Jenkins answered 503", "job_id": 7, "summary": {"claimed": 2}, "dispatch_id": None})
    assert line == ('15:24:01,123 WARNING pass stopped  reason="Jenkins answered 503" job_id=7 '
                    'summary={"claimed": 2}')
    traced = human_line({"level": "ERROR", "message": "boom", "timestamp": "2026-11-30 15:24:01,123+0000",
                         "exception": "Traceback (most recent call last):\nZeroDivisionError"})
    assert traced.splitlines()[1:] == ["Traceback (most recent call last):", "ZeroDivisionError"]
