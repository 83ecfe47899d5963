"""How `serve`'s and `ui`'s HTTP server shares the interpreter among its threads (issue 21's webhook latency).

The event loop and the worker threads spend most of their time in short bursts between socket reads; with
CPython's default 5 ms switch interval a thread whose answer has arrived can wait that long for a thread that
is merely busy, and under 50 concurrent callers those waits pile up (benchmarks/bench_http.py: p99 above
200 ms in some runs, against ~90 ms with the shorter interval). So a running server shortens it."""

from __future__ import annotations

import logging
import sys
import urllib.request

import pytest

from jenkins_dispatch.http_service import SWITCH_INTERVAL_SECONDS, BackgroundHttpServer


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


@pytest.fixture
def default_switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(before)


def test_a_started_server_shortens_the_interpreters_switch_interval(default_switch_interval):
    server = BackgroundHttpServer(("127.0.0.1", 0), hello, "test-http", lanes={"front": 2})
    assert sys.getswitchinterval() == pytest.approx(0.005)  # binding alone changes nothing
    server.start()
    try:
        with urllib.request.urlopen(server.url, timeout=10) as answer:
            assert answer.read() == b"hello"
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_SECONDS)
        assert SWITCH_INTERVAL_SECONDS < 0.005
    finally:
        server.stop()


def test_waitress_queue_depth_warnings_are_not_even_built(default_switch_interval):
    """Lanes queue requests by design: the 'Task queue depth' warning waitress makes for every queued request
    was dropped by our handler anyway; its record is not created at all (the event loop's time)."""
    server = BackgroundHttpServer(("127.0.0.1", 0), hello, "test-http", lanes={"front": 1},
                                  log=logging.getLogger("test-http"))
    server.start()
    try:
        assert not logging.getLogger("waitress.queue").isEnabledFor(logging.WARNING)
        assert logging.getLogger("waitress").isEnabledFor(logging.WARNING)  # the rest still reaches our log
    finally:
        server.stop()
