"""The web page (`jenkins-dispatch ui`) in tests: a server started in this process on 127.0.0.1 and a port of
its own, and a client that keeps the session cookie and reads each page's CSRF token like a browser."""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import requests

from jenkins_dispatch.config import Settings, load_settings
from jenkins_dispatch.ui.server import UiServer

from .dispatch_helpers import dispatch_settings
from .engines import sql_for

__all__ = ["client", "make_ui", "ui"]  # the fixtures a test module takes with `import *`

PAYLOAD = "<img src=x onerror=alert(1)>"
# Two controllers (issue 23), none of them reachable: the page only reads and pauses, it never asks Jenkins.
CONTROLLERS = json.dumps({"default": {"url": "http://127.0.0.1:9/", "user": "u", "api_token": "t"},
                          "eu": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t", "max_in_flight": 3}})
# The default controller alone (never asked): the page's cap and rate levers store for it, so it must be configured.
DEFAULT_JENKINS = {"JENKINS_URL": "http://127.0.0.1:9/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def plain_settings(**env: str) -> Settings:
    """The settings of the test's database, without Jenkins."""
    return load_settings({"DATABASE_URL": os.environ["DATABASE_URL"], **env})


class UiClient:
    """A browser without JavaScript: one session (cookie), forms posted with the token the page gave."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")
        self.http = requests.Session()
        self.csrf: str | None = None

    def get(self, path: str, **kwargs) -> requests.Response:
        """GET a page (redirects followed); remembers the page's CSRF token."""
        answer = self.http.get(self.base_url + path, timeout=10, **kwargs)
        if found := _CSRF.search(answer.text):
            self.csrf = html.unescape(found.group(1))
        return answer

    def post(self, path: str, data: dict | None = None, *, csrf: str | None | bool = True,
             **kwargs) -> requests.Response:
        """POST a form as the page would (``csrf`` True: the page's token; a string: that one; None: none)."""
        if csrf is True and self.csrf is None:
            self.get("/")
        form = dict(data or {})
        token = self.csrf if csrf is True else csrf
        if token is not None:
            form["csrf"] = token
        return self.http.post(self.base_url + path, data=form, timeout=30, **kwargs)


@pytest.fixture
def make_ui(database_url) -> Iterator[Callable[..., UiServer]]:
    """``make_ui(settings=None, **options)``: a started page (UiServer options), stopped after the test."""
    started: list[UiServer] = []

    def make(settings: Settings | None = None, host: str = "127.0.0.1", **options) -> UiServer:
        server = UiServer(settings or plain_settings(), host, 0, **options).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def ui(make_ui, jenkins) -> UiServer:
    """The page with Jenkins (the emulator) configured, levers on, pages reloading rarely."""
    return make_ui(dispatch_settings(jenkins.base_url), refresh_seconds=60)


@pytest.fixture
def client(ui) -> UiClient:
    """A client of ``ui``."""
    return UiClient(ui.url)


@contextmanager
def rows_naming(db, engine: str, *controllers: str) -> Iterator[None]:
    """A pending row naming each of ``controllers``, names the table's rule now refuses (HTML): the rule is dropped
    for the block, then the rows deleted and the rule put back (the database is the whole session's)."""
    db.run("ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT jenkins_jobs_queue_controller_check")
    try:
        for controller in controllers:
            db.run("INSERT INTO jenkins_jobs_queue (job_name, controller) VALUES ('deploy', :c)", c=controller)
        yield
    finally:
        db.run("DELETE FROM jenkins_jobs_queue")
        db.run(sql_for(engine,
                       postgresql="ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT jenkins_jobs_queue_controller_check "
                                  "CHECK (controller ~ '^[a-z0-9][a-z0-9_-]*$' AND length(controller) <= 64) NOT VALID",
                       mysql="ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT jenkins_jobs_queue_controller_check "
                             "CHECK (controller REGEXP '^[a-z0-9][a-z0-9_-]*$')"))
