"""Sessions to MySQL 8 and MariaDB 10.6+ through PyMySQL: TLS that always verifies, UTC sessions in READ
COMMITTED, time limits, clear errors.

The statements live in ``queries/`` and ``migrations/`` beside it (run by name by the stores and ``migrations.py``), written for the
way this module runs a block:

* a block may hold several statements, each ending with ``;`` at the end of a line. They go to the server
  in ONE round trip (multi-statement text) and, outside ``transaction()``, between ``START TRANSACTION``
  and ``COMMIT``: a block is atomic, as one PostgreSQL statement with data-modifying CTEs is;
* the rows returned are those of the last result set that has columns;
* parameters are written ``:name`` and bound on the client (PyMySQL's escaping); aware datetimes are sent
  as UTC; a ``-- decode: name bool, other json`` line in a block turns those result columns into Python
  booleans and JSON values (MySQL has no boolean type and returns JSON as text); DATETIMEs come back as
  aware UTC datetimes, whole DECIMALs as ints.
"""

from __future__ import annotations

import json
import re
import ssl
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

import pymysql
from pymysql.constants import CLIENT, FIELD_TYPE

from ....config import DatabaseSettings
from ....errors import DatabaseBusy, DatabaseError, DatabaseUnavailable, SchemaMissing
from ...endpoint import endpoint
from ...session import OddTime, Row, Session
from . import server

# Error numbers after which the session is gone (server shutdown, connection killed, lost, gone away, idle
# too long) and those that only mean "not now" (a lock wait or statement time limit, a deadlock victim).
_SESSION_ENDED = {1053, 1927, 2006, 2013, 2055, 4031}
_BUSY = {1205, 1213, 3024, 1969, 3572}
_DEADLOCK = 1213  # of those, a deadlock victim: InnoDB rolled its transaction back at once
# The data broke a rule: duplicate key, CHECK (MySQL 3819, MariaDB 4025), NOT NULL, a value the column cannot
# hold (wrong time, number or JSON text, too long, out of range).
_DUPLICATE_KEY = 1062  # a unique key
_INVALID_INPUT = {_DUPLICATE_KEY, 3819, 4025, 1048, 1292, 1366, 1264, 1406, 3140, 1265, 1411}
_TABLE_MISSING = 1146
# PyMySQL hands over as text what a datetime cannot hold: zero dates (see OddTime).
_TIME_TYPES = (FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE)

_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_DECODE = re.compile(r"^\s*-- decode:(.*)$", re.M)
_STATEMENT_END = re.compile(r";[ \t]*(?:--[^\n]*)?$", re.M)
_QUOTED_NAME = re.compile(r"[`'\"]([^`'\"]+)[`'\"]")


@dataclass(frozen=True)
class _Block:
    """A named block made ready for PyMySQL: pyformat parameters, whether it needs wrapping, its decodings."""
    text: str  # with %(name)s parameters and every literal % doubled
    several: bool  # more than one statement: sent between START TRANSACTION and COMMIT
    decode: dict[str, str]  # result column → bool | json


@lru_cache(maxsize=512)
def _block(sql: str) -> _Block:
    decode: dict[str, str] = {}
    for line in _DECODE.findall(sql):
        for item in line.split(","):
            if item.strip():
                column, kind = item.split()
                decode[column] = kind
    body = sql.strip().rstrip(";").strip()
    several = bool(_STATEMENT_END.search(body))
    text = _PARAMETER.sub(lambda m: f"%({m.group(1)})s", body.replace("%", "%%"))
    return _Block(text=text, several=several, decode=decode)


def _parameter(value: Any) -> Any:
    """A parameter as the server must see it: aware datetimes in UTC (sessions run at +00:00)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _value(value: Any, kind: str | None, time_column: bool = False) -> Any:
    if value is None:
        return None
    if time_column and isinstance(value, str):
        return OddTime(value)
    if kind == "bool":
        return bool(int(value))
    if kind == "json":
        return json.loads(value) if isinstance(value, (str, bytes)) else value
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _reason(exc: BaseException) -> str:
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) >= 2:
        return f"{str(exc.args[1]).splitlines()[0]} (error {exc.args[0]})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the server's TLS certificate could not be verified: {exc.verify_message}"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


def _errno(exc: BaseException) -> int | None:
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def _constraint(exc: BaseException) -> str | None:
    """The constraint or key a refused row broke, as its message names it (``table.key`` on MySQL 8)."""
    names = _QUOTED_NAME.findall(str(exc.args[1]) if len(exc.args) > 1 else "")
    if not names:
        return None
    # "Duplicate entry 'x' for key 'k'" and "Check constraint 'c' is violated": the last quoted name;
    # MariaDB's "CONSTRAINT `c` failed for `db`.`table`": the first.
    name = names[0] if _errno(exc) == 4025 else names[-1]
    return name.rsplit(".", 1)[-1]


class MysqlSession(Session):
    """One session to MySQL 8 or MariaDB 10.6+, opened lazily and reopened after it breaks.

    Not thread-safe: give each thread its own session.
    """

    dialect = "mysql"
    engine_name = "MySQL"
    supports_listen = False  # no LISTEN: a dispatcher polls DispatcherStore.fingerprint instead
    transactional_ddl = False  # DDL commits by itself: migrations apply file by file, each safe to run again
    locking_blocks = True  # READ COMMITTED: each statement of a block reads what committed before it started
    long_transaction_help = server.TRANSACTION_HELP

    begin = "START TRANSACTION"

    def __init__(self, settings: DatabaseSettings, application_name: str = "jenkins-dispatch"):
        super().__init__(settings, application_name)
        self._version = ""  # VERSION() of the server, once connected
        self.mariadb = False  # whether that server is MariaDB (its time limits have other names)

    # ------------------------------------------------------------------ session
    def _connect(self) -> pymysql.connections.Connection:
        s = self.settings
        to = endpoint(s)
        kwargs: dict[str, Any] = dict(
            user=to.user, password=to.password or "", database=to.database, charset="utf8mb4", autocommit=True,
            connect_timeout=to.connect_timeout,
            # A statement may legitimately run up to the statement time limit: the socket waits that plus a margin.
            read_timeout=s.statement_timeout_ms / 1000 + 10, write_timeout=s.statement_timeout_ms / 1000 + 10,
            client_flag=CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS,
            program_name=self.application_name,
        )
        if to.unix_socket:
            kwargs["unix_socket"] = to.unix_socket
        else:
            kwargs["host"] = to.host
            kwargs["port"] = to.port
            if to.tls is not None:
                kwargs["ssl"] = to.tls
        # No context is plain TCP: PyMySQL left to itself prefers TLS it does not verify (and builds a context,
        # loading the system's CA certificates, at every connect).
        kwargs["ssl_disabled"] = to.tls is None
        try:
            conn = pymysql.connect(**kwargs)
        except (pymysql.err.MySQLError, OSError, ssl.SSLError) as exc:
            raise DatabaseUnavailable(f"cannot connect to MySQL at {s.describe()}: {_reason(exc)}") from None
        version = conn.get_server_info() or ""
        mariadb = server.is_mariadb(version)
        # MariaDB limits any statement (seconds); MySQL only SELECTs (milliseconds). Every session in UTC, READ
        # COMMITTED (a claim then locks only the rows it takes: no gap locks blocking the application's INSERTs)
        # and strict (a bad value is an error, never a silent truncation).
        limit = (f"max_statement_time = {s.statement_timeout_ms / 1000:g}, "
                 f"idle_transaction_timeout = {max(1, s.idle_in_transaction_timeout_ms // 1000)}"
                 if mariadb else f"max_execution_time = {int(s.statement_timeout_ms)}")
        try:
            with conn.cursor() as cursor:
                cursor.execute(
                    "SET time_zone = '+00:00', innodb_lock_wait_timeout = 5, "
                    "sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
                    f"NO_ENGINE_SUBSTITUTION', {limit}; "
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
                )
                while cursor.nextset():
                    pass
        except (pymysql.err.MySQLError, OSError) as exc:
            with suppress(Exception):
                conn.close()
            raise DatabaseUnavailable(f"MySQL at {s.describe()} refused the session: {_reason(exc)}") from None
        self._version, self.mariadb = version, mariadb
        self.connects += 1
        return conn

    def _alive(self) -> bool:
        try:
            self._conn.ping(reconnect=False)
        except (pymysql.err.MySQLError, OSError):
            return False
        return True

    def _rollback_now(self) -> None:
        with self._conn.cursor() as cursor:
            cursor.execute("ROLLBACK")

    # ------------------------------------------------------------------ the server
    def _begin_with(self, opening: str) -> str | None:
        return None  # several statements outside a transaction are wrapped in one of their own (_execute)

    def server_version(self) -> str:
        """``VERSION()`` as the handshake gave it (``10.11.19-MariaDB-0+deb12u1``, ``8.0.36``)."""
        self.connection()
        return self._version

    @classmethod
    def server_label(cls, version: str) -> str:
        """``MySQL 8.0.36`` or ``MariaDB 10.11.19``."""
        return server.label(version)

    def unsupported_server(self) -> str | None:
        """Why this server is too old for the queue (see ``server.py``), None when it is not."""
        return server.unsupported_server(self.server_version())

    # ------------------------------------------------------------------ statements
    def run(self, sql: str, **params: Any) -> list[Row]:
        """Run one block (one or several statements) in one round trip; rows of its last result set as dicts."""
        block = _block(sql)
        wrap = block.several and not self._in_transaction
        text = f"START TRANSACTION;\n{block.text};\nCOMMIT" if wrap else block.text
        return self._execute(text, {k: _parameter(v) for k, v in params.items()}, block.decode, wrap)

    def run_script(self, sql: str) -> None:
        """Run several statements as they are, without a wrapping transaction (DDL commits by itself):
        the migration files."""
        block = _block(sql)
        self._execute(block.text, {}, {}, rollback=False)

    def _execute(self, text: str, params: dict, decode: dict[str, str], rollback: bool) -> list[Row]:
        with self._awaiting_answer():
            return self._round_trip(text, params, decode, rollback)

    def _round_trip(self, text: str, params: dict, decode: dict[str, str], rollback: bool) -> list[Row]:
        conn = self.connection()
        self.statements += 1
        rows: list[Row] = []
        try:
            with conn.cursor() as cursor:
                cursor.execute(text, params)
                while True:
                    if cursor.description is not None:
                        names = [d[0] for d in cursor.description]
                        times = [d[1] in _TIME_TYPES for d in cursor.description]
                        rows = [{name: _value(value, decode.get(name), time)
                                 for name, value, time in zip(names, row, times, strict=True)}
                                for row in cursor.fetchall()]
                    self.last_row_count = max(cursor.rowcount, 0)
                    if not cursor.nextset():
                        break
        except (pymysql.err.MySQLError, OSError) as exc:
            raise self._failure(exc, rollback) from None
        return rows

    def _failure(self, exc: BaseException, rollback: bool) -> Exception:
        """The error to raise for ``exc``; ends the block's transaction when the session survives."""
        where = self.settings.describe()
        errno = _errno(exc)
        # Client-side errors (2000-2999: cannot connect, lost, gone away), a socket error, or the server ending us.
        lost = errno in _SESSION_ENDED or (errno is not None and 2000 <= errno < 3000) or (
            errno is None and not isinstance(exc, pymysql.err.ProgrammingError))
        if lost:
            self._drop()
            return DatabaseUnavailable(f"lost the connection to MySQL at {where}: {_reason(exc)}")
        if rollback and self._conn is not None:
            try:
                self._rollback_now()
            except Exception:
                self._drop()
        if errno in _BUSY:
            return DatabaseBusy(f"MySQL at {where} is busy: {_reason(exc)}", victim=errno == _DEADLOCK)
        if errno == _TABLE_MISSING and not self._in_transaction:
            return SchemaMissing(f"the jenkins-dispatch tables are missing in {where}: run `jenkins-dispatch "
                                 f"migrate` first ({_reason(exc)})")
        return DatabaseError(_reason(exc), code=str(errno) if errno is not None else None,
                             constraint=_constraint(exc) if errno in _INVALID_INPUT else None,
                             invalid_input=errno in _INVALID_INPUT, duplicate_key=errno == _DUPLICATE_KEY)
