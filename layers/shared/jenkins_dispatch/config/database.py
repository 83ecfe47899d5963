"""The database's settings: DATABASE_URL, or on AWS DB_SECRET_ARN and/or IAM authentication, and the DB_* limits.

The one place outside ``store/dialects/`` that speaks of engines by name: it turns what URLs, secrets and
DB_ENGINE say into ``postgresql`` or ``mysql``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypedDict
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from ..errors import ConfigError
from .reading import SecretFetcher, _bool, _float, _int, _optional_int, _secret_json, _sources, _text
from .variables import default_of


@dataclass(frozen=True)
class DatabaseSettings:
    """Where and how to reach the database: which engine, host, credentials, TLS, timeouts, IAM authentication."""
    engine: str = "postgresql"  # or "mysql" (MySQL 8, MariaDB 10.6+): which driver and which SQL
    host: str = "127.0.0.1"
    port: int = default_of("DB_PORT")
    user: str = "postgres"
    password: str | None = field(default=None, repr=False)
    dbname: str = default_of("DB_NAME")
    unix_socket: str | None = None
    # "disable" (plain TCP, local only), "verify" (TLS, server certificate and name checked).
    tls: str = "disable"
    ca_bundle: str | None = None
    iam_auth: bool = False
    region: str | None = None
    connect_timeout_seconds: float = default_of("DB_CONNECT_TIMEOUT_SECONDS")
    statement_timeout_ms: int = default_of("DB_STATEMENT_TIMEOUT_MS")
    idle_in_transaction_timeout_ms: int = default_of("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS")
    secret_arn: str | None = None

    def describe(self) -> str:
        """Where the database is, for error messages: never the password."""
        if self.unix_socket:
            return f"{self.unix_socket} (database {self.dbname})"
        return f"{self.host}:{self.port} (database {self.dbname})"



# Engines as URLs and RDS secrets ("engine": "postgres", "aurora-mysql", …) name them, and their default ports.
ENGINE_NAMES = {
    "postgresql": "postgresql", "postgres": "postgresql", "aurora-postgresql": "postgresql",
    "mysql": "mysql", "mariadb": "mysql", "aurora-mysql": "mysql", "aurora": "mysql",
}
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def engine_of(value: str, name: str) -> str:
    """``postgresql`` or ``mysql`` for an engine name as URLs, secrets and DB_ENGINE spell it."""
    engine = ENGINE_NAMES.get(value.strip().lower())
    if engine is None:
        raise ConfigError(f"{name} names an unknown database engine {value!r} (use postgresql or mysql)")
    return engine


def parse_database_url(url: str, name: str = "DATABASE_URL") -> DatabaseSettings:
    """``postgresql://user:pass@host:port/db?sslmode=verify-full&sslrootcert=/ca.pem`` (or ``?host=/socket/dir``);
    ``mysql://`` / ``mariadb://user:pass@host:port/db?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{name} is not a valid URL (expected postgresql://user:pass@host:port/db "
                          "or mysql://user:pass@host:port/db)") from None
    if parts.scheme in ("mysql", "mariadb"):
        return _parse_mysql_url(parts, port, name)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"{name} must start with postgresql://, mysql:// or mariadb:// "
                          f"(got scheme {parts.scheme!r})")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    socket_dir = query.get("host")
    host = parts.hostname or ("" if socket_dir else "127.0.0.1")
    dbname = unquote(parts.path.lstrip("/")) or "postgres"
    sslmode = query.get("sslmode", "disable" if (socket_dir or host in ("127.0.0.1", "localhost", "::1")) else "verify-full")
    tls = _postgres_tls(sslmode, name)
    return DatabaseSettings(
        host=host or "localhost",
        port=port or 5432,
        user=unquote(parts.username) if parts.username else "postgres",
        password=unquote(parts.password) if parts.password else None,
        dbname=dbname,
        unix_socket=_postgres_socket(socket_dir, port),
        tls=tls,
        ca_bundle=query.get("sslrootcert"),
    )


def _postgres_tls(sslmode: str, name: str) -> str:
    """``disable`` or ``verify`` for a PostgreSQL ``sslmode``: we never do unverified TLS, so ``require`` is
    upgraded to full verification."""
    if sslmode in ("disable", "allow", "prefer"):
        return "disable"
    if sslmode in ("require", "verify-ca", "verify-full"):
        return "verify"
    raise ConfigError(f"{name} has an unknown sslmode {sslmode!r} (use disable or verify-full)")


def _postgres_socket(socket_dir: str | None, port: int | None) -> str | None:
    """The Unix socket of a ``?host=/socket/dir`` URL: the directory's ``.s.PGSQL.<port>``, unless it names one."""
    if not socket_dir:
        return None
    socket_name = f".s.PGSQL.{port or 5432}"
    return socket_dir if socket_dir.endswith(socket_name) else os.path.join(socket_dir, socket_name)


def _parse_mysql_url(parts: SplitResult, port: int | None, name: str) -> DatabaseSettings:
    """A ``mysql://`` URL: TLS from ``ssl-mode`` (MySQL's spelling) or ``sslmode``, the CA from ``ssl-ca``
    (or ``sslrootcert``), a local socket from ``unix_socket``."""
    query = {k.replace("_", "-").lower(): v[-1] for k, v in parse_qs(parts.query).items()}
    host = parts.hostname or "127.0.0.1"
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise ConfigError(f"{name} names no database: mysql://user:pass@host:port/DATABASE")
    socket_path = query.get("unix-socket")
    mode = (query.get("ssl-mode") or query.get("sslmode")
            or ("disabled" if (socket_path or host in LOCAL_HOSTS) else "verify_identity")).lower().replace("-", "_")
    tls = _mysql_tls(mode, name)
    return DatabaseSettings(
        engine="mysql",
        host=host,
        port=port or DEFAULT_PORTS["mysql"],
        user=unquote(parts.username) if parts.username else "root",
        password=unquote(parts.password) if parts.password else None,
        dbname=dbname,
        unix_socket=socket_path,
        tls=tls,
        ca_bundle=query.get("ssl-ca") or query.get("sslrootcert"),
    )


def _mysql_tls(mode: str, name: str) -> str:
    """``disable`` or ``verify`` for a MySQL ``ssl-mode`` (lower case, '_' for '-'): never unverified TLS, REQUIRED
    is upgraded to full verification, as for PostgreSQL."""
    if mode in ("disabled", "disable", "preferred", "prefer", "allow"):
        return "disable"
    if mode in ("required", "require", "verify_ca", "verify_identity", "verify_full"):
        return "verify"
    raise ConfigError(f"{name} has an unknown ssl-mode {mode!r} (use DISABLED or VERIFY_IDENTITY)")


class _DatabaseTimeouts(TypedDict):
    """The DB_* time limits, however the database itself is named (keyword arguments of DatabaseSettings)."""
    statement_timeout_ms: int
    idle_in_transaction_timeout_ms: int
    connect_timeout_seconds: float


def _database(env: Mapping[str, str], fetch: SecretFetcher | None) -> DatabaseSettings:
    timeouts = _DatabaseTimeouts(
        statement_timeout_ms=_int(env, "DB_STATEMENT_TIMEOUT_MS"),
        idle_in_transaction_timeout_ms=_int(env, "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS"),
        connect_timeout_seconds=_float(env, "DB_CONNECT_TIMEOUT_SECONDS"),
    )
    url = _text(env, "DATABASE_URL")
    arn = _text(env, "DB_SECRET_ARN")
    iam = _bool(env, "DB_IAM_AUTH")
    ca_bundle = _text(env, "DB_CA_BUNDLE") or None
    if url:
        db = parse_database_url(url)
        return replace(db, ca_bundle=ca_bundle or db.ca_bundle, **timeouts)
    if arn or iam:
        secret = _database_secret(fetch, arn)
        host, user, password = _database_login(env, secret, iam)
        engine = _database_engine(env, secret)
        dbname = _database_name(env, secret, engine)
        return DatabaseSettings(
            engine=engine,
            host=host,
            port=_database_port(env, secret, engine),
            user=user,
            password=password,
            dbname=dbname,
            tls="verify",
            ca_bundle=ca_bundle,
            iam_auth=iam,
            region=_text(env, "AWS_REGION") or _text(env, "AWS_DEFAULT_REGION") or None,
            secret_arn=arn or None,
            **timeouts,
        )
    raise ConfigError("no database configured: set DATABASE_URL (or DB_SECRET_ARN on AWS)")


def _database_secret(fetch: SecretFetcher | None, arn: str) -> dict:
    """The JSON of the secret named by DB_SECRET_ARN (an empty dict when none is named: IAM authentication alone)."""
    if not arn:
        return {}
    if fetch is None:
        raise ConfigError("DB_SECRET_ARN is set but no secrets source is available")
    return _secret_json(fetch, "DB_SECRET_ARN", arn)


def _database_login(env: Mapping[str, str], secret: dict,
                    iam: bool) -> tuple[str, str, str | None]:
    """Host, user and password (None with IAM authentication, which signs a token instead): DB_HOST and DB_USER
    over the secret's; the password only ever from the secret."""
    host = _text(env, "DB_HOST") or secret.get("host")
    user = _text(env, "DB_USER") or secret.get("username")
    if not host:
        raise ConfigError("no database host: set DB_HOST or put 'host' in the secret named by DB_SECRET_ARN")
    if not user:
        raise ConfigError("no database user: set DB_USER or put 'username' in the secret named by DB_SECRET_ARN")
    password = None if iam else secret.get("password")
    if not iam and not password:
        raise ConfigError("the secret named by DB_SECRET_ARN has no 'password' (or set DB_IAM_AUTH=true)")
    return str(host), str(user), password


def _database_engine(env: Mapping[str, str], secret: dict) -> str:
    """DB_ENGINE and the secret's ``engine``, which must agree when both are given; neither: PostgreSQL."""
    named = engine_of(_text(env, "DB_ENGINE"), "DB_ENGINE") if _text(env, "DB_ENGINE") else None
    stored = (engine_of(str(secret["engine"]), "the secret named by DB_SECRET_ARN ('engine')")
              if secret.get("engine") else None)
    if named and stored and named != stored:
        # The template always sets DB_ENGINE: a MySQL secret under the default would otherwise be spoken to
        # in PostgreSQL's protocol and fail with a driver's error.
        raise ConfigError(f"DB_ENGINE is {named} but the secret named by DB_SECRET_ARN says engine "
                          f"{secret['engine']!r}: make them agree (the template's DatabaseEngine parameter)")
    return named or stored or "postgresql"


def _database_name(env: Mapping[str, str], secret: dict, engine: str) -> str:
    """DB_NAME, else the secret's ``dbname``, else PostgreSQL's default database (MySQL has none to fall back on)."""
    dbname = _text(env, "DB_NAME") or secret.get("dbname") or (
        default_of("DB_NAME") if engine == "postgresql" else None)
    if not dbname:
        raise ConfigError("no database name: set DB_NAME or put 'dbname' in the secret named by DB_SECRET_ARN")
    return dbname


def _database_port(env: Mapping[str, str], secret: dict, engine: str) -> int:
    """DB_PORT, else the secret's ``port``, else the engine's default port."""
    port = _optional_int(env, "DB_PORT")
    if port is not None:
        return port
    try:
        port = int(secret.get("port") or DEFAULT_PORTS[engine])
    except (TypeError, ValueError):
        port = 0
    if not 1 <= port <= 65535:
        raise ConfigError("the secret named by DB_SECRET_ARN has a 'port' that is not a whole number from "
                          "1 to 65535 (or set DB_PORT)")
    return port


def load_database_settings(env: Mapping[str, str] | None = None,
                           fetch_secret: SecretFetcher | None = None) -> DatabaseSettings:
    """The database part of the settings alone (DATABASE_URL or DB_SECRET_ARN, DB_* timeouts)."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _database(env, fetch_secret)

