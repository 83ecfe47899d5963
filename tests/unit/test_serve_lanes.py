"""Which requests `serve` lets wait on the database: only a POST to the webhook with exactly the right token
may borrow a session, so only those queue in the lane as wide as the session pool (issue 21)."""

from __future__ import annotations

import base64

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.dispatching.dispatch_loop import Health
from jenkins_dispatch.http_service import HttpLimits, RequestHead
from jenkins_dispatch.serve import ServeApp

SECRET = "lane-secret"
BASIC = "Basic " + base64.b64encode(f"jenkins:{SECRET}".encode()).decode()


class MountedPage:
    pool_size = 3


def app(ui=None) -> ServeApp:
    settings = load_settings({"DATABASE_URL": "postgresql://app@db.example/jobs", "WEBHOOK_SECRET": SECRET,
                              "WEBHOOK_DB_POOL_SIZE": "6"})
    return ServeApp(settings, Health(), ui=ui)


@pytest.mark.parametrize(("method", "path", "query", "headers", "lane"), [
    ("POST", "/jenkins/notify", f"token={SECRET}", {}, "database"),
    ("POST", "/jenkins/notify/", f"token={SECRET}", {}, "database"),
    ("POST", "/jenkins/notify", "", {"authorization": BASIC}, "database"),
    ("POST", "/jenkins/notify", "", {"x-jenkins-dispatch-token": SECRET}, "database"),
    ("POST", "/jenkins/notify", "token=wrong", {}, "front"),
    ("POST", "/jenkins/notify", "", {}, "front"),
    ("POST", "/jenkins/notify", f"token={SECRET}", {"x-jenkins-dispatch-token": "other"}, "front"),
    ("GET", "/jenkins/notify", f"token={SECRET}", {}, "front"),
    ("GET", "/healthz", "", {}, "front"),
    ("GET", "/metrics", "", {}, "front"),
    ("POST", "/elsewhere", f"token={SECRET}", {}, "front"),
])
def test_only_an_authenticated_callback_waits_in_the_database_lane(method, path, query, headers, lane):
    assert app().lane(RequestHead(method, path, query, headers)) == lane


def test_the_database_lane_is_as_wide_as_the_pool_and_the_page_gets_its_own():
    assert app().lanes() == {"front": 4, "database": 6}
    mounted = app(ui=MountedPage())
    assert mounted.lanes() == {"front": 4, "database": 6, "page": 3}
    assert mounted.lane(RequestHead("GET", "/jobs", "", {})) == "page"
    assert mounted.lane(RequestHead("GET", "/healthz", "", {})) == "front"
    assert mounted.lane(RequestHead("POST", "/jenkins/notify", f"token={SECRET}", {})) == "database"


class Registry:
    pass


@pytest.mark.parametrize(("mounted", "method", "path", "route"), [
    (False, "GET", "/healthz", "healthz"),
    (False, "HEAD", "/healthz", "healthz"),
    (False, "POST", "/healthz", "webhook"),  # the webhook's 404 names the path to use
    (False, "GET", "/metrics", "metrics"),
    (False, "GET", "/jobs", "webhook"),
    (False, "POST", "/jenkins/notify", "webhook"),
    (True, "GET", "/jobs", "page"),
    (True, "POST", "/login", "page"),
    (True, "GET", "/healthz", "healthz"),
    (True, "POST", "/jenkins/notify", "webhook"),
    (True, "GET", "/jenkins/anything", "webhook"),
])
def test_serve_routes_each_request_in_one_place(mounted, method, path, route):
    served = app(ui=MountedPage() if mounted else None)
    served.registry = Registry()
    assert served.route(method, path) == route
    lane = served.lane(RequestHead(method, path, "", {}))
    assert lane == {"page": "page"}.get(route, "front")


def test_without_prometheus_metrics_is_the_webhooks_404():
    assert app().route("GET", "/metrics") == "webhook"


@pytest.mark.parametrize(("idle", "closed_within"), [(20, 26), (2, 4), (1, 3), (60, 66)])
def test_a_silent_connection_is_closed_within_the_idle_timeout_and_a_sweep(idle, closed_within):
    assert HttpLimits(idle_seconds=idle).closes_within() == closed_within


@pytest.mark.parametrize(("soft", "connections"), [(20_000, 1000), (1024, 480), (100, 18), (10, 16)])
def test_connections_stay_within_the_open_files_limit(monkeypatch, soft, connections):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (soft, 1_000_000))
    assert HttpLimits().connections() == connections
