"""Sessions to PostgreSQL through pg8000: TLS that always verifies, session timeouts, clear errors, and
waiting for notifications (LISTEN).

The statements live in ``queries/`` and ``migrations/`` beside it (run by name by the stores and
``migrations.py``); this module only knows how to open, check and close sessions, and fulfils the session
contract (``store/session.py``). ``db.open_database(settings)`` makes one for PostgreSQL URLs.
"""

from __future__ import annotations

import select
import socket
import ssl
from contextlib import suppress
from typing import Any

import pg8000.native
from pg8000.exceptions import DatabaseError as DriverError
from pg8000.exceptions import InterfaceError

from ....config import DatabaseSettings
from ....errors import DatabaseBusy, DatabaseError, DatabaseUnavailable, SchemaMissing
from ...endpoint import endpoint
from ...session import OddTime, Row, Session
from . import server

# SQLSTATEs after which the session is gone (the server ended it: failover, pg_terminate_backend,
# shutdown) and those that only mean "not now" (a lock or statement timeout, a deadlock victim).
_SESSION_ENDED = ("57P01", "57P02", "57P03", "08000", "08003", "08006")
_BUSY = ("55P03", "57014", "40P01", "40001")
_VICTIM = ("40P01", "40001")  # of those, a deadlock or serialization victim: rolled back at once
# The data broke a rule: a CHECK, a unique key, NOT NULL, or text that is not a number, JSON or a time.
_DUPLICATE_KEY = "23505"  # a unique key
_INVALID_INPUT = ("23514", _DUPLICATE_KEY, "23502", "22P02", "22P05", "22021", "22007", "22008", "22003")
# date, timestamp, timestamptz: pg8000 hands over as text what a datetime cannot hold (see OddTime).
_TIME_TYPES = (1082, 1114, 1184)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, DriverError) and exc.args and isinstance(exc.args[0], dict):
        fields = exc.args[0]
        return f"{fields.get('M', 'error')} (SQLSTATE {fields.get('C', '?')})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the server's TLS certificate could not be verified: {exc.verify_message}"
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, InterfaceError) and isinstance(cause, OSError):
        return cause.strerror or str(cause) or type(cause).__name__
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


class _Connection(pg8000.native.Connection):
    """pg8000's connection, minus one leak: when connecting fails after it wrapped the socket in its buffered file
    (a path cut mid-handshake), it drops that file with the startup message unsent, and the file's finalizer
    printed "Exception ignored in: <_io.BufferedRWPair …> … Broken pipe" to stderr later (~100 failed connects in
    one outage test; `serve`'s log on Python 3.13). Closed here, quietly, before the error goes on."""

    def __init__(self, **kwargs: Any):
        try:
            super().__init__(**kwargs)
        except BaseException:
            buffered = getattr(self, "_sock", None)
            if buffered is not None:
                with suppress(Exception):
                    buffered.close()
            raise


class PostgresSession(Session):
    """One session to PostgreSQL, opened lazily and reopened after it breaks.

    Not thread-safe: give each thread its own session.
    """

    dialect = "postgresql"
    engine_name = "PostgreSQL"
    supports_listen = True  # LISTEN/NOTIFY: a dispatcher sleeps until a row changes
    transactional_ddl = True  # every migration applies in one transaction, or none does
    long_transaction_help = server.TRANSACTION_HELP

    def __init__(self, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        super().__init__(settings, application_name)
        self._prepared: dict[str, pg8000.native.PreparedStatement] = {}
        self._listening: tuple[str, ...] = ()

    # ------------------------------------------------------------------ session
    def _connect(self) -> pg8000.native.Connection:
        s = self.settings
        to = endpoint(s)
        # No context is plain TCP: False, since pg8000 left to itself asks for TLS it does not verify (and builds a
        # context for it, ~20 ms of CPU, at every connect).
        kwargs: dict[str, Any] = dict(user=to.user, password=to.password, database=to.database, timeout=to.connect_timeout,
                      application_name=self.application_name, ssl_context=to.tls or False)
        if to.unix_socket:
            kwargs["unix_sock"] = to.unix_socket
        else:
            kwargs["host"] = to.host
            kwargs["port"] = to.port
        try:
            conn = _Connection(**kwargs)
        except (InterfaceError, DriverError, OSError, ssl.SSLError) as exc:
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL at {s.describe()}: {_reason(exc)}") from None
        # pg8000 applies the connect timeout to every later read too; a statement may legitimately run
        # up to statement_timeout, so widen the socket's limit to that plus a margin.
        usock = getattr(conn, "_usock", None)
        if usock is not None:
            usock.settimeout(s.statement_timeout_ms / 1000 + 10)
            if usock.family in (socket.AF_INET, socket.AF_INET6):
                # pg8000 writes a message in several buffered chunks; without this, Nagle's algorithm holds
                # the last chunk of any statement over 8 KiB until the server's delayed ACK: +40 ms.
                usock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            # One round trip. Our sessions never hold a snapshot for long: bounded statements, and
            # a transaction left idle is killed by the server rather than stalling vacuum.
            conn.run(
                f"SET statement_timeout = {int(s.statement_timeout_ms)}; "
                f"SET idle_in_transaction_session_timeout = {int(s.idle_in_transaction_timeout_ms)}; "
                "SET lock_timeout = 5000"
            )
            for channel in self._listening:
                conn.run(f'LISTEN "{channel}"')
        except (InterfaceError, DriverError, OSError) as exc:
            with suppress(Exception):
                conn.close()
            raise DatabaseUnavailable(f"PostgreSQL at {s.describe()} refused the session: {_reason(exc)}") from None
        self.connects += 1
        return conn

    def _alive(self) -> bool:
        try:
            self._conn.run("SELECT 1")
        except (InterfaceError, DriverError, OSError):
            return False
        return True

    def _rollback_now(self) -> None:
        self._conn.run("ROLLBACK")

    def _forget(self) -> None:
        self._prepared = {}

    # ------------------------------------------------------------------ the server
    def server_version(self) -> str:
        """The version the server announced when the session opened (``16.4 (Debian 16.4-1.pgdg120+1)``)."""
        return str(self.connection().parameter_statuses.get("server_version", ""))

    @classmethod
    def server_label(cls, version: str) -> str:
        """``PostgreSQL 16.4``."""
        return server.label(version)

    def unsupported_server(self) -> str | None:
        """None: every supported PostgreSQL holds the queue (no round trip is made)."""
        return server.unsupported_server("")

    # ------------------------------------------------------------------ statements
    def run(self, sql: str, **params: Any) -> list[Row]:
        """Run one statement in one round trip; rows come back as dicts keyed by column name.

        Statements with parameters are prepared once per session and reused, so the server parses and
        plans them once and each later call is a single Bind/Execute exchange. Without parameters the
        simple protocol is used, so a script of several statements is one round trip too.
        """
        with self._awaiting_answer():
            return self._run(sql, params)

    def run_script(self, sql: str) -> None:
        """Several statements in one round trip (the simple protocol), with no transaction of its own."""
        self.run(sql)

    def _run(self, sql: str, params: dict) -> list[Row]:
        conn = self.connection()
        self.statements += 1
        try:
            if params:
                prepared = self._prepared.get(sql)
                if prepared is None:
                    prepared = self._prepared[sql] = conn.prepare(sql)
                rows = prepared.run(**params)
                context = prepared._context
            else:
                rows = conn.run(sql)
                context = conn._context
        except (InterfaceError, OSError) as exc:  # socket timeouts are OSErrors
            self._drop()
            raise DatabaseUnavailable(
                f"lost the connection to PostgreSQL at {self.settings.describe()}: {_reason(exc)}"
            ) from None
        except DriverError as exc:
            if is_sqlstate(exc, *_SESSION_ENDED):
                self._drop()
                raise DatabaseUnavailable(
                    f"PostgreSQL at {self.settings.describe()} ended the session: {_reason(exc)}"
                ) from None
            if is_sqlstate(exc, *_BUSY):
                raise DatabaseBusy(f"PostgreSQL at {self.settings.describe()} is busy: {_reason(exc)}",
                                   victim=is_sqlstate(exc, *_VICTIM)) from None
            if is_sqlstate(exc, "42P01") and not self._in_transaction:
                raise SchemaMissing(
                    f"the jenkins-dispatch tables are missing in {self.settings.describe()}: run `jenkins-dispatch "
                    f"migrate` first ({_reason(exc)})"
                ) from None
            fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            raise DatabaseError(_reason(exc), code=fields.get("C"), constraint=fields.get("n"),
                                invalid_input=fields.get("C") in _INVALID_INPUT,
                                duplicate_key=fields.get("C") == _DUPLICATE_KEY) from None
        self.last_row_count = context.row_count
        if not rows:
            return []
        names = [c["name"] for c in context.columns]
        times = [i for i, c in enumerate(context.columns) if c.get("type_oid") in _TIME_TYPES]
        if times:
            rows = [_odd_times_marked(row, times) for row in rows]
        return [dict(zip(names, row, strict=True)) for row in rows]

    # ------------------------------------------------------------------ notifications
    def listen(self, channel: str) -> None:
        """LISTEN on ``channel`` now and on every session this object opens later."""
        if channel not in self._listening:
            self._listening = (*self._listening, channel)
            if self._conn is not None:
                self.run(f'LISTEN "{channel}"')

    def wait_for_notifications(self, timeout: float) -> list[str]:
        """Payloads of the notifications received on the LISTENed channels, waiting up to ``timeout``
        seconds for the first one ([] when none came). Costs no statement while nothing arrives.

        pg8000 parses incoming messages only while it runs a statement, so this waits on the socket
        and, once something arrived (a notification, or the server closing the session), runs one
        ``SELECT 1`` to have it parsed (raising DatabaseUnavailable if the session is gone).
        """
        conn = self.connection()
        if not conn.notifications and not _readable(conn, timeout):
            return []
        if not conn.notifications:
            self.run("SELECT 1")
        payloads = []
        while self._conn is not None and self._conn.notifications:
            _pid, channel, payload = self._conn.notifications.popleft()
            if channel in self._listening:
                payloads.append(payload)
        return payloads


def _odd_times_marked(row: list, times: list[int]) -> list:
    """The row with each time that came back as text (out of datetime's range) as an OddTime."""
    if any(isinstance(row[i], str) for i in times):
        row = list(row)
        for i in times:
            if isinstance(row[i], str):
                row[i] = OddTime(row[i])
    return row


def _readable(conn: pg8000.native.Connection, timeout: float) -> bool:
    """Whether the session has unread input, waiting up to ``timeout`` seconds for some."""
    usock = conn._usock
    # Bytes may already sit in pg8000's buffered reader (read along with the last answer) or, over TLS,
    # in the decrypted buffer: the raw socket would not show them. Peek without blocking.
    if isinstance(usock, ssl.SSLSocket) and usock.pending():
        return True
    previous = usock.gettimeout()
    try:
        usock.settimeout(0)
        if conn._sock.peek(1):
            return True
    except (BlockingIOError, ssl.SSLWantReadError):
        pass
    except OSError:
        return True  # a broken socket: let the statement that follows report it
    finally:
        with suppress(OSError):
            usock.settimeout(previous)
    try:
        ready, _, _ = select.select([usock], [], [], max(timeout, 0.0))
    except (OSError, ValueError):
        return True
    return bool(ready)


def is_sqlstate(exc: BaseException, *codes: str) -> bool:
    """Whether ``exc`` is a pg8000 error with one of the SQLSTATE ``codes``."""
    return (
        isinstance(exc, DriverError)
        and bool(exc.args)
        and isinstance(exc.args[0], dict)
        and exc.args[0].get("C") in codes
    )
