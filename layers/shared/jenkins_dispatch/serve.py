"""`jenkins-dispatch serve`: both Lambda functions in one always-on process, outside AWS.

The dispatcher loop (the Lambda's code path, woken by new work within milliseconds, at most
``interval`` seconds apart) on the main thread, and the webhook at ``POST /jenkins/notify`` (the same
handler, fed HTTP API events) plus ``GET /healthz`` and ``GET /metrics`` (Prometheus) on HTTP threads sharing a bounded session pool.

It exits only on SIGTERM / SIGINT (0: the current batch is finished or released, nothing stays
claimed) or on a configuration error (non-zero, one line). Jenkins or database outages end passes,
not the process: `/healthz` says which failure, and since when, while the loop retries.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from .callbacks.notifications import MAX_BODY_BYTES
from .config import SERVE_HOST, SERVE_INTERVAL_SECONDS, SERVE_PORT, Settings
from .dispatching.dispatch_loop import DispatchLoop, Health
from .dispatching.heartbeat import Heartbeat
from .dispatching.wakeup import work_signal
from .errors import ConfigError
from .http_service import BackgroundHttpServer, stop_on_signals
from .observability import PROMETHEUS_PREFIX, logger, metrics
from .store.db import Database

MAX_BODY = MAX_BODY_BYTES + 1  # read one byte past the webhook's limit so it can answer 413
HEALTH_HELP = {
    "database_up": "1 while the dispatcher's last statement reached the database, 0 while it cannot.",
    "jenkins_up": "1 while Jenkins answered the dispatcher's last request, 0 while it fails as a whole.",
    "last_pass_timestamp_seconds": "Unix time at which the dispatcher's last pass ended.",
}


def health_families(health: Health) -> list:
    """The loop's health as Prometheus gauges, read when /metrics is scraped (nothing kept twice)."""
    from prometheus_client.core import GaugeMetricFamily

    return [GaugeMetricFamily(PROMETHEUS_PREFIX + name, HEALTH_HELP[name], value=value)
            for name, value in health.readings().items() if value is not None]


def _handler_class(settings: Settings, health: Health, registry: Any, ui: Any = None):
    from .callbacks import webhook

    def for_ui(path: str) -> bool:
        """With the web page mounted (`serve --ui`), every path but the webhook's and serve's own is the page's."""
        return ui is not None and not path.startswith("/jenkins/") and path not in ("/healthz", "/metrics")

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

        def _page(self, method: str) -> None:
            from .ui.server import answer_page, read_body

            answer_page(ui, self, method, read_body(self))

        def do_GET(self) -> None:
            if for_ui(self.path.split("?")[0]):
                self._page("GET")
                return
            if self.path.split("?")[0] == "/healthz":
                status, doc = health.report()
                self._answer(status, json.dumps(doc, default=str).encode())
                return
            if self.path.split("?")[0] == "/metrics" and registry is not None:
                from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

                self._answer(200, generate_latest(registry), {"Content-Type": CONTENT_TYPE_LATEST})
                return
            self._forward("GET")

        def do_POST(self) -> None:
            if for_ui(self.path.split("?")[0]):
                self._page("POST")
                return
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
            metrics.flush_if_any()  # a Lambda handler's decorator does this once per invocation; here, per request
            headers = {k: v for k, v in (answer.get("headers") or {}).items()}
            headers.setdefault("Content-Type", "application/json")
            payload = answer.get("body") or ""
            self._answer(int(answer.get("statusCode", 500)), payload.encode() if isinstance(payload, str) else payload,
                         headers)

    return Handler


class WebhookServer(BackgroundHttpServer):
    """The webhook, /healthz and (given a Prometheus registry) /metrics over plain HTTP on a background thread."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0, health: Health | None = None,
                 registry: Any = None, ui: Any = None):
        self.health = health or Health()
        self.ui = ui  # the web page's UiApp when `serve --ui` mounts it
        super().__init__((host, port), _handler_class(settings, self.health, registry, ui), "webhook-http")

    def closed(self) -> None:
        """The mounted web page's database sessions, if any."""
        if self.ui is not None:
            self.ui.close()


def dispatch_forever(settings: Settings, interval: float, stop: threading.Event, health: Health) -> None:
    """The dispatcher loop on its own session (which also LISTENs), until ``stop`` is set."""
    with Database(settings.database, application_name="jenkins-dispatch-serve") as db:
        loop = DispatchLoop(settings, db, work_signal(db, stop), interval=interval, shutdown=stop,
                            health=health, heartbeat=Heartbeat("serve", interval=interval))
        loop.run()


def serve(settings: Settings, host: str = SERVE_HOST, port: int = SERVE_PORT, interval: float = SERVE_INTERVAL_SECONDS,
          ui: bool = False) -> None:
    """Run the dispatcher loop and the webhook in this process until SIGTERM / SIGINT; with ``ui``, the web page
    too, on the same address (a token required)."""
    settings.require_jenkins()
    settings.require_webhook_secret()
    page = None
    if ui:
        from .ui.server import mounted_app

        page = mounted_app(settings)
    from . import runtime

    # The webhook handler reads settings and borrows sessions through runtime.
    runtime.install(settings)
    stop = threading.Event()
    health = Health()
    registry = metrics.enable_prometheus()
    metrics.prometheus.also_collect(lambda: health_families(health))
    try:
        server = WebhookServer(settings, host, port, health, registry, page).start()
    except (OSError, OverflowError) as exc:  # port taken or out of range, address not ours
        if page is not None:
            page.close()
        raise ConfigError(f"serve cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    print(json.dumps({"message": "serving", "webhook": server.url + "jenkins/notify", "healthz": server.url + "healthz",
                      "metrics": server.url + "metrics", **({"ui": server.url} if page is not None else {}),
                      "interval_seconds": interval, "webhook_db_pool_size": settings.webhook_db_pool_size}),
          flush=True)

    stop_on_signals(stop, lambda heard: logger.info("stop requested: finishing the current batch",
                                                   extra={"signal": heard.name}))
    try:
        dispatch_forever(settings, interval, stop, health)
    finally:
        server.stop()
        runtime.reset()
        logger.info("stopped")
