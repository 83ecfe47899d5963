"""The web page's sessions and form tokens against odd or hostile requests (issue 21): a form token given twice
is refused like a wrong one; requests without a session cookie, however many, create no session and log no
operator out."""

from __future__ import annotations

import pytest
import requests

from jenkins_dispatch.ui import security

from ..ui_helpers import *  # noqa: F403 - the fixtures
from ..ui_helpers import UiClient, plain_settings

pytestmark = pytest.mark.both_engines

TOKEN = "operator-token-1234"
FLOOD = 50  # cookie-less requests, over the (lowered) number of sessions kept
KEPT = 20


def test_a_form_token_given_twice_is_refused_and_changes_nothing(client, queue):
    client.get("/")
    doubled = [("csrf", client.csrf), ("csrf", client.csrf)]
    answer = client.http.post(client.base_url + "/pause", data=doubled, timeout=10)
    assert answer.status_code == 403 and "form token is missing or wrong" in answer.text
    assert queue.pauses() == []


def test_a_login_token_given_twice_is_refused(make_ui):
    server = make_ui(plain_settings(UI_TOKEN=TOKEN))
    browser = UiClient(server.url)
    browser.get("/login")
    answer = browser.http.post(server.url + "login", data=[("csrf", browser.csrf), ("token", TOKEN),
                                                           ("token", TOKEN)], timeout=10)
    assert answer.status_code == 403 and "not the one configured" in answer.text
    assert len(server.app.sessions) == 0


@pytest.fixture
def few_sessions(monkeypatch):
    """Keep KEPT sessions instead of 10,000: the rule is the same, the flood cheaper."""
    monkeypatch.setattr(security, "MAX_SESSIONS", KEPT)


def test_requests_without_a_cookie_create_no_session_and_log_no_operator_out(make_ui, few_sessions):
    server = make_ui(plain_settings(UI_TOKEN=TOKEN))
    operator = UiClient(server.url)
    operator.get("/login")
    assert operator.post("/login", {"token": TOKEN}).status_code == 200
    for n in range(FLOOD):
        answer = requests.get(server.url + ("login", "", "jobs", "static/ui.css")[n % 4], timeout=10,
                              allow_redirects=False)
        assert answer.status_code in (200, 303)
    page = operator.get("/")
    assert page.status_code == 200 and not page.url.endswith("/login"), "the operator was logged out"
    assert len(server.app.sessions) == 1


def test_without_a_token_visitors_create_no_session_until_they_pull_a_lever(make_ui, queue, few_sessions):
    server = make_ui()
    for _ in range(FLOOD):
        assert requests.get(server.url, timeout=10).status_code == 200
    assert len(server.app.sessions) == 0
    visitor = UiClient(server.url)
    visitor.get("/")
    asked = visitor.post("/pause", {})  # the lever asks first (a session now holds its form token)
    assert asked.status_code == 200 and queue.pauses() == []
    done = visitor.post("/pause", {"confirm": "yes"})
    assert done.status_code == 200 and queue.pauses() and "paused" in done.text.lower()
    assert len(server.app.sessions) == 1
    assert visitor.post("/resume", {}).status_code == 200 and queue.pauses() == []  # the same form token
