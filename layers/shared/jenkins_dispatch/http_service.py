"""The HTTP server `serve` (webhook, /healthz, /metrics) and `ui` (the web page) both run on a background
thread, and the signals that stop a foreground command.

It is waitress, a WSGI server, chosen for what the standard library's ThreadingHTTPServer lacks:
- one thread (the event loop) reads every request whole, headers and body, before a worker thread sees it,
  so a client that connects and sends nothing, or sends a byte a second, holds a socket but no thread;
- a fixed number of worker threads, whatever the number of connections;
- connections that send nothing for ``idle_seconds`` are closed, and so are those that take longer than that
  to send one whole request (a slow-body client);
- bounded connections and request bodies.

Worker threads come in *lanes*, each its own pool with its own queue: the caller sorts each request into a
lane before any thread takes it. `serve` gives requests that will borrow a database session a lane exactly as
wide as its session pool, so they wait in that lane's queue (holding no thread and no session) while
/healthz, /metrics and refusals are answered by other threads at once.

Binding happens in the constructor, so a taken port raises OSError (OverflowError for one out of range);
threads start in ``start``: a server built before a fork is started in the child.
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from types import FrameType

    from waitress.server import TcpWSGIServer

# Defaults of the limits (HttpLimits). A connection that sends nothing is closed between idle_seconds and
# idle_seconds + CHECK_EVERY_SECONDS + LOOP_WAKE_SECONDS after its last byte: 20 + 5 + 1 = 26 s ≤ 30 s.
IDLE_SECONDS = 20
CHECK_EVERY_SECONDS = 5  # how often idle and slow connections are looked for (at most)
LOOP_WAKE_SECONDS = 1  # the event loop wakes at least this often (waitress's poll timeout)
MAX_CONNECTIONS = 1000  # beyond this, new connections wait in the listen backlog until some close
FILES_KEPT_FREE = 64  # files the process keeps for itself when its open-files limit bounds the connections
BACKLOG = 1024
STOP_GRACE_SECONDS = 5.0  # stop() lets running requests finish this long before closing their connections
# The interpreter's switch interval while a server runs (CPython's default: 5 ms); see BackgroundHttpServer.start.
SWITCH_INTERVAL_SECONDS = 0.0005

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]


@dataclass(frozen=True)
class RequestHead:
    """What a lane is chosen by: a request's method, path (decoded), raw query and headers (lower-case names)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]


Chooser = Callable[[RequestHead], str]  # the name of the lane a request waits in


@dataclass(frozen=True)
class HttpLimits:
    """How long a connection may idle or take to send a request, and how many and how large requests may be."""

    idle_seconds: int = IDLE_SECONDS
    max_connections: int = MAX_CONNECTIONS
    max_body_bytes: int = 1024 * 1024  # larger bodies get waitress's own 413 and are never read

    def closes_within(self) -> int:
        """The longest a connection that sends nothing stays open (the contract promises ≤ 30 s by default)."""
        return self.idle_seconds + self.check_every() + LOOP_WAKE_SECONDS

    def connections(self) -> int:
        """``max_connections``, or fewer when the process may not open that many files: at its limit accept()
        fails, and waitress would retry it in a busy loop. Room is left for the database sessions, pipes and
        spooled request bodies."""
        try:
            import resource

            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        except (ImportError, OSError, ValueError):
            return self.max_connections
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(16, min(self.max_connections, (soft - FILES_KEPT_FREE) // 2))

    def check_every(self) -> int:
        """Seconds between looks for idle and slow connections: often enough for short test timeouts."""
        return max(1, min(CHECK_EVERY_SECONDS, self.idle_seconds // 4))


# --------------------------------------------------------------------------- waitress's logs, as ours

# Said once by the connection itself (Channel.handle_close in ``start``).
_QUIET = ("Client disconnected while serving",)
WENT_AWAY = "client went away before its answer was sent"


class _OneLineLog(logging.Handler):
    """Every record of waitress's loggers as one line of the service's own log, at its level, the error named in
    one field (never a traceback)."""

    def __init__(self, log: Any, service: str):
        super().__init__()
        self.log = log  # the package's Powertools logger (or any logging.Logger)
        self.service = service

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if message.startswith(_QUIET):
                return
            fields = {"http_server": self.service}
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                fields["error"] = f"{type(error).__name__}: {error}"
            level = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning"}.get(record.levelno,
                                                                                                  "error")
            getattr(self.log, level)(f"http server: {message}", extra=fields)
        except Exception:  # a log line must never take the server down
            self.handleError(record)


def _route_waitress_logs(log: Any, service: str) -> None:
    waitress_log = logging.getLogger("waitress")
    for handler in list(waitress_log.handlers):
        if isinstance(handler, _OneLineLog):
            waitress_log.removeHandler(handler)
    waitress_log.addHandler(_OneLineLog(log, service))
    waitress_log.setLevel(logging.INFO)
    waitress_log.propagate = False


# --------------------------------------------------------------------------- lanes of worker threads


class Lanes:
    """waitress's task dispatcher, split: one pool of threads (and one queue) per lane, each request queued in
    the lane ``choose(head)`` names (an unknown name, or a request waitress already refuses: the first lane).
    A request waiting in a queue holds no thread. ``choose`` runs on the event loop: it must be quick."""

    def __init__(self, widths: Mapping[str, int], choose: Chooser, name: str):
        # waitress is imported when a server starts (the Lambda layer never ships it: nothing there imports this).
        from waitress.task import ThreadedTaskDispatcher

        # Lanes queue by design, and waitress warns of the queue's depth for every request queued beyond the
        # idle threads: not even the record is made (the event loop's time, under load).
        quiet_queue = logging.getLogger("waitress.queue")
        quiet_queue.setLevel(logging.ERROR)

        class Lane(ThreadedTaskDispatcher):
            queue_logger = quiet_queue
            lane = ""  # its name among the lanes

            def start_new_thread(self, target: Callable[[int], object], thread_no: int) -> None:
                threading.Thread(target=target, name=f"{name}-{self.lane}-{thread_no}", args=(thread_no,),
                                 daemon=True).start()

        self.choose = choose
        self.lanes = {}
        for lane_name, width in widths.items():
            lane = Lane()
            lane.lane = lane_name
            lane.set_thread_count(width)
            self.lanes[lane_name] = lane
        self.first = next(iter(self.lanes.values()))

    def add_task(self, channel: Any) -> None:  # waitress's HTTPChannel (types-waitress says a Task)
        """Queue the channel's next request in its lane (waitress calls this from its event loop)."""
        request = channel.requests[0] if channel.requests else None
        lane = self.first
        if request is not None and request.error is None:
            try:
                head = RequestHead(request.command or "", request.path or "", request.query or "",
                                   {k.lower().replace("_", "-"): v for k, v in request.headers.items()})
                lane = self.lanes.get(self.choose(head), self.first)
            except Exception:  # a chooser's bug must not stop the event loop
                lane = self.first
        lane.add_task(channel)

    def set_thread_count(self, count: int) -> None:
        """Unused: each lane's width is fixed at construction."""

    def shutdown(self, cancel_pending: bool = True, timeout: float = STOP_GRACE_SECONDS) -> None:
        """Stop every lane's threads, letting running requests finish for up to ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        for lane in self.lanes.values():
            lane.set_thread_count(0)
        for lane in self.lanes.values():
            # types-waitress says int; waitress only adds the timeout to time.time(), so a float is fine.
            lane.shutdown(cancel_pending=cancel_pending,
                          timeout=max(0.0, deadline - time.monotonic()))  # type: ignore[arg-type]

    def threads(self) -> int:
        """Worker threads running now, all lanes together."""
        return sum(len(lane.threads) for lane in self.lanes.values())


# --------------------------------------------------------------------------- the server


def _address(addr: Any) -> str:
    try:
        host, port = addr[:2]
    except (TypeError, ValueError):
        return str(addr)
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart rebinds at once (TIME_WAIT)
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)  # connections queue from here, even before the server starts (or is forked)
    except BaseException:
        sock.close()
        raise
    return sock


class BackgroundHttpServer:
    """``app`` (WSGI) answering on ``address`` from a background event loop and lanes of worker threads:
    ``start``, ``url``, ``stop``. Binding happens here (OSError for a taken port, OverflowError for one out
    of range); threads start in ``start``."""

    def __init__(self, address: tuple[str, int], app: WSGIApp, thread_name: str, *,
                 lanes: Mapping[str, int], choose: Chooser = lambda head: "", log: Any = None,
                 limits: HttpLimits | None = None, server_name: str = "jenkins-dispatch"):
        self.application = app
        self.thread_name = thread_name
        self.lane_widths = dict(lanes)
        self.choose = choose
        self.log = log
        self.limits = limits or HttpLimits()
        self.server_name = server_name
        self.socket = _bind(*address)
        self.lanes: Lanes | None = None
        self._server: TcpWSGIServer | None = None
        self._map: dict = {}
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL it listens on."""
        host, port = self.socket.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    def start(self) -> BackgroundHttpServer:
        """Serve on the background thread; return self. Shortens the interpreter's switch interval for the
        rest of the process's life: the event loop and the workers run in short bursts between socket reads,
        and with CPython's 5 ms a thread whose bytes have arrived waits that long behind one merely busy; under
        a few dozen concurrent callers those waits pile up (benchmarks/bench_http.py, docs/architecture.md)."""
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        from waitress import wasyncore
        from waitress.adjustments import Adjustments
        from waitress.channel import HTTPChannel
        from waitress.server import TcpWSGIServer

        limits, log, service = self.limits, self.log, self.thread_name
        if log is not None:
            _route_waitress_logs(log, service)

        class Channel(HTTPChannel):
            # When the request being received began: a whole request must arrive within idle_seconds.
            receiving_since: float | None = None
            closing = False  # set when the server closes it (an answer sent, a timeout, stop)

            def handle_close(self) -> None:
                # waitress closes a connection the client reset without a word; a request still being answered,
                # or an answer still unsent, is worth one line (the client may retry; nothing more to say).
                if (log is not None and self.connected and not self.closing
                        and (self.requests or self.total_outbufs_len)):
                    log.info(WENT_AWAY, extra={"http_server": service, "client": _address(self.addr),
                                               "unsent_bytes": self.total_outbufs_len})
                self.closing = True
                super().handle_close()

            def received(self, data: bytes) -> bool:
                before = self.request
                result = super().received(data)
                if self.request is None:
                    self.receiving_since = None
                elif self.request is not before:
                    self.receiving_since = time.time()
                return result

        class Server(TcpWSGIServer):
            channel_class = Channel

            def maintenance(self, now: float) -> None:
                # closes connections idle for channel_timeout; types-waitress says int, waitress passes time.time()
                super().maintenance(now)  # type: ignore[arg-type]
                cutoff = now - limits.idle_seconds
                # types-waitress declares active_channels an HTTPChannel: it is waitress's dict of channels.
                for channel in list(self.active_channels.values()):  # type: ignore[attr-defined]
                    since = channel.receiving_since
                    if since is not None and since < cutoff and not channel.requests:
                        channel.will_close = True  # a slow client: its request never arrived whole

        adjustments = Adjustments(
            sockets=[self.socket], backlog=BACKLOG, connection_limit=limits.connections(),
            channel_timeout=limits.idle_seconds, cleanup_interval=limits.check_every(),
            asyncore_loop_timeout=LOOP_WAKE_SECONDS, asyncore_use_poll=True,  # select() stops at 1,024 sockets
            max_request_body_size=limits.max_body_bytes, ident=self.server_name, expose_tracebacks=False,
            log_socket_errors=False,  # a reset connection is one line of ours (Channel.handle_close), not a traceback
            clear_untrusted_proxy_headers=True, threads=max(1, sum(self.lane_widths.values())))
        self.lanes = Lanes(self.lane_widths, self.choose, self.thread_name)
        family, kind, proto = self.socket.family, self.socket.type, self.socket.proto
        # Lanes stands in for waitress's ThreadedTaskDispatcher (add_task, set_thread_count, shutdown), split by lane.
        self._server = Server(self.application, map=self._map, _sock=self.socket,
                              dispatcher=self.lanes,  # type: ignore[arg-type]
                              adj=adjustments, bind_socket=False,
                              sockinfo=(family, kind, proto, self.socket.getsockname()))
        self.thread = threading.Thread(target=wasyncore.loop, name=self.thread_name, daemon=True,
                                       kwargs={"timeout": LOOP_WAKE_SECONDS, "map": self._map, "use_poll": True})
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, let running requests finish (a few seconds at most), close every connection and the
        socket, then release what the service holds (``closed``)."""
        server = self._server
        if server is None:
            self.socket.close()
            self.closed()
            return
        lanes, thread = self.lanes, self.thread
        assert lanes is not None and thread is not None  # start() set them with the server

        def stop_accepting() -> None:
            server.accepting = False

        def close_everything() -> None:
            for dispatcher in list(self._map.values()):
                if dispatcher is not server and dispatcher is not server.trigger:
                    dispatcher.closing = True  # closed by us: nobody went away
                    dispatcher.handle_close()
            server.close()  # the listening socket and the trigger: the map empties, the loop returns

        woken = _pull(server.trigger, stop_accepting)
        lanes.shutdown(cancel_pending=True, timeout=STOP_GRACE_SECONDS)
        if not (woken and _pull(server.trigger, close_everything)):
            close_everything()  # the loop cannot be woken any more: nothing else will close them
        thread.join(timeout=STOP_GRACE_SECONDS)
        self._server = None
        self.closed()

    def threads(self) -> int:
        """Worker threads running now (0 before ``start``)."""
        return self.lanes.threads() if self.lanes is not None else 0

    def closed(self) -> None:
        """After the socket is closed: release what the service holds (nothing here)."""


def _pull(trigger: Any, thunk: Callable[[], None]) -> bool:
    """Run ``thunk`` in the loop's thread; False when the trigger's pipe is already gone (seen once in the
    suite as EBADF at stop), so the caller does the closing itself rather than fail to stop."""
    try:
        trigger.pull_trigger(thunk)
    except OSError:
        return False
    return True


def listen_failure(command: str, host: str, port: int, exc: BaseException, option: str = "--port") -> str:
    """One line for an address a command cannot listen on; a taken port names the option to change."""
    reason = getattr(exc, "strerror", None) or str(exc)
    hint = ""
    if getattr(exc, "errno", None) == errno.EADDRINUSE:
        hint = f" (another process listens there: stop it, or choose another {option})"
    return f"{command} cannot listen on {host}:{port}: {reason}{hint}"


# --------------------------------------------------------------------------- WSGI, for the apps


def status_line(status: int) -> str:
    """``200 OK``: a status as WSGI's start_response wants it."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def request_target(environ: Mapping[str, Any]) -> tuple[str, str]:
    """(path, query) of a WSGI request as the client wrote them (percent-escapes kept)."""
    target = environ.get("REQUEST_URI") or environ.get("PATH_INFO") or "/"
    if not target.startswith("/"):  # an absolute-form target: http://host/path?query
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    path, _, query = target.partition("?")
    return path, query


def request_headers(environ: Mapping[str, Any]) -> dict[str, str]:
    """A WSGI request's headers, lower-case names (Content-Type and Content-Length included)."""
    headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = environ[key]
    return headers


def read_body(environ: Mapping[str, Any], limit: int) -> bytes:
    """The request's body, at most ``limit`` + 1 bytes (one more than allowed tells the app it is too long).
    The server has it in memory or a spool file already: reading never waits on the client."""
    stream = environ.get("wsgi.input")
    return stream.read(limit + 1) if stream is not None else b""


def stop_on_signals(stop: threading.Event, heard: Callable[[signal.Signals], None] | None = None) -> None:
    """SIGTERM and SIGINT set ``stop`` (after telling ``heard`` which one came); SIGUSR1 prints every thread's
    stack to stderr and changes nothing (`kill -USR1 PID`: where a process that does not stop is waiting)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # The handler runs in the main thread between two bytecodes, maybe while that thread holds ``stop``'s own
    # lock (inside stop.wait) or is writing a log line: setting the event or logging there can hang it for good.
    # It only writes the signal's number to a pipe; a thread of its own tells ``heard`` and sets ``stop``.
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe already holds a stop for the thread
            os.write(write_end, bytes([signum]))

    def hand_on() -> None:
        while heard_now := os.read(read_end, 1):
            if heard is not None:
                heard(signal.Signals(heard_now[0]))
            stop.set()

    threading.Thread(target=hand_on, name="stop-signals", daemon=True).start()
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
