"""Sessions to the database, whichever it is: the neutral interface the queue, the migrations and the rest
of the package use, a bounded pool of sessions, and what both drivers share (TLS, RDS IAM tokens).

``Database(settings)`` opens the right kind for ``settings.engine``: a ``PostgresDatabase`` (``postgres.py``,
pg8000) or a ``MysqlDatabase`` (``mysql.py``, PyMySQL, for MySQL 8 and MariaDB 10.6+). Nothing outside
``store/`` learns which one it got; ``dialect`` names the folder of ``sql/`` its statements come from.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..config import DatabaseSettings
from ..errors import ConfigError, DatabaseError, DatabaseUnavailable

# The layer build drops AWS's RDS CA bundle here (see layers/shared/Makefile).
BUNDLED_RDS_CA = Path(__file__).with_name("rds-ca-bundle.pem")

__all__ = ["DatabaseError"]  # modules outside the queue take it from here, with the sessions that raise it

# A warm Lambda may sleep for minutes; after that long idle, check the session before trusting it.
IDLE_CHECK_SECONDS = 30.0

Row = dict


class OddTime(str):
    """A time the database holds that Python's datetime cannot: past the year 9999 or before the year 1 (pg8000
    hands such a timestamptz over as text) or no time at all (a MySQL zero date, which PyMySQL hands over as text).
    The table refuses them in scheduled_at now, but older rows, and other columns written by hand, may hold one.
    Kept as the database's own text, so that every reader shows it as it is; ``later`` says on which side of every
    readable time it lies (a zero date sorts before every date, as MySQL orders it)."""

    __slots__ = ()

    @property
    def later(self) -> bool:
        """Whether it lies after every time a datetime can hold (else before all of them)."""
        year = self.split("-", 1)[0]
        return not self.rstrip().endswith("BC") and year.isdigit() and int(year) > 9999


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
    """An RDS IAM authentication token, used as the password (the same for both engines)."""
    try:
        import boto3  # only with IAM auth: the "aws" extra, which the Lambda runtime has
    except ImportError:
        raise ConfigError("DB_IAM_AUTH=true needs boto3 to make a token, which is not installed: "
                          "pip install 'jenkins-dispatch[aws]'") from None

    client = boto3.client("rds", region_name=settings.region)
    return client.generate_db_auth_token(settings.host, settings.port, settings.user)


class Database:
    """One session to the database, opened lazily and reopened after it breaks. ``Database(settings)`` gives
    the engine's kind (see the module's docstring); every kind offers what this class lists.

    Not thread-safe: give each thread its own ``Database``.
    """

    dialect = "postgresql"  # which folder of sql/ the queue and the migrations read their statements from
    engine_name = "PostgreSQL"  # how errors name the server
    notifications = False  # whether listen() / wait_for_notifications() work (PostgreSQL's LISTEN)

    def __new__(cls, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        if cls is Database:
            if settings.engine == "mysql":
                from .dialects.mysql.session import MysqlDatabase

                cls = MysqlDatabase
            else:
                from .dialects.postgresql.session import PostgresDatabase

                cls = PostgresDatabase
        return super().__new__(cls)

    begin = "BEGIN"  # the statement that opens a transaction

    def __init__(self, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        self.settings = settings
        self.application_name = application_name
        self.statements = 0  # round trips issued, for benchmarks and tests
        self.connects = 0  # sessions opened so far: a change means notifications may have been missed
        self.last_row_count = 0
        self._conn = None  # the driver's session, while open
        self._last_used = 0.0
        self._in_transaction = False
        # When the statement in progress was sent (monotonic), None between statements. Written by the
        # session's own thread, read by any (`/healthz`): a database that stopped answering shows while the
        # statement still waits, long before the socket's own timeout ends it.
        self._sent_at: float | None = None

    def run(self, sql: str, **params) -> list[Row]:
        """Run one named block of the dialect's SQL in one round trip; rows come back as dicts."""
        raise NotImplementedError

    # What each driver supplies: open a session, check one that idled, roll back on it directly.
    def _connect(self):
        raise NotImplementedError

    def _alive(self) -> bool:
        raise NotImplementedError

    def _rollback_now(self) -> None:
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop what belonged to the closed session (prepared statements); nothing by default."""

    def waiting_seconds(self) -> float:
        """How long the statement in progress has waited for its answer (0 between statements)."""
        sent_at = self._sent_at
        return 0.0 if sent_at is None else max(0.0, time.monotonic() - sent_at)

    @contextmanager
    def _awaiting_answer(self):
        """Around one round trip (connecting included): what ``waiting_seconds`` measures."""
        outer = self._sent_at
        if outer is None:
            self._sent_at = time.monotonic()
        try:
            yield
        finally:
            self._sent_at = outer

    def connection(self):
        """The open driver session, opened or replaced when missing or found dead after idling."""
        now = time.monotonic()
        idled = self._conn is not None and not self._in_transaction and now - self._last_used > IDLE_CHECK_SECONDS
        if idled and not self._alive():
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
        self._in_transaction = False
        self._forget()

    def close(self) -> None:
        """Close the session, if open."""
        self._drop()

    @contextmanager
    def transaction(self):
        """BEGIN … COMMIT, ROLLBACK on any error. Never hold one across an HTTP call."""
        if self._in_transaction:
            raise RuntimeError("nested transaction")
        self.run(self.begin)
        self._in_transaction = True
        try:
            yield self
        except BaseException:
            self._in_transaction = False
            if self._conn is not None:
                try:
                    self._rollback_now()
                except Exception:
                    self._drop()
            raise
        else:
            self._in_transaction = False
            self.run("COMMIT")

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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

    def waiting_seconds(self) -> float:
        """How long the oldest statement in progress on any of the pool's sessions has waited for its answer."""
        return max((db.waiting_seconds() for db in self._all), default=0.0)

    @contextmanager
    def session(self) -> Iterator[Database]:
        """Borrow a session for the ``with`` block; DatabaseUnavailable when none frees up in time."""
        if not self._available.acquire(timeout=self.acquire_timeout):
            raise DatabaseUnavailable(
                f"all {self.size} database sessions are busy ({self._all[0].engine_name} at "
                f"{self.settings.describe()}); try again"
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
