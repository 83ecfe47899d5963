"""Settings: read once from the environment (and Secrets Manager on AWS), validated, passed around typed.

Nothing else in the package reads ``os.environ``. Every error names the variable at fault and never
echoes a secret's value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import ConfigError

SecretFetcher = Callable[[str], str]
"""Given a secret's ARN, return its SecretString."""

# Room kept between the end of our last request and the end of a claim's lease (clocks, statement
# latency), and room for the claim itself and the job checks before the first trigger: a lease must
# hold one whole trigger wave (JENKINS_TIMEOUT_SECONDS) plus both, or no trigger is ever sent.
LEASE_SAFETY_SECONDS = 0.5
CLAIM_ROOM_SECONDS = 0.5
RESEND_QUIET_LEASES = 3
DISPATCHER_MODES = ("continuous", "single")


@dataclass(frozen=True)
class DatabaseSettings:
    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "postgres"
    password: str | None = field(default=None, repr=False)
    dbname: str = "postgres"
    unix_socket: str | None = None
    # "disable" (plain TCP, local only), "verify" (TLS, server certificate and name checked).
    tls: str = "disable"
    ca_bundle: str | None = None
    iam_auth: bool = False
    region: str | None = None
    connect_timeout_seconds: float = 5.0
    statement_timeout_ms: int = 15_000
    idle_in_transaction_timeout_ms: int = 30_000
    secret_arn: str | None = None

    def describe(self) -> str:
        """Where the database is, for error messages: never the password."""
        if self.unix_socket:
            return f"{self.unix_socket} (database {self.dbname})"
        return f"{self.host}:{self.port} (database {self.dbname})"


@dataclass(frozen=True)
class JenkinsSettings:
    url: str
    user: str
    api_token: str = field(repr=False)
    timeout_seconds: float = 10.0
    verify_tls: bool = True
    search_window: int = 100


@dataclass(frozen=True)
class Settings:
    database: DatabaseSettings
    jenkins: JenkinsSettings | None = None
    webhook_secret: str | None = field(default=None, repr=False)
    batch_size: int = 32
    max_parallel_triggers: int = 8
    max_in_flight: int | None = None
    lease_seconds: int = 300
    unstable_is_success: bool = True
    retry_base_seconds: float = 30.0
    retry_max_seconds: float = 900.0
    time_margin_seconds: float = 10.0
    # Sessions the webhook may hold under `serve` (Lambda: one per container, whatever this says).
    webhook_db_pool_size: int = 4
    # Lambda dispatcher: "continuous" keeps dispatching (woken by new work) until the invocation's time
    # is nearly up; "single" runs one pass and returns.
    dispatcher_mode: str = "continuous"
    # A dispatch Jenkins showed no trace of is sent again at most this many times (no attempt spent)...
    max_resends: int = 3
    # ...held this long in Jenkins's queue (a quiet period), so that an original Jenkins acts on late
    # merges with it instead of building twice. Default: RESEND_QUIET_LEASES leases.
    resend_quiet_seconds: float = 900.0

    def require_jenkins(self) -> JenkinsSettings:
        if self.jenkins is None:
            raise ConfigError(
                "Jenkins is not configured: set JENKINS_URL, JENKINS_USER and JENKINS_API_TOKEN "
                "(or JENKINS_SECRET_ARN)"
            )
        return self.jenkins

    def check_pass_budget(self, budget_seconds: float, where: str) -> None:
        """Refuse a pass that could never send a trigger: it must fit the margin plus one timeout."""
        timeout = self.jenkins.timeout_seconds if self.jenkins else 0.0
        if budget_seconds - self.time_margin_seconds < timeout:
            raise ConfigError(
                f"{where} ({budget_seconds:g} s) must be at least TIME_MARGIN_SECONDS ({self.time_margin_seconds:g}) "
                f"plus JENKINS_TIMEOUT_SECONDS ({timeout:g}): otherwise no trigger can ever be sent"
            )

    def require_webhook_secret(self) -> str:
        if not self.webhook_secret:
            raise ConfigError("the webhook secret is not configured: set WEBHOOK_SECRET or WEBHOOK_SECRET_ARN")
        return self.webhook_secret


# --------------------------------------------------------------------------- parsing helpers


def _int(env: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:  # also rejects NaN
        raise ConfigError(f"{name} must be at least {minimum:g}, got {raw}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _secret_json(fetch: SecretFetcher, name: str, arn: str) -> dict:
    try:
        raw = fetch(arn)
    except ConfigError as exc:
        raise ConfigError(f"{name} is set, but {exc}") from None
    except Exception as exc:  # boto / powertools errors carry no secret values
        raise ConfigError(f"cannot read the secret named by {name} ({arn}): {type(exc).__name__}: {exc}") from None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise ConfigError(f"the secret named by {name} ({arn}) must be a JSON object")
    return value


def _secret_text(fetch: SecretFetcher, name: str, arn: str, key: str) -> str:
    """A secret that is either plain text or a JSON object holding ``key``."""
    try:
        raw = fetch(arn)
    except ConfigError as exc:
        raise ConfigError(f"{name} is set, but {exc}") from None
    except Exception as exc:
        raise ConfigError(f"cannot read the secret named by {name} ({arn}): {type(exc).__name__}: {exc}") from None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = raw
    if isinstance(value, dict):
        value = value.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"the secret named by {name} ({arn}) is empty or has no {key!r} field")
    return value


def parse_database_url(url: str, name: str = "DATABASE_URL") -> DatabaseSettings:
    """``postgresql://user:pass@host:port/db?sslmode=verify-full&sslrootcert=/ca.pem`` (or ``?host=/socket/dir``)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{name} is not a valid URL (expected postgresql://user:pass@host:port/db)") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigError(f"{name} must start with postgresql:// (got scheme {parts.scheme!r})")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    socket_dir = query.get("host")
    host = parts.hostname or ("" if socket_dir else "127.0.0.1")
    dbname = unquote(parts.path.lstrip("/")) or "postgres"
    sslmode = query.get("sslmode", "disable" if (socket_dir or host in ("127.0.0.1", "localhost", "::1")) else "verify-full")
    if sslmode in ("disable", "allow", "prefer"):
        tls = "disable"
    elif sslmode in ("require", "verify-ca", "verify-full"):
        # We never do unverified TLS: "require" is upgraded to full verification.
        tls = "verify"
    else:
        raise ConfigError(f"{name} has an unknown sslmode {sslmode!r} (use disable or verify-full)")
    unix_socket = None
    if socket_dir:
        unix_socket = socket_dir if socket_dir.endswith(".s.PGSQL." + str(port or 5432)) else (
            os.path.join(socket_dir, f".s.PGSQL.{port or 5432}")
        )
    return DatabaseSettings(
        host=host or "localhost",
        port=port or 5432,
        user=unquote(parts.username) if parts.username else "postgres",
        password=unquote(parts.password) if parts.password else None,
        dbname=dbname,
        unix_socket=unix_socket,
        tls=tls,
        ca_bundle=query.get("sslrootcert"),
    )


def _database(env: Mapping[str, str], fetch: SecretFetcher | None) -> DatabaseSettings:
    timeouts = dict(
        statement_timeout_ms=_int(env, "DB_STATEMENT_TIMEOUT_MS", 15_000, 100),
        idle_in_transaction_timeout_ms=_int(env, "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", 30_000, 100),
        connect_timeout_seconds=_float(env, "DB_CONNECT_TIMEOUT_SECONDS", 5.0, 0.1),
    )
    url = env.get("DATABASE_URL", "").strip()
    arn = env.get("DB_SECRET_ARN", "").strip()
    iam = _bool(env, "DB_IAM_AUTH", False)
    ca_bundle = env.get("DB_CA_BUNDLE", "").strip() or None
    if url:
        db = parse_database_url(url)
        return replace(db, ca_bundle=ca_bundle or db.ca_bundle, **timeouts)
    if arn or iam:
        secret: dict = {}
        if arn:
            if fetch is None:
                raise ConfigError("DB_SECRET_ARN is set but no secrets source is available")
            secret = _secret_json(fetch, "DB_SECRET_ARN", arn)
        host = env.get("DB_HOST", "").strip() or secret.get("host")
        user = env.get("DB_USER", "").strip() or secret.get("username")
        if not host:
            raise ConfigError("no database host: set DB_HOST or put 'host' in the secret named by DB_SECRET_ARN")
        if not user:
            raise ConfigError("no database user: set DB_USER or put 'username' in the secret named by DB_SECRET_ARN")
        password = None if iam else secret.get("password")
        if not iam and not password:
            raise ConfigError("the secret named by DB_SECRET_ARN has no 'password' (or set DB_IAM_AUTH=true)")
        try:
            port = int(env.get("DB_PORT", "").strip() or secret.get("port") or 5432)
        except (TypeError, ValueError):
            raise ConfigError("DB_PORT (or the secret's 'port') must be a whole number") from None
        return DatabaseSettings(
            host=str(host),
            port=port,
            user=str(user),
            password=password,
            dbname=env.get("DB_NAME", "").strip() or secret.get("dbname") or "postgres",
            tls="verify",
            ca_bundle=ca_bundle,
            iam_auth=iam,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            secret_arn=arn or None,
            **timeouts,
        )
    raise ConfigError("no database configured: set DATABASE_URL (or DB_SECRET_ARN on AWS)")


def _jenkins(env: Mapping[str, str], fetch: SecretFetcher | None, timeout: float) -> JenkinsSettings | None:
    arn = env.get("JENKINS_SECRET_ARN", "").strip()
    secret: dict = {}
    if arn:
        if fetch is None:
            raise ConfigError("JENKINS_SECRET_ARN is set but no secrets source is available")
        secret = _secret_json(fetch, "JENKINS_SECRET_ARN", arn)
    url = env.get("JENKINS_URL", "").strip() or secret.get("url") or ""
    user = env.get("JENKINS_USER", "").strip() or secret.get("user") or ""
    token = env.get("JENKINS_API_TOKEN", "").strip() or secret.get("api_token") or ""
    if not (url or user or token):
        return None
    if not url:
        raise ConfigError("JENKINS_URL is not set (nor 'url' in the secret named by JENKINS_SECRET_ARN)")
    parts = urlsplit(url)
    if "@" in url:  # checked first, and the URL never echoed: it may hold a password or token
        raise ConfigError("JENKINS_URL must not carry credentials: use JENKINS_USER and JENKINS_API_TOKEN")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError("JENKINS_URL must be an http(s) URL such as https://ci.example.com/jenkins/")
    if not user:
        raise ConfigError("JENKINS_USER is not set (nor 'user' in the secret named by JENKINS_SECRET_ARN)")
    if not token:
        raise ConfigError("JENKINS_API_TOKEN is not set (nor 'api_token' in the secret named by JENKINS_SECRET_ARN)")
    return JenkinsSettings(
        url=url.rstrip("/") + "/",
        user=user,
        api_token=token,
        timeout_seconds=timeout,
        verify_tls=_bool(env, "JENKINS_VERIFY_TLS", True),
        search_window=_int(env, "JENKINS_SEARCH_WINDOW", 100, 1),
    )


def load_settings(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> Settings:
    """Read and validate every setting. Raises ConfigError naming the variable at fault."""
    env = os.environ if env is None else env
    if fetch_secret is None and any(env.get(k) for k in ("DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN")):
        from .secrets import fetch_secret_string

        fetch_secret = fetch_secret_string

    timeout = _float(env, "JENKINS_TIMEOUT_SECONDS", 10.0, 0.1)
    lease = _int(env, "LEASE_SECONDS", 300, 1)
    if lease < timeout + LEASE_SAFETY_SECONDS + CLAIM_ROOM_SECONDS:
        raise ConfigError(
            f"LEASE_SECONDS ({lease}) must be at least JENKINS_TIMEOUT_SECONDS ({timeout:g}) plus "
            f"{LEASE_SAFETY_SECONDS + CLAIM_ROOM_SECONDS:g} s: a claimed row's trigger must end within its "
            "lease, so a shorter lease would never send one"
        )
    max_in_flight = _int(env, "MAX_IN_FLIGHT", None, 1)

    webhook_secret = env.get("WEBHOOK_SECRET", "").strip() or None
    webhook_arn = env.get("WEBHOOK_SECRET_ARN", "").strip()
    if not webhook_secret and webhook_arn:
        webhook_secret = _secret_text(fetch_secret, "WEBHOOK_SECRET_ARN", webhook_arn, "token")

    return Settings(
        database=_database(env, fetch_secret),
        jenkins=_jenkins(env, fetch_secret, timeout),
        webhook_secret=webhook_secret,
        batch_size=_int(env, "BATCH_SIZE", 32, 1),
        max_parallel_triggers=_int(env, "MAX_PARALLEL_TRIGGERS", 8, 1),
        max_in_flight=max_in_flight,
        lease_seconds=lease,
        unstable_is_success=not _bool(env, "UNSTABLE_IS_FAILURE", False),
        retry_base_seconds=_float(env, "RETRY_BASE_SECONDS", 30.0, 0.0),
        retry_max_seconds=_float(env, "RETRY_MAX_SECONDS", 900.0, 0.0),
        time_margin_seconds=_float(env, "TIME_MARGIN_SECONDS", 10.0, 0.0),
        webhook_db_pool_size=_int(env, "WEBHOOK_DB_POOL_SIZE", 4, 1),
        dispatcher_mode=_choice(env, "DISPATCHER_MODE", "continuous", DISPATCHER_MODES),
        max_resends=_int(env, "MAX_RESENDS", 3, 0),
        resend_quiet_seconds=_float(env, "RESEND_QUIET_SECONDS", RESEND_QUIET_LEASES * lease, 0.0),
    )
