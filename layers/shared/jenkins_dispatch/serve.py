"""`jenkins-dispatch serve`: both Lambda functions in one process, outside AWS.

A dispatcher pass every interval (the same code path as the scheduled Lambda, with a real time budget)
and the webhook at ``POST /jenkins/notify`` (the same handler, fed HTTP API events), plus
``GET /healthz``. SIGTERM / SIGINT: the current batch is finished or released, nothing stays claimed.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .config import Settings
from .db import Database
from .errors import DispatchError
from .observability import logger, metrics

MAX_BODY = 256 * 1024 + 1  # read one byte past the webhook's limit so it can answer 413
PASS_BUDGET_SECONDS = 55.0  # like the Lambda's timeout: a pass never runs past this


class ServeState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_pass_at: float | None = None
        self.last_pass: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.passes = 0

    def record(self, summary: dict[str, Any] | None, error: str | None) -> None:
        with self.lock:
            self.last_pass_at = time.time()
            self.last_pass = summary
            self.last_error = error
            self.passes += 1


def _handler_class(settings: Settings, state: ServeState):
    from . import webhook

    class Handler(BaseHTTPRequestHandler):
        server_version = "jenkins-dispatch"
        sys_version = ""
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass  # the webhook logs each notification itself, without the query string's token

        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {"Content-Type": "application/json"}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/healthz":
                status, doc = health(settings, state)
                self._answer(status, json.dumps(doc, default=str).encode())
                return
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

        def do_PUT(self) -> None:
            self._forward("PUT")

        def _forward(self, method: str) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = 0
            body = self.rfile.read(min(max(length, 0), MAX_BODY)) if length else b""
            if length > MAX_BODY:
                self.close_connection = True
            path, _, query = self.path.partition("?")
            event = webhook.http_api_event(method, path, query, dict(self.headers.items()), body)
            answer = webhook.handle_http_event(event)
            headers = {k: v for k, v in (answer.get("headers") or {}).items()}
            headers.setdefault("Content-Type", "application/json")
            payload = answer.get("body") or ""
            self._answer(int(answer.get("statusCode", 500)), payload.encode() if isinstance(payload, str) else payload,
                         headers)

    return Handler


def health(settings: Settings, state: ServeState) -> tuple[int, dict[str, Any]]:
    doc: dict[str, Any] = {}
    try:
        with Database(settings.database, application_name="jenkins-dispatch-healthz") as db:
            db.run("SELECT 1")
        doc["database"] = "ok"
    except DispatchError as exc:
        doc["database"] = str(exc)
    with state.lock:
        doc["passes"] = state.passes
        doc["last_pass_at"] = state.last_pass_at
        doc["last_pass"] = state.last_pass
        doc["last_error"] = state.last_error
    return (200 if doc["database"] == "ok" else 503), doc


class WebhookServer:
    """The webhook (and /healthz) over plain HTTP on a background thread."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0, state: ServeState | None = None):
        self.state = state or ServeState()
        self.httpd = ThreadingHTTPServer((host, port), _handler_class(settings, self.state))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="webhook-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> WebhookServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def dispatch_forever(settings: Settings, interval: float, stop: threading.Event, state: ServeState,
                     budget_seconds: float = PASS_BUDGET_SECONDS) -> None:
    from .dispatcher import run_pass

    with Database(settings.database, application_name="jenkins-dispatch-serve") as db:
        while not stop.is_set():
            deadline = time.monotonic() + budget_seconds
            try:
                summary = run_pass(settings, db=db, stop=stop,
                                   remaining_ms=lambda end=deadline: int((end - time.monotonic()) * 1000))
                state.record(summary, None)
            except DispatchError as exc:
                logger.error("dispatcher pass failed", extra={"reason": str(exc)})
                state.record(None, str(exc))
            except Exception as exc:  # keep serving: the next pass may well succeed
                logger.exception("dispatcher pass crashed")
                state.record(None, f"{type(exc).__name__}: {exc}")
            metrics.flush_metrics()
            stop.wait(interval)


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080, interval: float = 10.0) -> None:
    settings.require_jenkins()
    settings.require_webhook_secret()
    from . import runtime

    runtime.install(settings)  # the webhook handler reads settings through runtime
    stop = threading.Event()
    state = ServeState()
    server = WebhookServer(settings, host, port, state).start()
    print(json.dumps({"message": "serving", "webhook": server.url + "jenkins/notify", "healthz": server.url + "healthz",
                      "interval_seconds": interval}), flush=True)

    def request_stop(signum, _frame) -> None:
        logger.info("stop requested: finishing the current batch", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        dispatch_forever(settings, interval, stop, state)
    finally:
        server.stop()
        runtime.reset()
        logger.info("stopped")
