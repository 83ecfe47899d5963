"""`serve`'s GET /metrics per controller (issue 23): with one controller down, the series labelled with that
controller's name say so (its breaker, its stopped passes), beside the other's, while the unlabelled series that
the alert rules and the dashboard read stay as they were."""

from __future__ import annotations

import json
import urllib.request

import pytest

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..serve_helpers import serve_env, start_serve
from ..unit.test_observability import _families, _value

pytestmark = pytest.mark.both_engines


def _scrape(base: str) -> dict:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        return _families(answer.read().decode())


def test_metrics_name_the_controller_that_is_down(make_jenkins, queue, database_url, tmp_path):
    a, b = make_jenkins(), make_jenkins()
    b.restart(window_seconds=60)  # b answers 503 to everything for the whole test
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}}
    served = start_serve(serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers),
                                   JENKINS_RETRY_BASE_SECONDS="0.5", JENKINS_RETRY_MAX_SECONDS="2"),
                         tmp_path / "serve.log", "--interval", "0.3")
    try:
        on_a = queue.enqueue("deploy").id
        queue.enqueue("deploy", controller="b")
        assert wait_for(lambda: queue.get(on_a)["jenkins_queue_id"] is not None, timeout=15)
        assert wait_for(lambda: served.health()[1]["controllers"]["b"]["status"] == "unavailable", timeout=15)

        def stopped_on_b() -> float:
            families = _scrape(served.base)
            try:
                return _value(families, "jenkins_dispatch_controller_jenkins_unavailable",
                              "jenkins_dispatch_controller_jenkins_unavailable_total", controller="b")
            except AssertionError:  # no sample before the first stopped pass: b's breaker may open before it
                return 0.0

        assert wait_for(lambda: stopped_on_b() >= 1, timeout=15)
        # b's lane probes its breaker now and then: its row is claimed, refused (503) and released within that
        # attempt, and a pass's gauges taken meanwhile count it in flight. Read a scrape from between two probes;
        # a row left in flight never gives one.
        scraped: list[dict] = []

        def between_probes() -> bool:
            scraped[:] = [_scrape(served.base)]
            return _value(scraped[0], "jenkins_dispatch_controller_in_flight", controller="b") == 0

        assert wait_for(between_probes, timeout=15), "b's row stayed in flight"
        families = scraped[0]
        assert _value(families, "jenkins_dispatch_controller_up", controller="b") == 0
        assert _value(families, "jenkins_dispatch_controller_up", controller="default") == 1
        assert _value(families, "jenkins_dispatch_controller_triggered", "jenkins_dispatch_controller_triggered_total",
                      controller="default") == 1, served.log()[-4000:]
        assert _value(families, "jenkins_dispatch_controller_triggered", "jenkins_dispatch_controller_triggered_total",
                      controller="b") == 0
        # Rows in flight per controller: a's row is in Jenkins, b's waits (its trigger failed: released).
        assert _value(families, "jenkins_dispatch_controller_in_flight", controller="default") == 1
        assert _value(families, "jenkins_dispatch_controller_in_flight", controller="b") == 0
        assert _value(families, "jenkins_dispatch_in_flight") == 1
        # The unlabelled series stay: every controller's together, as with one controller.
        assert _value(families, "jenkins_dispatch_triggered", "jenkins_dispatch_triggered_total") == 1
        assert _value(families, "jenkins_dispatch_jenkins_unavailable",
                      "jenkins_dispatch_jenkins_unavailable_total") >= 1
        labelled = {s.labels.get("controller") for f in families.values() for s in f.samples}
        assert labelled - {None} == {"default", "b"}, labelled  # configured names only: a bounded label
    finally:
        assert served.stop() == 0, served.log()[-3000:]


def test_metrics_give_each_capped_keys_rows_in_flight_and_its_cap(make_jenkins, queue, database_url, tmp_path):
    """A key capped at 1 with a 60 s build holding it, another capped at 3 with nothing in flight: each one's series
    under its own label; a key whose cap is removed loses them."""
    jenkins = make_jenkins(notification=None)
    queue.set_key_limit("deploy:prod", 1)
    queue.set_key_limit("deploy:dev", 3)
    for _ in range(2):
        queue.enqueue("deploy", {"EMULATOR_DURATION": "60"}, concurrency_key="deploy:prod")
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log", "--interval", "0.3")
    try:
        def keys() -> dict:
            families = _scrape(served.base)
            try:
                return {key: (_value(families, "jenkins_dispatch_key_in_flight", key=key),
                              _value(families, "jenkins_dispatch_key_cap", key=key))
                        for key in ("deploy:prod", "deploy:dev")}
            except AssertionError:  # before the first pass's gauges
                return {}

        assert wait_for(lambda: keys() == {"deploy:prod": (1, 1), "deploy:dev": (0, 3)}, timeout=20), (
            keys(), served.log()[-3000:])
        queue.remove_key_limit("deploy:dev")

        def labelled() -> set:
            return {s.labels["key"] for s in _scrape(served.base)["jenkins_dispatch_key_cap"].samples}

        assert wait_for(lambda: labelled() == {"deploy:prod"}, timeout=20), labelled()
    finally:
        served.stop()
