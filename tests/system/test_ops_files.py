"""deploy/: the Prometheus alert rules, the Grafana dashboard and the systemd unit for `serve` (issue 25 item 7).

Every metric they name must be one a real `serve` exports at GET /metrics; the rules must pass
`promtool check rules` and the unit `systemd-analyze verify` (skipped, saying why, where the tools are absent:
.ci/run installs both)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ..dispatch_helpers import wait_for
from ..serve_helpers import serve_env, start_serve
from ..unit.test_observability import _families

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/jenkins-dispatch.rules.yml"
DASHBOARD = ROOT / "deploy/grafana/jenkins-dispatch.json"
UNIT = ROOT / "deploy/systemd/jenkins-dispatch.service"
METRIC = re.compile(r"\bjenkins_dispatch_[a-z0-9_]+")
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum", "_created"),
            "unknown": ("",)}


def _exported(base: str) -> set[str]:
    """Every sample name /metrics can carry: families are listed from the start, even a labelled histogram
    that has no sample yet."""
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        families = _families(answer.read().decode())
    return {family.name + suffix for family in families.values() for suffix in SUFFIXES[family.type]}


def _dashboard_exprs() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in doc["panels"] for target in panel["targets"]]


def test_the_rules_and_the_dashboard_name_only_metrics_serve_exports(jenkins, database_url, queue, tmp_path):
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log", "--interval", "0.3")
    try:
        job_id = queue.enqueue("deploy").id  # Jenkins asked once: jenkins_up has a reading
        assert wait_for(lambda: queue.get(job_id)["jenkins_queue_id"] is not None, timeout=15)
        exported = _exported(served.base)
    finally:
        assert served.stop() == 0
    named_in_rules = set(METRIC.findall(RULES.read_text()))
    assert len(named_in_rules) >= 8
    assert named_in_rules <= exported, sorted(named_in_rules - exported)
    for title, expr in _dashboard_exprs():
        names = set(METRIC.findall(expr))
        assert names, f"panel {title!r}: {expr} names no metric of ours"
        assert names <= exported, f"panel {title!r}: {sorted(names - exported)} not exported"


def test_the_dashboard_is_a_well_formed_grafana_dashboard():
    doc = json.loads(DASHBOARD.read_text())
    assert isinstance(doc["title"], str) and doc["title"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", doc["uid"])
    assert isinstance(doc["schemaVersion"], int) and doc["schemaVersion"] >= 30
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in doc["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 10
    for panel in doc["panels"]:
        assert panel["type"] in ("stat", "timeseries", "gauge", "table", "bargauge"), panel["title"]
        assert isinstance(panel["title"], str) and panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in "xywh") and grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert isinstance(target["expr"], str) and target["expr"].strip()
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            for variable in re.findall(r"\$(\w+)", target["expr"]):
                assert variable in variables or variable.startswith("__"), f"{panel['title']}: ${variable} unknown"
    # the asks: queue wait and build duration, p50/p95, overall and per job
    exprs = " ".join(expr for _, expr in _dashboard_exprs())
    for metric in ("queue_wait_seconds", "build_duration_seconds"):
        assert f"histogram_quantile(0.95, sum by (le, job) (rate(jenkins_dispatch_{metric}_bucket" in exprs
        assert f"histogram_quantile(0.5, sum by (le) (rate(jenkins_dispatch_{metric}_bucket" in exprs


def test_promtool_accepts_the_rules():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus; .ci/run does)")
    proc = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_systemd_accepts_the_unit(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd; .ci/run does)")
    text = UNIT.read_text()
    for option in ("Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes",
                   "DynamicUser=yes", "EnvironmentFile=/etc/jenkins-dispatch/serve.env"):
        assert f"\n{option}\n" in text, option
    # verify checks that ExecStart's program exists: point it at this checkout's entry point
    entry = Path(sys.executable).with_name("jenkins-dispatch")
    if not entry.exists():
        pytest.skip(f"no {entry}: install the package (make install)")
    local = tmp_path / UNIT.name
    local.write_text(text.replace("/opt/jenkins-dispatch/bin/jenkins-dispatch", str(entry)))
    proc = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True, timeout=60)
    # an unknown or misplaced key is only a warning (exit 0): any output at all is a failure here
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr
