"""`jenkins-dispatch serve`: both Lambda functions in one always-on process, outside AWS.

The dispatcher loop (the Lambda's code path, woken by new work within milliseconds, at most ``interval``
seconds apart) on the main thread; over HTTP (http_service: waitress, a bounded WSGI server), the webhook at
``POST /jenkins/notify`` (the webhook's core, called directly), ``GET /healthz`` and ``GET /metrics``
(Prometheus), and with ``--ui`` the web page.

Requests wait in lanes, each with its own threads: callbacks carrying the right token (the only requests that
borrow a webhook session) in a lane exactly as wide as the session pool, so they run in parallel up to the
pool and queue beyond it without holding a thread; /healthz, /metrics, refusals and unknown paths in another,
never behind the database; the page's requests in a third, as wide as its own pool.

It exits only on SIGTERM / SIGINT (0: the current batch is finished or released, nothing stays
claimed) or on a configuration error (non-zero, one line). Jenkins or database outages end passes,
not the process: `/healthz` says which failure, and since when, while the loop retries.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .callbacks import webhook
from .callbacks.notifications import MAX_BODY_BYTES, checked_body
from .config import SERVE_HOST, SERVE_INTERVAL_SECONDS, SERVE_PORT, Settings
from .dispatching.dispatch_loop import DispatchLoop, Health
from .dispatching.heartbeat import Heartbeat
from .dispatching.wakeup import work_signal
from .errors import ConfigError
from .http_service import (
    BackgroundHttpServer,
    HttpLimits,
    RequestHead,
    listen_failure,
    read_body,
    request_headers,
    request_target,
    status_line,
    stop_on_signals,
)
from .observability import CONTROLLER_LABEL, LOGS_AS_TEXT, PROMETHEUS_PREFIX, logger, metrics
from .store.db import Database

HEALTH_HELP = {
    "database_up": "1 while the dispatcher's last statement reached the database, 0 while it cannot.",
    "jenkins_up": "1 while Jenkins answered the dispatcher's last request, 0 while it fails as a whole.",
    "last_pass_timestamp_seconds": "Unix time at which the dispatcher's last pass ended.",
    "controller_up": "Per controller (label controller, a configured name): 1 while its breaker is closed (it "
                     "answered its last request), 0 while it is open.",
}
SERVICE_PATHS = ("/healthz", "/metrics")
FRONT_THREADS = 4  # /healthz, /metrics, refusals, unknown paths: never more than a few at once
JSON = "application/json"


def health_families(health: Health) -> list:
    """The loop's health as Prometheus gauges, read when /metrics is scraped (nothing kept twice)."""
    from prometheus_client.core import GaugeMetricFamily

    families = [GaugeMetricFamily(PROMETHEUS_PREFIX + name, HEALTH_HELP[name], value=value)
                for name, value in health.readings().items() if value is not None]
    # Listed even before any controller is known, so that rules and panels naming it always find it.
    up = GaugeMetricFamily(PROMETHEUS_PREFIX + "controller_up", HEALTH_HELP["controller_up"],
                           labels=[CONTROLLER_LABEL])
    for name, value in health.controller_readings().items():
        if value is not None:
            up.add_metric([name], value)
    return [*families, up]


class ServeApp:
    """`serve`'s WSGI application: the webhook, /healthz, /metrics and (with ``ui``) the page; ``lane`` sorts
    each request into the threads that answer it before any thread takes it."""

    def __init__(self, settings: Settings, health: Health, registry: Any = None, ui: Any = None):
        self.settings = settings
        self.health = health
        self.registry = registry
        self.ui = ui  # the web page's UiApp when `serve --ui` mounts it

    def lanes(self) -> dict[str, int]:
        """Threads per lane: callbacks that borrow a session, as many as the pool has sessions."""
        widths = {"front": FRONT_THREADS, "database": self.settings.webhook_db_pool_size}
        if self.ui is not None:
            widths["page"] = self.ui.pool_size
        return widths

    def route(self, method: str, path: str) -> str:
        """Where a request goes, decided here only (its lane and its answer both follow from it): ``page`` (with
        the web page mounted, every path but the webhook's and serve's own), ``healthz``, ``metrics`` (given a
        registry), else ``webhook``, whose core answers the notify path, 405 and 404 (``webhook.answer``)."""
        if self.ui is not None and not path.startswith("/jenkins/") and path not in SERVICE_PATHS:
            return "page"
        if method in ("GET", "HEAD") and path == "/healthz":
            return "healthz"
        if method in ("GET", "HEAD") and path == "/metrics" and self.registry is not None:
            return "metrics"
        return "webhook"

    def lane(self, head: RequestHead) -> str:
        """Where a request waits for a thread: only a callback with the right token may need the database."""
        route = self.route(head.method.upper(), head.path)
        if route == "webhook" and webhook.may_need_session(head.method, head.path, head.query, head.headers,
                                                           self.settings.webhook_secrets()):
            return "database"
        return "page" if route == "page" else "front"

    def __call__(self, environ: dict, start_response) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path, query = request_target(environ)
        route = self.route(method, path)
        if route == "page":
            return self._page(environ, start_response, method, path, query)
        if route == "healthz":
            status, doc = self.health.report()
            return self._send(start_response, method, status, json.dumps(doc, default=str).encode(), {})
        if route == "metrics":
            from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

            return self._send(start_response, method, 200, generate_latest(self.registry),
                              {"Content-Type": CONTENT_TYPE_LATEST})
        callback = webhook.Callback(method, path, query, request_headers(environ),
                                    lambda: checked_body(read_body(environ, MAX_BODY_BYTES)))
        answer = webhook.answer(callback)
        metrics.flush_if_any()  # a Lambda handler's decorator does this once per invocation; here, per request
        return self._send(start_response, method, answer.status_code, json.dumps(answer.body()).encode(),
                          answer.headers())

    def _page(self, environ: dict, start_response, method: str, path: str, query: str) -> list[bytes]:
        from .ui.server import answer_wsgi

        return answer_wsgi(self.ui, environ, start_response, method, path + ("?" + query if query else ""))

    @staticmethod
    def _send(start_response, method: str, status: int, body: bytes, headers: dict[str, str]) -> list[bytes]:
        headers = {"Content-Type": JSON, **headers, "Content-Length": str(len(body))}
        start_response(status_line(status), list(headers.items()))
        return [] if method == "HEAD" else [body]


class WebhookServer(BackgroundHttpServer):
    """The webhook, /healthz and (given a Prometheus registry) /metrics over plain HTTP on a background thread."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0, health: Health | None = None,
                 registry: Any = None, ui: Any = None):
        self.health = health or Health()
        self.ui = ui
        self.wsgi = ServeApp(settings, self.health, registry, ui)
        super().__init__((host, port), self.wsgi, "webhook-http", lanes=self.wsgi.lanes(), choose=self.wsgi.lane,
                         log=logger, limits=HttpLimits(idle_seconds=settings.http_idle_timeout_seconds))

    def closed(self) -> None:
        """The mounted web page's database sessions, if any."""
        if self.ui is not None:
            self.ui.close()


def dispatch_forever(settings: Settings, interval: float, stop: threading.Event, health: Health) -> None:
    """The dispatcher loop on its own session (which also LISTENs), until ``stop`` is set."""
    with Database(settings.database, application_name="jenkins-dispatch-serve") as db:
        loop = DispatchLoop(settings, db, work_signal(db, stop, settings.poll_seconds), interval=interval, shutdown=stop,
                            health=health, heartbeat=Heartbeat("serve", interval=interval))
        loop.run()


def serve(settings: Settings, host: str = SERVE_HOST, port: int = SERVE_PORT, interval: float = SERVE_INTERVAL_SECONDS,
          ui: bool = False) -> None:
    """Run the dispatcher loop and the webhook in this process until SIGTERM / SIGINT; with ``ui``, the web page
    too, on the same address (a token required)."""
    settings.require_controllers()
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
    assert metrics.prometheus is not None  # enable_prometheus has just set it
    metrics.prometheus.also_collect(lambda: health_families(health))
    # Before the server answers: whoever sees /healthz answer may signal at once (a SIGTERM or SIGUSR1 that came
    # earlier took the default action and killed the process without a word).
    stop_on_signals(stop, lambda heard: logger.info("stop requested: finishing the current batch",
                                                   extra={"signal": heard.name}))
    try:
        server = WebhookServer(settings, host, port, health, registry, page).start()
    except (OSError, OverflowError) as exc:  # port taken or out of range, address not ours
        if page is not None:
            page.close()
        raise ConfigError(listen_failure("serve", host, port, exc)) from None
    serving = {"webhook": server.url + "jenkins/notify", "healthz": server.url + "healthz",
               "metrics": server.url + "metrics", **({"ui": server.url} if page is not None else {}),
               "interval_seconds": interval, "webhook_db_pool_size": settings.webhook_db_pool_size}
    if LOGS_AS_TEXT:  # a person at a terminal: where to point Jenkins and a browser, one per line
        print("serving\n" + "\n".join(f"  {key:<21} {value}" for key, value in serving.items()), flush=True)
    else:
        print(json.dumps({"message": "serving", **serving}), flush=True)

    try:
        dispatch_forever(settings, interval, stop, health)
    finally:
        server.stop()
        runtime.reset()
        logger.info("stopped")
