"""Several controllers in the dispatcher function (issue 23, AWS): one pass over all of them, and
JenkinsUnavailable per controller - with several controllers the metric also carries a `controller` dimension,
for the dashboard's per-controller widget, while its plain `service` series (the one JenkinsUnavailableAlarm
watches) stays as it was; with one controller nothing changes."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching import dispatcher as dispatcher_module
from jenkins_dispatch.dispatching.breaker import breaker_for
from jenkins_dispatch.dispatching.decisions import Evidence
from jenkins_dispatch.dispatching.dispatcher import Dispatcher
from jenkins_dispatch.observability import MetricsFacade, MetricUnit

ONE = {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "https://ci.example.com/",
       "JENKINS_USER": "dispatch", "JENKINS_API_TOKEN": "t0ken"}
SEVERAL = {**ONE, "JENKINS_CONTROLLERS": json.dumps(
    {"eu": {"url": "https://ci-eu.example.com/", "user": "dispatch", "api_token": "t1"}})}


def _emf(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_metric_with_dimensions_is_published_under_service_alone_and_per_controller(capsys):
    facade = MetricsFacade()
    facade.configure(emf=True)
    facade.add_metric(name="Triggered", unit=MetricUnit.Count, value=2)
    facade.add_metric(name="JenkinsUnavailable", unit=MetricUnit.Count, value=1, dimensions={"controller": "eu"})
    [own] = _emf(capsys.readouterr().out)  # printed at once, in a line of its own
    [directive] = own["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "JenkinsDispatch"
    assert directive["Dimensions"] == [["service"], ["service", "controller"]]
    assert [m["Name"] for m in directive["Metrics"]] == ["JenkinsUnavailable"]
    assert own["service"] == "jenkins-dispatch" and own["controller"] == "eu"
    # The other metrics keep their line and their dimension set: no controller leaks into them.
    facade.flush_if_any()
    [shared] = _emf(capsys.readouterr().out)
    assert shared["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    assert "controller" not in shared and "JenkinsUnavailable" not in shared


def test_dimensions_print_nothing_while_emf_is_off(capsys):
    facade = MetricsFacade()
    facade.configure(emf=False)
    facade.add_metric(name="JenkinsUnavailable", unit=MetricUnit.Count, value=1, dimensions={"controller": "eu"})
    facade.flush_if_any()
    assert capsys.readouterr().out == ""


class _Db:
    """Enough of a session for a pass that stops before its first statement."""
    dialect = "postgresql"
    statements = 0


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict | None, str | None]] = []

    def add_metric(self, *, name, unit, value, dimensions=None, controller=None):
        self.calls.append((name, dimensions, controller))


@pytest.mark.parametrize(("env", "controller", "expected"), [
    (ONE, "default", None),  # one controller: the metric as before
    (SEVERAL, "default", {"controller": "default"}),
    (SEVERAL, "eu", {"controller": "eu"}),
])
def test_a_pass_stopped_by_its_jenkins_names_the_controller_only_when_there_are_several(
        monkeypatch, env, controller, expected):
    settings = load_settings(env).for_controller(controller)
    breaker = breaker_for(settings)
    breaker.record_failure(None, Evidence.DOWN, "HTTP 503")  # open: the pass stops before asking anything
    recorder = _Recorder()
    monkeypatch.setattr(dispatcher_module, "metrics", recorder)
    monkeypatch.setattr(Dispatcher, "enqueue_due_ticks", lambda self: None)
    monkeypatch.setattr(Dispatcher, "_emit_counts", lambda self: None)
    monkeypatch.setattr(Dispatcher, "_emit_pass_metrics", lambda self: None)
    summary = Dispatcher(settings, _Db(), client=None, breaker=breaker).run()  # type: ignore[arg-type]
    assert summary["jenkins_unavailable"] is True
    # Prometheus labels it with its controller in every case (a label costs nothing there; a dimension does).
    assert recorder.calls == [("JenkinsUnavailable", expected, controller)]


def test_a_single_pass_over_several_controllers_opens_a_session_per_extra_controller(monkeypatch):
    """The Lambda's one-pass mode (ContinuousDispatch=false) with several controllers: each controller after the
    first gets a session of its own (it named a class that is not imported: NameError on every such pass)."""
    from jenkins_dispatch.dispatching.dispatcher import PassSummary, run_pass

    opened: list[str] = []

    class _Session(_Db):
        def close(self) -> None:
            pass

    def open_database(settings, application_name="jenkins-dispatch"):
        opened.append(application_name)
        return _Session()

    monkeypatch.setattr(dispatcher_module, "open_database", open_database)
    monkeypatch.setattr(dispatcher_module, "fail_rows_of_unknown_controllers", lambda settings, queue: 0)
    monkeypatch.setattr(Dispatcher, "run", lambda self, max_jobs=None: PassSummary().as_dict())
    run_pass(load_settings(SEVERAL), db=_Session())  # type: ignore[arg-type]
    assert opened == ["jenkins-dispatch-eu"]
