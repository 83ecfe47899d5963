"""The session contract: everything the rest of the package may ask of a database session, whichever engine
answers, and the mechanics every engine shares (a lazy session reopened after it breaks, transactions, how long
the statement in progress has waited).

Each engine's folder (``dialects/<engine>/``) supplies one subclass of ``Session``; ``db.open_database`` picks
it. Where engines differ, callers ask the session (``supports_listen``, ``transactional_ddl``, ``locking_blocks``,
``unsupported_server()``, ``server_label()``, ``long_transaction_help``) and never compare engine names.
``tests/integration/test_session_contract.py`` runs every method declared here on every engine.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, ClassVar

from ..config import DatabaseSettings

# A warm Lambda may sleep for minutes; after that long idle, check the session before trusting it.
IDLE_CHECK_SECONDS = 30.0

Row = dict[str, Any]  # one result row, column name → value; the stores hand out the shapes of rows.py


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


@dataclass(frozen=True)
class TransactionHelp:
    """What to tell an operator about a transaction left open too long on this engine."""

    holds_back: str  # what it holds back ("vacuum")
    listed_in: str  # where its session is listed ("pg_stat_activity")
    end_it: str  # the statement that ends it, with ``{pid}``
    grant: str  # the grant that shows other users' transactions


class Session(ABC):
    """One session to the database, opened lazily and reopened after it breaks.

    Not thread-safe: give each thread its own session.
    """

    dialect: ClassVar[str]  # the engine's folder under dialects/: where its statements and migrations are
    engine_name: ClassVar[str]  # how messages name the server ("PostgreSQL")
    begin: ClassVar[str] = "BEGIN"  # the statement that opens a transaction
    supports_listen: ClassVar[bool] = False  # whether listen() / wait_for_notifications() work
    transactional_ddl: ClassVar[bool]  # whether a migration's DDL can be rolled back with its transaction
    # Whether a block of several statements runs in one round trip, each statement reading what committed before
    # it: claim_batch_capped then takes the caps lock itself (no lock_caps round trip, no transaction around).
    locking_blocks: ClassVar[bool] = False
    long_transaction_help: ClassVar[TransactionHelp]

    def __init__(self, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        self.settings = settings
        self.application_name = application_name
        self.statements = 0  # round trips issued, for benchmarks and tests
        self.connects = 0  # sessions opened so far: a change means notifications may have been missed
        self.last_row_count = 0
        self._conn: Any = None  # the driver's session, while open
        self._last_used = 0.0
        self._in_transaction = False
        # When the statement in progress was sent (monotonic), None between statements. Written by the
        # session's own thread, read by any (`/healthz`): a database that stopped answering shows while the
        # statement still waits, long before the socket's own timeout ends it.
        self._sent_at: float | None = None

    # ------------------------------------------------------------------ what each engine supplies
    @abstractmethod
    def run(self, sql: str, **params: Any) -> list[Row]:
        """Run one named block of the engine's SQL in one round trip; rows come back as dicts."""

    @abstractmethod
    def run_script(self, sql: str) -> None:
        """Run several statements as they are, in one round trip and with no wrapping transaction of its own:
        the migration files."""

    @abstractmethod
    def server_version(self) -> str:
        """The version string the server reports (opens the session if needed)."""

    @classmethod
    @abstractmethod
    def server_label(cls, version: str) -> str:
        """How people name the server that reports ``version``: ``PostgreSQL 16.4``, ``MariaDB 10.11.19``."""

    @abstractmethod
    def unsupported_server(self) -> str | None:
        """Why this server cannot hold the queue, in one line; None when it can (may open the session)."""

    @abstractmethod
    def _connect(self) -> Any:
        """A new driver session, set up (time limits, time zone, LISTENs); raises DatabaseUnavailable."""

    @abstractmethod
    def _alive(self) -> bool:
        """Whether the open driver session still answers."""

    @abstractmethod
    def _rollback_now(self) -> None:
        """ROLLBACK on the open driver session, directly."""

    def _forget(self) -> None:  # noqa: B027 (most engines keep nothing per session: optional, not abstract)
        """Drop what belonged to the closed session (prepared statements); nothing by default."""

    # ------------------------------------------------------------------ notifications
    def listen(self, channel: str) -> None:
        """LISTEN on ``channel`` now and on every session opened later (only where ``supports_listen``)."""
        raise NotImplementedError(f"{self.engine_name} sends no notifications: poll instead")

    def wait_for_notifications(self, timeout: float) -> list[str]:
        """Payloads received on the channels listened to, waiting up to ``timeout`` seconds for the first
        ([] when none came). Only where ``supports_listen``."""
        raise NotImplementedError(f"{self.engine_name} sends no notifications: poll instead")

    # ------------------------------------------------------------------ shared mechanics
    @property
    def in_transaction(self) -> bool:
        """Whether a ``transaction()`` block is open: a statement failing in it leaves the block to the caller."""
        return self._in_transaction

    def waiting_seconds(self) -> float:
        """How long the statement in progress has waited for its answer (0 between statements)."""
        sent_at = self._sent_at
        return 0.0 if sent_at is None else max(0.0, time.monotonic() - sent_at)

    @contextmanager
    def _awaiting_answer(self) -> Iterator[None]:
        """Around one round trip (connecting included): what ``waiting_seconds`` measures."""
        outer = self._sent_at
        if outer is None:
            self._sent_at = time.monotonic()
        try:
            yield
        finally:
            self._sent_at = outer

    def connection(self) -> Any:
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
    def transaction(self, opening: str | None = None) -> Iterator[Session]:
        """BEGIN … COMMIT, ROLLBACK on any error. Never hold one across an HTTP call. ``opening``: a statement
        without parameters that opens the transaction (the caps lock), sent in BEGIN's round trip where the engine
        takes several statements at once that way."""
        if self._in_transaction:
            raise RuntimeError("nested transaction")
        together = None if opening is None else self._begin_with(opening)
        try:
            self.run(together or self.begin)
        except BaseException:
            if together is not None and self._conn is not None:
                self._roll_back_or_drop()  # BEGIN went through, its opening did not: the transaction is open
            raise
        self._in_transaction = True
        try:
            if opening is not None and together is None:
                self.run(opening)
            yield self
        except BaseException:
            self._in_transaction = False
            if self._conn is not None:
                self._roll_back_or_drop()
            raise
        else:
            self._in_transaction = False
            self.run("COMMIT")

    def _roll_back_or_drop(self) -> None:
        try:
            self._rollback_now()
        except Exception:
            self._drop()

    def _begin_with(self, opening: str) -> str | None:
        """BEGIN and ``opening`` as one text to run, or None where they must go one after the other."""
        return f"{self.begin};\n{opening}"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
