"""Heartbeat decisions: how long a dispatcher counts as live, how a pass ended, what it learned about Jenkins."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching.breaker import breaker_for
from jenkins_dispatch.dispatching.heartbeat import Heartbeat, jenkins_state, pass_outcome, stale_after_seconds


@pytest.mark.parametrize(("kind", "interval", "expected"), [
    ("serve", 10.0, 300.0),  # a pass can take a lease, a Jenkins outage backs off: never under five minutes
    ("serve", 600.0, 1800.0),  # three periods of a slow one
    ("lambda", 10.0, 300.0),
    ("lambda", None, 300.0),  # one pass per schedule tick: the period is the template's, not known here
    ("cli", None, 300.0),
])
def test_how_long_a_dispatcher_counts_as_live(kind, interval, expected):
    assert stale_after_seconds(interval) == expected


@pytest.mark.parametrize(("summary", "expected"), [
    ({"stopped_because": "queue empty", "jenkins_unavailable": False}, ("ok", "queue empty")),
    ({"stopped_because": "cap reached", "jenkins_unavailable": False}, ("ok", "cap reached")),
    ({"stopped_because": "Jenkins unavailable: HTTP 503", "jenkins_unavailable": True},
     ("jenkins_unavailable", "Jenkins unavailable: HTTP 503")),
    ({"passes": 3, "stopped_because": "time nearly up"}, ("ok", "time nearly up")),
])
def test_how_a_finished_pass_ended(summary, expected):
    assert pass_outcome(summary) == expected


@pytest.mark.parametrize(("summary", "talked", "expected"), [
    ({"jenkins_unavailable": True, "stopped_because": "Jenkins unavailable: HTTP 503"}, True,
     (False, "Jenkins unavailable: HTTP 503")),
    ({"jenkins_unavailable": False, "stopped_because": "queue empty"}, True, (True, None)),
    ({"jenkins_unavailable": False, "stopped_because": "queue empty"}, False, (None, None)),  # not asked
])
def test_what_a_pass_learned_about_jenkins(summary, talked, expected):
    assert jenkins_state(summary, talked) == expected


def _beat(ident: str, live: bool, controllers) -> dict:
    return {"id": ident, "live": live, "controllers": controllers}


UP = {"status": "ok", "since": "t1", "reason": None}
DOWN = {"status": "unavailable", "since": "t2", "reason": "HTTP 503"}
UNKNOWN = {"status": "unknown", "since": None, "reason": None}


@pytest.mark.parametrize(("dispatchers", "expected"), [
    ([], {}),
    ([_beat("s1", True, None)], {}),  # a heartbeat from before the column: no word on any controller
    ([_beat("s1", True, {"a": UP, "b": DOWN})],
     {"a": {**UP, "seen_by": "s1"}, "b": {**DOWN, "seen_by": "s1"}}),
    # The most recent pass first: its word wins; a dispatcher not live says nothing.
    ([_beat("s2", True, {"b": UP}), _beat("s1", True, {"b": DOWN})], {"b": {**UP, "seen_by": "s2"}}),
    ([_beat("s2", False, {"b": UP}), _beat("s1", True, {"b": DOWN})], {"b": {**DOWN, "seen_by": "s1"}}),
    # "unknown" (never asked by that one) is no word: the next dispatcher's stands.
    ([_beat("s2", True, {"b": UNKNOWN}), _beat("s1", True, {"b": DOWN})], {"b": {**DOWN, "seen_by": "s1"}}),
    ([_beat("s2", True, {"b": UNKNOWN})], {}),
])
def test_each_controllers_breaker_as_the_live_dispatchers_recorded_it(dispatchers, expected):
    from jenkins_dispatch.operating.waiting import controller_health

    assert controller_health(dispatchers) == expected


def test_a_heartbeat_records_the_caps_each_controller_is_held_to():
    """What `show` and the page tell a waiting row from, whatever the caps of whoever asks (issue 33)."""
    settings = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "https://ci/",
                              "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t", "MAX_IN_FLIGHT": "40",
                              "JENKINS_CONTROLLERS": json.dumps({"eu": {"url": "https://eu/", "user": "u",
                                                                       "api_token": "t", "max_in_flight": 4}})})
    beat = Heartbeat("serve", interval=1)
    beat.serves({name: breaker_for(settings.for_controller(name)) for name in ("default", "eu")}, settings)
    doc = beat.controllers()
    assert {name: (state["max_in_flight"], state["own_max_in_flight"]) for name, state in doc.items()} == {
        "default": (40, None), "eu": (40, 4)}
    assert doc["eu"]["status"] == "unknown"  # the breaker's state beside them, as before
