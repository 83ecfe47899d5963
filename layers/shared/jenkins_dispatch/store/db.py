"""Connections to PostgreSQL: TLS that always verifies, session timeouts, clear errors, a bounded pool,
and waiting for notifications.

The statements live in ``sql/postgresql/`` (run by name by ``queue.py`` and ``migrations.py``); this module
only knows how to open, check, share and close sessions, and names its dialect for them.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pg8000.native

# DatabaseError (a statement the server refused): modules outside the queue import it from here, never from the
# driver, so that none of them knows which database it speaks to.
from pg8000.exceptions import DatabaseError, InterfaceError

from ..config import DatabaseSettings
from ..errors import ConfigError, DatabaseBusy, DatabaseUnavailable, SchemaMissing

# The layer build drops AWS's RDS CA bundle here (see layers/shared/Makefile).
BUNDLED_RDS_CA = Path(__file__).with_name("rds-ca-bundle.pem")

# A warm Lambda may sleep for minutes; after that long idle, check the session before trusting it.
IDLE_CHECK_SECONDS = 30.0

Row = dict

# SQLSTATEs after which the session is gone (the server ended it: failover, pg_terminate_backend,
# shutdown) and those that only mean "not now" (a lock or statement timeout, a deadlock victim).
_SESSION_ENDED = ("57P01", "57P02", "57P03", "08000", "08003", "08006")
_BUSY = ("55P03", "57014", "40P01", "40001")


def tls_context(settings: DatabaseSettings) -> ssl.SSLContext:
    """System roots (RDS Proxy uses ACM certificates) plus the RDS CA bundle (instance endpoints)."""
    context = ssl.create_default_context()
    bundle = settings.ca_bundle or (str(BUNDLED_RDS_CA) if BUNDLED_RDS_CA.exists() else None)
    if bundle:
        try:
            context.load_verify_locations(cafile=bundle)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"DB_CA_BUNDLE: cannot load CA bundle {bundle}: {exc}") from None
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _iam_token(settings: DatabaseSettings) -> str:
    try:
        import boto3  # only with IAM auth: the "aws" extra, which the Lambda runtime has
    except ImportError:
        raise ConfigError("DB_IAM_AUTH=true needs boto3 to make a token, which is not installed: "
                          "pip install 'jenkins-dispatch[aws]'") from None

    client = boto3.client("rds", region_name=settings.region)
    return client.generate_db_auth_token(settings.host, settings.port, settings.user)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, DatabaseError) and exc.args and isinstance(exc.args[0], dict):
        fields = exc.args[0]
        return f"{fields.get('M', 'error')} (SQLSTATE {fields.get('C', '?')})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the server's TLS certificate could not be verified: {exc.verify_message}"
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, InterfaceError) and isinstance(cause, OSError):
        return cause.strerror or str(cause) or type(cause).__name__
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


class Database:
    """One session to PostgreSQL, opened lazily and reopened after it breaks.

    Not thread-safe: give each thread its own ``Database``.
    """

    dialect = "postgresql"  # which folder of sql/ the queue and the migrations read their statements from

    def __init__(self, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        self.settings = settings
        self.application_name = application_name
        self._conn: pg8000.native.Connection | None = None
        self._last_used = 0.0
        self._in_transaction = False
        self._prepared: dict[str, pg8000.native.PreparedStatement] = {}
        self.statements = 0  # round trips issued, for benchmarks and tests
        self.last_row_count = 0
        self.connects = 0  # sessions opened so far: a change means notifications may have been missed
        self._listening: tuple[str, ...] = ()

    # ------------------------------------------------------------------ session
    def _connect(self) -> pg8000.native.Connection:
        s = self.settings
        password = _iam_token(s) if s.iam_auth else s.password
        kwargs = dict(
            user=s.user,
            password=password,
            database=s.dbname,
            timeout=s.connect_timeout_seconds,
            application_name=self.application_name,
        )
        if s.unix_socket:
            kwargs["unix_sock"] = s.unix_socket
        else:
            kwargs["host"] = s.host
            kwargs["port"] = s.port
            if s.tls == "verify":
                kwargs["ssl_context"] = tls_context(s)
        try:
            conn = pg8000.native.Connection(**kwargs)
        except (InterfaceError, DatabaseError, OSError, ssl.SSLError) as exc:
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
        except (InterfaceError, DatabaseError, OSError) as exc:
            with suppress(Exception):
                conn.close()
            raise DatabaseUnavailable(f"PostgreSQL at {s.describe()} refused the session: {_reason(exc)}") from None
        self.connects += 1
        return conn

    def connection(self) -> pg8000.native.Connection:
        """The open session, opened or replaced when missing or found dead after idling."""
        now = time.monotonic()
        if self._conn is not None and not self._in_transaction and now - self._last_used > IDLE_CHECK_SECONDS:
            try:
                self._conn.run("SELECT 1")
            except (InterfaceError, DatabaseError, OSError):
                self._drop()
        if self._conn is None:
            self._conn = self._connect()
        self._last_used = now
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
        self._conn = None
        self._prepared = {}
        self._in_transaction = False

    def close(self) -> None:
        """Close the session, if open."""
        self._drop()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ statements
    def run(self, sql: str, **params) -> list[Row]:
        """Run one statement in one round trip; rows come back as dicts keyed by column name.

        Statements with parameters are prepared once per session and reused, so the server parses and
        plans them once and each later call is a single Bind/Execute exchange. Without parameters the
        simple protocol is used, so a script of several statements is one round trip too.
        """
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
        except DatabaseError as exc:
            if is_sqlstate(exc, *_SESSION_ENDED):
                self._drop()
                raise DatabaseUnavailable(
                    f"PostgreSQL at {self.settings.describe()} ended the session: {_reason(exc)}"
                ) from None
            if is_sqlstate(exc, *_BUSY):
                raise DatabaseBusy(f"PostgreSQL at {self.settings.describe()} is busy: {_reason(exc)}") from None
            if is_sqlstate(exc, "42P01") and not self._in_transaction:
                raise SchemaMissing(
                    f"the jenkins-dispatch tables are missing in {self.settings.describe()}: run `jenkins-dispatch "
                    f"migrate` first ({_reason(exc)})"
                ) from None
            raise
        self.last_row_count = context.row_count
        if not rows:
            return []
        names = [c["name"] for c in context.columns]
        return [dict(zip(names, row, strict=True)) for row in rows]

    @contextmanager
    def transaction(self):
        """BEGIN … COMMIT, ROLLBACK on any error. Never hold one across an HTTP call."""
        if self._in_transaction:
            raise RuntimeError("nested transaction")
        self.run("BEGIN")
        self._in_transaction = True
        try:
            yield self
        except BaseException:
            self._in_transaction = False
            if self._conn is not None:
                try:
                    self._conn.run("ROLLBACK")
                except Exception:
                    self._drop()
            raise
        else:
            self._in_transaction = False
            self.run("COMMIT")


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


class SessionPool:
    """At most ``size`` sessions shared by many threads (the webhook under `serve`).

    A session that breaks is closed by its ``Database`` and reopened by the next borrower, so the number
    of server-side sessions never exceeds ``size``, whatever the number of requests or failures.
    """

    def __init__(self, settings: DatabaseSettings, size: int, application_name: str = "jenkins-dispatch",
                 acquire_timeout: float = 5.0):
        self.settings = settings
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._free = [Database(settings, application_name) for _ in range(size)]
        self._all = list(self._free)
        self._lock = threading.Lock()
        self._available = threading.Semaphore(size)

    @property
    def statements(self) -> int:
        """How many statements the pool's sessions have run, all together."""
        return sum(db.statements for db in self._all)

    @contextmanager
    def session(self) -> Iterator[Database]:
        """Borrow a session for the ``with`` block; DatabaseUnavailable when none frees up in time."""
        if not self._available.acquire(timeout=self.acquire_timeout):
            raise DatabaseUnavailable(
                f"all {self.size} database sessions are busy (PostgreSQL at {self.settings.describe()}); "
                "try again"
            )
        with self._lock:
            db = self._free.pop()
        try:
            yield db
        finally:
            with self._lock:
                self._free.append(db)
            self._available.release()

    def close(self) -> None:
        """Close every session of the pool."""
        with self._lock:
            for db in self._all:
                db.close()


def is_sqlstate(exc: BaseException, *codes: str) -> bool:
    """Whether ``exc`` is a database error with one of the SQLSTATE ``codes``."""
    return (
        isinstance(exc, DatabaseError)
        and bool(exc.args)
        and isinstance(exc.args[0], dict)
        and exc.args[0].get("C") in codes
    )


def database_error_message(exc: DatabaseError) -> str:
    """A database error in one line, without secrets."""
    return _reason(exc)

