"""A plain-HTTP service on a background thread, and the signals that stop a foreground command: what `serve`
(webhook, /healthz, /metrics) and `ui` (the web page) both are."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOP_POLL_SECONDS = 0.05  # how soon stop() returns; requests are answered at once whatever its value


class _Server(ThreadingHTTPServer):
    # The standard library's backlog of 5 resets connections as soon as a few callers wait (webhook
    # requests are answered one at a time, and each may wait out a database reconnect): let them queue.
    request_queue_size = 128
    daemon_threads = True


class BackgroundHttpServer:
    """``handler`` answering on ``address`` from its own thread: ``start``, ``url``, ``stop``. Binding happens
    here, so a taken port raises OSError (OverflowError for one out of range) from the constructor."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], thread_name: str):
        self.httpd = _Server(address, handler)
        # stop() waits for serve_forever to look at its shutdown flag, once per poll: 0.5 s by default.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": STOP_POLL_SECONDS},
                                       name=thread_name, daemon=True)

    @property
    def url(self) -> str:
        """The base URL it listens on."""
        host, port = self.httpd.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    def start(self):
        """Serve on the background thread; return self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket, then whatever the service holds (``closed``)."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.closed()

    def closed(self) -> None:
        """After the socket is closed: release what the service holds (nothing here)."""


def stop_on_signals(stop: threading.Event, heard: Callable[[signal.Signals], None] | None = None) -> None:
    """SIGTERM and SIGINT set ``stop`` (after telling ``heard`` which one came)."""

    def request_stop(signum, _frame) -> None:
        if heard is not None:
            heard(signal.Signals(signum))
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
