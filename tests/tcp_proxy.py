"""A TCP forwarder a test controls: put it between a process and PostgreSQL, then cut the path.

    with TcpProxy((db.host, db.port)) as proxy:       # listens on 127.0.0.1:<free port>; or TcpProxy(db.unix_socket)
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/mydb"
        proxy.cut()          # every open connection is reset (RST, both ends); new ones are reset at once
        proxy.restore()      # accept and forward again
        proxy.freeze()       # stop forwarding without a reset: bytes wait, new connections are not accepted
        proxy.thaw()         # forward what waited, and accept again
        proxy.stats()        # accepted, forwarded, refused, reset, active, peak_active
        proxy.upstream_ports()  # local ports of its connections to the server: pg_stat_activity.client_port

Standard library only, one thread per connection plus the accept loop. Bounded: at most
``max_connections`` forwarded at once (more are reset), and everything stops on ``close()`` (or the
``with`` block's end), or by itself once ``max_lifetime`` seconds have passed.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from contextlib import suppress
from dataclasses import dataclass

# How often a connection's thread looks up from its sockets to see whether it was cut.
POLL_SECONDS = 0.05


def reset(sock: socket.socket | None) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST, not a FIN."""
    if sock is None:
        return
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with suppress(OSError):
        sock.close()


@dataclass(frozen=True)
class ProxyStats:
    accepted: int  # client connections accepted
    forwarded: int  # of those, connected to the upstream server
    refused: int  # reset at once: proxy cut, too many connections, or the upstream did not answer
    reset: int  # forwarded connections reset by cut() or close()
    active: int  # forwarded connections open now
    peak_active: int


class _Link:
    """One client connection and its upstream connection; only its own thread touches the sockets."""

    def __init__(self, client: socket.socket):
        self.client = client
        self.upstream: socket.socket | None = None
        self.kill = threading.Event()
        self.done = threading.Event()


class TcpProxy:
    def __init__(self, upstream: tuple[str, int] | str, *, host: str = "127.0.0.1", port: int = 0,
                 max_connections: int = 256, connect_timeout: float = 5.0, send_timeout: float = 30.0,
                 max_lifetime: float | None = 600.0):
        """``upstream``: (host, port), or the path of a Unix socket."""
        self.upstream = upstream
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self.send_timeout = send_timeout
        self.max_lifetime = max_lifetime
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(128)
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Condition()
        self._links: set[_Link] = set()
        self._cut = False
        self._frozen = threading.Event()
        self._stopping = threading.Event()
        self._ports: set[int] = set()  # upstream local ports, open now
        self._ports_seen: set[int] = set()  # ... and ever
        self._counts = dict(accepted=0, forwarded=0, refused=0, reset=0, peak_active=0)
        self._threads: list[threading.Thread] = []
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"tcp-proxy-{self.port}",
                                               daemon=True)
        self._started = False

    # ------------------------------------------------------------------ control
    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def is_cut(self) -> bool:
        with self._lock:
            return self._cut

    def start(self) -> TcpProxy:
        if not self._started:
            self._started = True
            self._deadline = None if self.max_lifetime is None else time.monotonic() + self.max_lifetime
            self._accept_thread.start()
        return self

    def cut(self, wait: float = 5.0) -> int:
        """Reset every open connection and every new one until ``restore()``. Returns how many open
        connections were reset; by then their sockets are closed (waits up to ``wait`` seconds)."""
        with self._lock:
            self._cut = True
            links = list(self._links)
        for link in links:
            link.kill.set()
        deadline = time.monotonic() + wait
        for link in links:
            link.done.wait(max(0.0, deadline - time.monotonic()))
        return len(links)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def freeze(self) -> None:
        """A path that stopped answering without breaking (a hung middlebox, a paused VM): nothing is forwarded
        either way and nothing is reset; new connections wait in the listen backlog. ``thaw()`` resumes."""
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(active=len(self._links), **self._counts)

    def upstream_ports(self, ever: bool = False) -> set[int]:
        """Local ports of the connections to the upstream server (open now, or ever with ``ever``)."""
        with self._lock:
            return set(self._ports_seen if ever else self._ports)

    def close(self, wait: float = 5.0) -> None:
        """Reset everything, stop accepting, and wait (bounded) for every thread to end."""
        self._stopping.set()
        self.cut(wait=wait)
        if self._started:
            self._accept_thread.join(wait)
        with suppress(OSError):
            self._listener.close()
        deadline = time.monotonic() + wait
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ work
    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _accept_loop(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._deadline is not None and time.monotonic() > self._deadline:
                    self._stopping.set()  # lived too long: a test forgot to close it
                    self.cut()
                    break
                if self._frozen.is_set():
                    self._stopping.wait(POLL_SECONDS)
                    continue
                try:
                    ready, _, _ = select.select([self._listener], [], [], POLL_SECONDS)
                except (OSError, ValueError):
                    break
                if not ready:
                    continue
                try:
                    client, _ = self._listener.accept()
                except OSError:
                    continue
                with self._lock:
                    self._counts["accepted"] += 1
                    refuse = self._cut or self._stopping.is_set() or len(self._links) >= self.max_connections
                    if refuse:
                        self._counts["refused"] += 1
                    else:
                        link = _Link(client)
                        self._links.add(link)
                        self._counts["peak_active"] = max(self._counts["peak_active"], len(self._links))
                if refuse:
                    reset(client)
                    continue
                thread = threading.Thread(target=self._forward, args=(link,), name=f"tcp-proxy-{self.port}-link",
                                          daemon=True)
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
                thread.start()
        finally:
            with suppress(OSError):
                self._listener.close()

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self.upstream, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.connect_timeout)
            try:
                sock.connect(self.upstream)
            except OSError:
                sock.close()
                raise
            return sock
        sock = socket.create_connection(self.upstream, timeout=self.connect_timeout)
        with suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _forward(self, link: _Link) -> None:
        killed = False
        port = None
        try:
            try:
                link.upstream = self._connect_upstream()
            except OSError:
                self._count("refused")
                killed = True  # the client gets a reset, like a server that is not there
                return
            if link.upstream.family != socket.AF_UNIX:
                port = link.upstream.getsockname()[1]
            with self._lock:
                self._counts["forwarded"] += 1
                if port is not None:
                    self._ports.add(port)
                    self._ports_seen.add(port)
            for sock in (link.client, link.upstream):
                sock.settimeout(self.send_timeout)
            with suppress(OSError):
                link.client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = {link.client: link.upstream, link.upstream: link.client}
            while True:
                if link.kill.is_set():
                    killed = True
                    self._count("reset")
                    return
                if self._frozen.is_set():
                    link.kill.wait(POLL_SECONDS)
                    continue
                ready, _, _ = select.select(list(peer), [], [], POLL_SECONDS)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return  # one side closed: close the other one normally
                    peer[sock].sendall(data)
        except (OSError, ValueError):
            killed = True  # a reset or a timeout on one side: pass it on as a reset
        finally:
            if killed:
                reset(link.client)
                reset(link.upstream)
            else:
                for sock in (link.client, link.upstream):
                    if sock is not None:
                        with suppress(OSError):
                            sock.close()
            with self._lock:
                self._links.discard(link)
                if port is not None:
                    self._ports.discard(port)
                self._lock.notify_all()
            link.done.set()
