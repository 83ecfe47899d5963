"""Metrics: CloudWatch EMF in Lambda (or when asked), Prometheus at `serve`'s GET /metrics, one code path."""

from __future__ import annotations

import json
import time
import urllib.request
import warnings

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jenkins_dispatch.config import emf_wanted, load_settings
from jenkins_dispatch.errors import ConfigError
from jenkins_dispatch.observability import MetricsFacade, MetricUnit, prometheus_name

from ..dispatch_helpers import wait_for
from ..serve_helpers import http_post, serve_env, start_serve

BASE_ENV = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}


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


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(families: dict, family: str, sample: str | None = None, **labels) -> float:
    for s in families[family].samples:
        if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {sample or family} {labels} in {families[family]}")


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


def _scrape(base: str) -> tuple[str, str]:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        return answer.headers["Content-Type"], answer.read().decode()


def test_serve_prints_only_json_logs_and_exposes_prometheus_metrics(jenkins, database_url, queue, tmp_path):
    env = serve_env(database_url, jenkins.base_url)
    for name in ("AWS_LAMBDA_FUNCTION_NAME", "METRICS_EMF"):
        env.pop(name, None)
    served = start_serve(env, tmp_path / "serve.log", "--interval", "0.3")
    try:
        job_id = queue.enqueue("deploy").id
        assert wait_for(lambda: queue.get(job_id)["jenkins_queue_id"] is not None, timeout=15)
        row = queue.get(job_id)
        body = {"name": "deploy", "url": "job/deploy/", "build": {
            "number": 7, "queue_id": row["jenkins_queue_id"], "phase": "COMPLETED", "status": "SUCCESS",
            "url": "job/deploy/7/", "parameters": {"DISPATCH_ID": row["dispatch_id"]}}}
        assert http_post(served.notify_url, body)[0] == 200
        assert http_post(served.base + "/jenkins/notify?token=wrong", body)[0] == 401
        time.sleep(0.8)  # a few idle passes
        content_type, text = _scrape(served.base)
        assert [d["kind"] for d in queue.dispatchers() if d["live"]].count("serve") >= 1  # its heartbeat
    finally:
        assert served.stop() == 0
    assert content_type.startswith("text/plain") and "version=" in content_type
    families = _families(text)
    assert _value(families, "jenkins_dispatch_triggered", "jenkins_dispatch_triggered_total") == 1
    assert _value(families, "jenkins_dispatch_claimed", "jenkins_dispatch_claimed_total") == 1
    assert _value(families, "jenkins_dispatch_notifications_accepted",
                  "jenkins_dispatch_notifications_accepted_total") == 1
    assert _value(families, "jenkins_dispatch_jobs_completed", "jenkins_dispatch_jobs_completed_total") == 1
    assert _value(families, "jenkins_dispatch_notifications_rejected_auth",
                  "jenkins_dispatch_notifications_rejected_auth_total") == 1
    assert _value(families, "jenkins_dispatch_jenkins_unavailable", "jenkins_dispatch_jenkins_unavailable_total") == 0
    assert _value(families, "jenkins_dispatch_passes_completed", "jenkins_dispatch_passes_completed_total") >= 3
    assert _value(families, "jenkins_dispatch_in_flight") == 0
    assert _value(families, "jenkins_dispatch_pending") == 0
    assert _value(families, "jenkins_dispatch_oldest_transaction_age_seconds") >= 0
    assert time.time() - _value(families, "jenkins_dispatch_last_pass_timestamp_seconds") < 10
    assert _value(families, "jenkins_dispatch_pass_duration_seconds",
                  "jenkins_dispatch_pass_duration_seconds_count") >= 3
    assert _value(families, "jenkins_dispatch_jenkins_up") == 1
    assert _value(families, "jenkins_dispatch_database_up") == 1

    lines = [line for line in served.log().splitlines() if line.strip()]
    assert lines, "serve printed nothing"
    for line in lines:
        doc = json.loads(line)  # every line is JSON: no EMF blob, no warning, no traceback
        assert isinstance(doc, dict) and "_aws" not in doc, line[:200]
        assert "message" in doc, line[:200]


def test_every_fixed_metric_name_in_the_code_is_in_the_catalogue():
    """Prometheus declares the catalogue's metrics up front with their meaning; a name emitted by the code
    but missing there would appear only once it happened, with no help text."""
    import re
    from pathlib import Path

    from jenkins_dispatch.observability import CATALOGUE
    from jenkins_dispatch.webhook import OUTCOMES

    package = Path(__file__).resolve().parents[2] / "layers/shared/jenkins_dispatch"
    source = "".join(p.read_text() for p in package.glob("*.py"))
    emitted = set(re.findall(r'add_metric\(name="(\w+)"', source))
    emitted |= set(re.findall(r'\("(\w+)", s\.[\w.]+\)', source))  # the pass summary's counts, in a loop
    emitted |= {name for name, _level in OUTCOMES.values()} | {"JobsCompleted", "JobsFailed"}
    assert {"Triggered", "JenkinsUnavailable", "PassesCompleted", "NotificationsAccepted"} <= emitted
    assert sorted(emitted - set(CATALOGUE)) == []
