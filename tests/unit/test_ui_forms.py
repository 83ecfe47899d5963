"""The web page's pure parts: reading filters and caps, who may listen where, tokens, the overview's hours,
Jenkins's state and controllers, moments as operators type them."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch import moments
from jenkins_dispatch.errors import ConfigError, InvalidInput
from jenkins_dispatch.operating.overview import (
    controller_rows,
    controllers_on_the_page,
    hourly,
    jenkins_health,
)
from jenkins_dispatch.store.queue import Pause
from jenkins_dispatch.ui import forms, security

NOW = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)


def q(**fields):
    return {k: v if isinstance(v, list) else [v] for k, v in fields.items()}


@pytest.mark.parametrize(("query", "expected"), [
    ({}, {}),
    (q(status="failed", job=" deploy ", error="timeout"), {"status": "failed", "job_name": "deploy", "error_like": "timeout"}),
    (q(status="", job="", since="", error=""), {}),  # blank fields of a submitted form mean no filter
    (q(param=["ENV=prod", "N=5"]), {"parameters": {"ENV": "prod", "N": "5"}}),
    (q(param="MSG=a=b"), {"parameters": {"MSG": "a=b"}}),
    (q(before="40", limit="10"), {"before": 40, "limit": 10}),
])
def test_job_filters_read_the_query(query, expected):
    filters = forms.job_filters(query)
    got = {k: v for k, v in vars(filters).items() if v not in (None, {}) and not (k == "limit" and v == forms.PAGE_SIZE)}
    assert got == expected


@pytest.mark.parametrize(("query", "message"), [
    (q(status="bogus"), "status: unknown status 'bogus'"),
    (q(status=["failed", "pending"]), "status: give one value, not 2"),
    (q(since="yesterday-ish"), "bad time 'yesterday-ish'"),
    (q(param="novalue"), "param: expected KEY=VALUE"),
    (q(param="a b=1"), "param: expected KEY=VALUE"),
    (q(param='x"]=1'), "param: expected KEY=VALUE"),
    (q(before="0"), "before: expected a job id"),
    (q(param=["A=1", "B=2", "C=3", "D=4"]), "param: at most 3 parameter filters"),
    (q(before="1e3"), "before: expected a job id"),
    (q(limit="0"), "limit: expected a whole number from 1 to 500"),
    (q(job="x" * 2000), "job: at most 1024 characters"),
])
def test_bad_filters_are_refused_naming_the_field(query, message):
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("(", r"\(")):
        forms.job_filters(query)


def test_since_reads_durations_and_iso_times():
    filters = forms.job_filters(q(since="1h"))
    assert filters.since_text == "1h"
    assert abs((datetime.now(UTC) - timedelta(hours=1) - filters.since).total_seconds()) < 5
    assert moments.since("30m", NOW) == NOW - timedelta(minutes=30)
    assert moments.since("2026-11-30T12:00:00", NOW) == datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert moments.later("+5m", NOW) == NOW + timedelta(minutes=5)
    with pytest.raises(InvalidInput, match="bad time '\\+5m'"):
        moments.since("+5m", NOW)


def test_filters_round_trip_through_their_query_string():
    filters = forms.job_filters(q(status="failed", job="team/app deploy", since="1h", error="50% done",
                                  param=["ENV=a&b"], limit="20"))
    again = forms.job_filters({k: [v] if not isinstance(v, list) else v
                               for k, v in _parse(filters.query(before=7)).items()})
    assert (again.status, again.job_name, again.since_text, again.error_like, again.parameters, again.limit,
            again.before) == ("failed", "team/app deploy", "1h", "50% done", {"ENV": "a&b"}, 20, 7)


def _parse(text):
    from urllib.parse import parse_qs

    return parse_qs(text)


@pytest.mark.parametrize(("text", "expected"), [("3", 3), (" 0 ", 0), ("", None), (None, None)])
def test_cap_reads_a_count_or_blank(text, expected):
    assert forms.cap(text) == expected


@pytest.mark.parametrize("text", ["-1", "1.5", "many", "9999999999"])
def test_cap_refuses_anything_else(text):
    with pytest.raises(InvalidInput, match="cap: expected a whole number"):
        forms.cap(text)


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("ui.example.com", False), ("", False),
])
def test_loopback_hosts(host, loopback):
    assert security.is_loopback(host) is loopback


def test_a_non_loopback_address_needs_a_token():
    security.check_listen("127.0.0.1", None)
    security.check_listen("0.0.0.0", "a-token")
    with pytest.raises(ConfigError, match="UI_TOKEN") as refused:
        security.check_listen("0.0.0.0", None)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("given", "expected", "match"), [
    ("abc", "abc", True), ("abd", "abc", False), ("", "abc", False), (None, "abc", False), ("abc", None, False),
    ("", "", False), ("é", "é", True),
])
def test_tokens_match(given, expected, match):
    assert security.tokens_match(given, expected) is match


def test_sessions_are_forgotten_beyond_the_limit(monkeypatch):
    monkeypatch.setattr(security, "MAX_SESSIONS", 3)
    sessions = security.Sessions(token_required=True)
    started = [sessions.start() for _ in range(4)]
    assert sessions.find(started[0].id) is None and sessions.find(started[3].id) is started[3]
    assert not started[3].authenticated and sessions.start(authenticated=True).authenticated
    assert security.Sessions(token_required=False).start().authenticated


def test_hourly_fills_the_window_oldest_first():
    rows = [{"hour": NOW.replace(minute=0) - timedelta(hours=2), "completed": 5, "failed": 1, "cancelled": 0}]
    window = hourly(rows, 4, NOW)
    assert [w["hour"].hour for w in window] == [7, 8, 9, 10]
    assert [w["completed"] for w in window] == [0, 5, 0, 0] and window[1]["failed"] == 1


@pytest.mark.parametrize(("outage", "dispatchers", "state"), [
    (None, [], "unknown"),
    (None, [{"id": "a", "live": False}], "unknown"),
    (None, [{"id": "a", "live": True}], "up"),
    ({"since": NOW, "reason": "HTTP 503", "dispatcher_id": "a"}, [{"id": "a", "live": True}], "down"),
])
def test_jenkins_health(outage, dispatchers, state):
    assert jenkins_health(outage, dispatchers).state == state


def counted(*names: str) -> list[dict]:
    return [{"controller": n, "pending": 2, "due": 1, "in_flight": 1} for n in names]


@pytest.mark.parametrize(("counts", "configured", "paused", "expected"), [
    ([], {}, set(), []),
    (counted("default"), {}, set(), [("default", 2, None, "ok")]),  # no Jenkins configured: nothing is unknown
    ([], {"default": None, "eu": 3}, set(), [("default", 0, None, "ok"), ("eu", 0, 3, "ok")]),
    (counted("eu", "gone"), {"default": None, "eu": 3}, {"eu"},
     [("default", 0, None, "ok"), ("eu", 2, 3, "paused"), ("gone", 2, None, "not configured")]),
    (counted("gone"), {"default": None}, {"gone"}, [("default", 0, None, "ok"), ("gone", 2, None, "not configured")]),
    # Paused as a whole with no row left: still listed, so that the pause is seen (and can be lifted).
    ([], {"default": None}, {"zz"}, [("default", 0, None, "ok"), ("zz", 0, None, "not configured")]),
    ([], {}, {"eu"}, [("eu", 0, None, "paused")]),
])
def test_controller_rows_list_configured_and_named_controllers(counts, configured, paused, expected):
    rows = controller_rows(counts, configured, paused)
    assert [(r["controller"], r["pending"], r["cap"], r["state"]) for r in rows] == expected


def pause(job_name, controller):
    return Pause(job_name=job_name, paused_at=NOW, paused_by="alice", controller=controller)


@pytest.mark.parametrize(("names", "pauses", "shown"), [
    (["default"], [], []),  # one controller: the page has no section for it, as `stats`
    (["default"], [pause(None, None), pause("deploy", "default")], []),  # not pauses of the controller as a whole
    (["default"], [pause(None, "default")], [("default", "default")]),  # …but its own pause is shown
    (["eu"], [], [("eu", None)]),
    (["default", "eu"], [pause(None, "eu"), pause("deploy", "eu")], [("default", None), ("eu", "eu")]),
])
def test_controllers_on_the_page(names, pauses, shown):
    rows = [{"controller": n} for n in names]
    assert [(r["controller"], r["pause"] and r["pause"].controller) for r in controllers_on_the_page(rows, pauses)] \
        == shown


@pytest.mark.parametrize(("text", "message"), [
    (None, "controller: a controller name is required"),
    ("", "controller: a controller name is required"),
    ("EU", "controller: bad controller name 'EU'"),
    ("-eu", "controller: bad controller name"),
    ("x" * 65, "controller: bad controller name"),
])
def test_a_lever_names_a_controller_by_the_configurations_rule(text, message):
    with pytest.raises(InvalidInput, match=message):
        forms.controller_name(text)
    assert forms.controller_name("eu-2_b") == "eu-2_b"


@pytest.mark.parametrize(("header", "proxies", "peer", "sent", "expected"), [
    ("x-forwarded-user", ("127.0.0.0/8",), "127.0.0.1", "alice", "alice"),
    ("x-forwarded-user", ("10.0.0.0/24",), "127.0.0.1", "alice", None),  # not from a trusted proxy: ignored
    ("x-forwarded-user", ("::1/128",), "::1", " bob ", "bob"),
    (None, ("127.0.0.0/8",), "127.0.0.1", "alice", None),  # no header configured
    ("x-forwarded-user", ("127.0.0.0/8",), "127.0.0.1", "", None),
    ("x-forwarded-user", ("127.0.0.0/8",), "127.0.0.1", "a\x1bb", None),  # control characters
    ("x-forwarded-user", ("127.0.0.0/8",), "127.0.0.1", "a\x85b", None),  # a C1 one (NEL) too
    ("x-forwarded-user", ("127.0.0.0/8",), "127.0.0.1", "x" * 61, None),  # longer than the history holds
    ("x-forwarded-user", ("127.0.0.0/8",), "not-an-address", "alice", None),
])
def test_operator_name_only_from_a_trusted_proxy(header, proxies, peer, sent, expected):
    import ipaddress

    from jenkins_dispatch.ui import security

    networks = tuple(ipaddress.ip_network(p) for p in proxies)
    name = security.operator_name(header, networks, peer, {"x-forwarded-user": sent})
    assert name == expected
    assert security.actor(name) == (f"ui:{expected}" if expected else "ui")


PROXY = (ipaddress.ip_network("127.0.0.0/8"),)


@pytest.mark.parametrize("sent", ["alice, mallory", "alice,mallory", "alice, ", ", alice"])
def test_a_trusted_header_naming_several_operators_is_refused(sent):
    """Waitress joins a header sent twice with ", ": two X-Forwarded-User lines arrive as one value with a comma.
    They were recorded as `ui:alice, mallory`; the action is refused instead."""
    with pytest.raises(InvalidInput) as refused:
        security.operator_name("x-forwarded-user", PROXY, "127.0.0.1", {"x-forwarded-user": sent})
    assert "x-forwarded-user" in str(refused.value) and "exactly one" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_same_header_from_anyone_else_is_still_ignored_and_one_name_still_counts():
    assert security.operator_name("x-forwarded-user", PROXY, "10.0.0.1", {"x-forwarded-user": "a, b"}) is None
    assert security.operator_name("x-forwarded-user", PROXY, "127.0.0.1", {"x-forwarded-user": "alice"}) == "alice"
