"""`serve` as a process: only JSON on its log, Prometheus metrics at GET /metrics."""

from __future__ import annotations

import json
import time
import urllib.request

from ..dispatch_helpers import wait_for
from ..serve_helpers import completed_notification, http_post, serve_env, start_serve
from ..unit.test_observability import _families, _value

BASE_ENV = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}


def _scrape(base: str) -> tuple[str, str]:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        return answer.headers["Content-Type"], answer.read().decode()


def test_serve_prints_only_json_logs_and_exposes_prometheus_metrics(jenkins, database_url, queue, tmp_path):
    env = serve_env(database_url, jenkins.base_url)
    for name in ("AWS_LAMBDA_FUNCTION_NAME", "METRICS_EMF"):
        env.pop(name, None)
    started = time.time()
    served = start_serve(env, tmp_path / "serve.log", "--interval", "0.3")
    try:
        job_id = queue.enqueue("deploy").id
        assert wait_for(lambda: queue.get(job_id)["jenkins_queue_id"] is not None, timeout=15)
        body = completed_notification(queue.get(job_id))
        assert http_post(served.notify_url, body)[0] == 200
        assert http_post(served.base + "/jenkins/notify?token=wrong", body)[0] == 401
        time.sleep(0.8)  # a few idle passes
        content_type, text = _scrape(served.base)
        scraped = time.time()
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
    assert started <= _value(families, "jenkins_dispatch_last_pass_timestamp_seconds") <= scraped  # one of its passes
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
