"""The web page (`jenkins-dispatch ui`) in tests: a server started in this process on 127.0.0.1 and a port of
its own, and a client that keeps the session cookie and reads each page's CSRF token like a browser."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Iterator

import pytest
import requests

from jenkins_dispatch.config import Settings, load_settings
from jenkins_dispatch.ui.server import UiServer

from .dispatch_helpers import dispatch_settings

__all__ = ["client", "make_ui", "ui"]  # the fixtures a test module takes with `import *`

PAYLOAD = "<img src=x onerror=alert(1)>"
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
