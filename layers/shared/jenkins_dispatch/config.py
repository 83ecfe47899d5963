"""Settings: read once from the environment (and Secrets Manager on AWS), validated, passed around typed.

Nothing else in the package reads or writes ``os.environ``: what Powertools needs before any Settings exist
(its service defaults, whether EMF lines and tracing are on) is asked of this module too
(``set_powertools_defaults``, ``emf_wanted``, ``tracing_wanted``). Every error names the variable at fault and
never echoes a secret's value.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from .errors import ConfigError, ControllerNotConfigured

SecretFetcher = Callable[[str], str]
"""Given a secret's ARN, return its SecretString."""

# Room kept between the end of our last request and the end of a claim's lease (clocks, statement
# latency), and room for the claim itself and the job checks before the first trigger: a lease must
# hold one whole trigger wave (JENKINS_TIMEOUT_SECONDS) plus both, or no trigger is ever sent.
LEASE_SAFETY_SECONDS = 0.5
CLAIM_ROOM_SECONDS = 0.5
RESEND_QUIET_LEASES = 3
# `jenkins-dispatch serve` (its options, not variables): a pass at least this often, and where it listens.
SERVE_INTERVAL_SECONDS = 10.0
SERVE_HOST = "127.0.0.1"
SERVE_PORT = 8080
# `jenkins-dispatch ui` (its options): the web page's port and how often its pages reload themselves.
UI_PORT = 8081
UI_REFRESH_SECONDS = 10
DISPATCHER_MODES = ("continuous", "single")
# Several Jenkins controllers (docs/controllers.md): JENKINS_URL & co. are the one named DEFAULT_CONTROLLER.
DEFAULT_CONTROLLER = "default"
CONTROLLER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
CONTROLLER_KEYS = ("url", "user", "api_token", "max_in_flight", "webhook_secret")
CONTROLLER_MAX_IN_FLIGHT = (1, 10_000_000)  # a controller's own cap, as MAX_IN_FLIGHT's range


@dataclass(frozen=True)
class Variable:
    """One environment variable: what an unset (or empty) one means, and what it is for."""

    name: str
    meaning: str
    default: int | float | bool | str | None = None  # None: not set unless given
    default_text: str | None = None  # shown instead of ``default`` when that is derived or absent
    # A numeric variable's range, both ends accepted: anything else (inf and NaN included) is refused at start,
    # before it can reach a statement ("interval out of range") or a thread pool.
    minimum: float | None = None
    maximum: float | None = None

    def shown_default(self) -> str:
        """The default as the help shows it ('true', '0.5', or its own text)."""
        if self.default_text is not None:
            return self.default_text
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return "-" if self.default is None else str(self.default)


# Every variable this module reads, with its default: `load_settings` takes defaults from here and
# `jenkins-dispatch --help` prints this table, so the two cannot disagree. Reading a variable missing
# from the table is a KeyError.
ENVIRONMENT: tuple[Variable, ...] = (
    Variable("DATABASE_URL", "postgresql://user:pass@host:port/db[?sslmode=verify-full], or mysql://… / "
             "mariadb://…[?ssl-mode=VERIFY_IDENTITY] for MySQL 8 / MariaDB 10.6+ (local runs, tests)"),
    Variable("DB_SECRET_ARN", "on AWS: Secrets Manager secret (JSON: engine, host, port, username, password, dbname)"),
    Variable("DB_ENGINE", "with DB_SECRET_ARN or DB_IAM_AUTH: postgresql or mysql (MariaDB too)",
             default_text="the secret's engine, else postgresql"),
    Variable("DB_HOST", "with DB_SECRET_ARN or DB_IAM_AUTH: database host (else the secret's)"),
    Variable("DB_PORT", "with DB_SECRET_ARN or DB_IAM_AUTH: database port (else the secret's)", 5432,
             default_text="5432; mysql: 3306", minimum=1, maximum=65535),
    Variable("DB_USER", "with DB_SECRET_ARN or DB_IAM_AUTH: database user (else the secret's)"),
    Variable("DB_NAME", "with DB_SECRET_ARN or DB_IAM_AUTH: database name (else the secret's)", "postgres",
             default_text="postgres; mysql: required"),
    Variable("DB_IAM_AUTH", "authenticate to RDS with an IAM token instead of a password", False),
    Variable("DB_CA_BUNDLE", "CA bundle (PEM) trusted besides the system roots for the database's TLS",
             default_text="RDS CA bundle"),
    Variable("DB_CONNECT_TIMEOUT_SECONDS", "give up connecting to the database after this long", 5.0,
             minimum=0.1, maximum=300),
    Variable("DB_STATEMENT_TIMEOUT_MS", "longest a statement may run", 15_000, minimum=100, maximum=86_400_000),
    Variable("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "longest a session may sit idle inside a transaction", 30_000,
             minimum=100, maximum=86_400_000),
    Variable("DB_STALL_SECONDS", "`serve`'s /healthz reports the database unavailable once a statement has waited "
             "this long for its answer (above the 5 s lock timeout, so a lock wait is not an outage)", 10.0,
             minimum=1, maximum=3600),
    Variable("AWS_REGION", "region for the RDS IAM token", default_text="AWS_DEFAULT_REGION"),
    Variable("AWS_DEFAULT_REGION", "region for the RDS IAM token when AWS_REGION is unset"),
    Variable("JENKINS_URL", "Jenkins base URL, with or without a context path (https://ci.example.com/jenkins/)"),
    Variable("JENKINS_USER", "Jenkins user"),
    Variable("JENKINS_API_TOKEN", "that user's API token"),
    Variable("JENKINS_SECRET_ARN", "on AWS: secret JSON with url, user, api_token"),
    Variable("JENKINS_CONTROLLERS", "more Jenkins controllers, JSON: {\"NAME\": {\"url\": …, \"user\": …, "
             "\"api_token\": …, \"max_in_flight\": N, \"webhook_secret\": …}}; names lower-case [a-z0-9][a-z0-9_-]*; "
             "JENKINS_URL & co. are the one named `default` (docs/controllers.md)"),
    Variable("JENKINS_CONTROLLERS_SECRET_ARN", "on AWS: secret holding JENKINS_CONTROLLERS' JSON"),
    Variable("JENKINS_TIMEOUT_SECONDS", "HTTP timeout towards Jenkins (must be shorter than LEASE_SECONDS)", 10.0,
             minimum=0.1, maximum=3600),
    Variable("JENKINS_VERIFY_TLS", "verify Jenkins's TLS certificate", True),
    Variable("JENKINS_SEARCH_WINDOW", "recent builds searched for a dispatch id", 100, minimum=1, maximum=5000),
    Variable("JENKINS_BREAKER_FAILURES", "failed triggers in a row, about this many different jobs, that mark Jenkins "
             "as down (a 503 while it restarts, a refused connection, rejected credentials or a failed probe of "
             "Jenkins itself do at once)", 3, minimum=1, maximum=1000),
    Variable("JENKINS_RETRY_BASE_SECONDS", "first wait before trying a Jenkins that is down (doubles each time)", 1.0,
             minimum=0.1, maximum=3600),
    Variable("JENKINS_RETRY_MAX_SECONDS", "longest wait before trying a Jenkins that is down again", 15.0,
             minimum=0.1, maximum=3600),
    Variable("WEBHOOK_SECRET", "shared secret the webhook requires from Jenkins"),
    Variable("WEBHOOK_SECRET_ARN", "on AWS: secret holding it (plain text or JSON with 'token')"),
    Variable("UI_TOKEN", "token the web page (`ui`) asks for at its login form; required off loopback"),
    Variable("UI_TOKEN_SECRET_ARN", "on AWS: secret holding it (plain text or JSON with 'token')"),
    Variable("UI_TRUSTED_USER_HEADER", "header a login proxy names the operator in (e.g. X-Forwarded-User); the web "
             "page records that name with every action, honoured only from UI_TRUSTED_PROXIES"),
    Variable("UI_TRUSTED_PROXIES", "comma-separated addresses or CIDRs of the login proxies whose "
             "UI_TRUSTED_USER_HEADER is believed (e.g. 127.0.0.1/32,10.0.0.0/24)"),
    Variable("BATCH_SIZE", "jobs claimed per statement", 32, minimum=1, maximum=10_000),
    Variable("MAX_PARALLEL_TRIGGERS", "trigger requests sent at once", 8, minimum=1, maximum=512),
    Variable("MAX_IN_FLIGHT", "cap on jobs processing, overall", default_text="no cap", minimum=1,
             maximum=10_000_000),
    Variable("LEASE_SECONDS", "how long a claimed job waits before the reconciler looks at it", 300, minimum=2,
             maximum=604_800),
    Variable("UNSTABLE_IS_FAILURE", "settle UNSTABLE builds as failed instead of completed", False),
    Variable("RETRY_BASE_SECONDS", "first backoff after a transient trigger error (doubles each time)", 30.0,
             minimum=0, maximum=604_800),
    Variable("RETRY_MAX_SECONDS", "longest backoff", 900.0, minimum=0, maximum=604_800),
    Variable("TIME_MARGIN_SECONDS", "a Lambda pass stops claiming this long before its time is up", 10.0,
             minimum=0, maximum=900),
    Variable("WEBHOOK_DB_POOL_SIZE", "database sessions the webhook may hold under `serve`", 4, minimum=1,
             maximum=1000),
    Variable("POLL_SECONDS", "MySQL/MariaDB (no LISTEN/NOTIFY): how often an idle dispatcher reads the queue's "
             "fingerprint, one cheap statement, to see new work (an INSERT waits about half this for it)", 0.1,
             minimum=0.01, maximum=60),
    Variable("HTTP_IDLE_TIMEOUT_SECONDS", "`serve` and `ui` close a connection that sends nothing for this long, "
             "or takes longer to send one request (closed within this + 6 s)", 20, minimum=1, maximum=3600),
    Variable("DISPATCHER_MODE", "Lambda dispatcher: continuous (until its time is nearly up) or single (one pass)",
             "continuous"),
    Variable("MAX_RESENDS", "times a dispatch Jenkins shows no trace of is sent again", 3, minimum=0, maximum=100),
    Variable("RESEND_QUIET_SECONDS", "quiet period asked of Jenkins for such a re-send",
             default_text=f"{RESEND_QUIET_LEASES} x LEASE_SECONDS", minimum=0, maximum=2_592_000),
    Variable("CUTOVER_WINDOW_SECONDS", "`migrate` of a table the old worker still runs: how long its results for "
             "the jobs it holds then still count (docs/cutover.md)", 3600.0, minimum=0, maximum=2_592_000),
    Variable("METRICS_EMF", "print metrics as CloudWatch EMF lines on stdout", default_text="true in Lambda only"),
    Variable("AWS_LAMBDA_FUNCTION_NAME", "set by Lambda: metrics default to EMF there"),
    Variable("LOG_FORMAT", "log lines as `json` (one object a line) or `text` (for a person); `auto`: text when "
             "the log's stream is a terminal, else JSON", "auto"),
)
VARIABLES = {variable.name: variable for variable in ENVIRONMENT}


def default_of(name: str) -> Any:
    """The default ``name`` has in ``ENVIRONMENT``."""
    return VARIABLES[name].default


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


@dataclass(frozen=True)
class JenkinsSettings:
    """Where and how to reach Jenkins: URL, user, API token (never shown), timeout, TLS, search window."""
    url: str
    user: str
    api_token: str = field(repr=False)
    timeout_seconds: float = default_of("JENKINS_TIMEOUT_SECONDS")
    verify_tls: bool = default_of("JENKINS_VERIFY_TLS")
    search_window: int = default_of("JENKINS_SEARCH_WINDOW")
    # Which controller this is (rows name it in their `controller` column) and its own cap on jobs in flight
    # (beside MAX_IN_FLIGHT; None: none).
    name: str = DEFAULT_CONTROLLER
    max_in_flight: int | None = None
    # The secret the webhook requires, instead of WEBHOOK_SECRET, of a notification whose build is this
    # controller's (None: the shared one). Never shown.
    webhook_secret: str | None = field(default=None, repr=False)


def resend_quiet_for(lease_seconds: float) -> float:
    """RESEND_QUIET_SECONDS unless set: RESEND_QUIET_LEASES leases, so that an original trigger Jenkins acts on
    late lands while the re-send still waits in its queue."""
    return float(RESEND_QUIET_LEASES * lease_seconds)


_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")


@dataclass(frozen=True)
class UiIdentity:
    """Who pulls the web page's levers, as a login proxy tells: the header naming the operator and the proxies
    believed (an empty ``header``: nobody is named, every action is recorded as ``ui``)."""

    header: str | None = None  # lower-case, as the page's request headers are keyed
    proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


def load_ui_identity(env: Mapping[str, str] | None = None) -> UiIdentity:
    """UI_TRUSTED_USER_HEADER and UI_TRUSTED_PROXIES, both or neither; ConfigError with one line per problem."""
    env = os.environ if env is None else env
    header = _text(env, "UI_TRUSTED_USER_HEADER") or None
    proxies_text = _text(env, "UI_TRUSTED_PROXIES") or ""
    problems: list[str] = []
    if header is not None and not _HEADER_NAME.fullmatch(header):
        problems.append(f"UI_TRUSTED_USER_HEADER must be an HTTP header name (e.g. X-Forwarded-User), got {header!r}")
    proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for part in (p.strip() for p in proxies_text.split(",")):
        if not part:
            continue
        try:
            proxies.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            problems.append(f"UI_TRUSTED_PROXIES: {part!r} is not an address or CIDR (e.g. 10.0.0.0/24)")
    if header is not None and not proxies and not problems:
        problems.append("UI_TRUSTED_PROXIES is required with UI_TRUSTED_USER_HEADER: the addresses of the login "
                        "proxies whose header is believed (a header from anyone else is ignored)")
    if proxies and header is None:
        problems.append("UI_TRUSTED_USER_HEADER is required with UI_TRUSTED_PROXIES: the header the proxies name "
                        "the operator in")
    if problems:
        raise ConfigError("\n".join(problems))
    return UiIdentity(header.lower() if header else None, tuple(proxies))


@dataclass(frozen=True)
class Settings:
    """Every setting of the package, read once by ``load_settings`` and passed around."""
    database: DatabaseSettings
    jenkins: JenkinsSettings | None = None  # the `default` controller (JENKINS_URL & co.), None if not set
    # Every controller, `default` included when configured, in a stable order (default first, then by name).
    # Empty in a Settings built by hand: then ``jenkins`` alone (see ``controllers_by_name``).
    controllers: tuple[JenkinsSettings, ...] = ()
    webhook_secret: str | None = field(default=None, repr=False)
    # The web page's login token (`jenkins-dispatch ui`); never rendered or logged.
    ui_token: str | None = field(default=None, repr=False)
    ui_identity: UiIdentity = field(default_factory=lambda: UiIdentity())
    batch_size: int = default_of("BATCH_SIZE")
    max_parallel_triggers: int = default_of("MAX_PARALLEL_TRIGGERS")
    max_in_flight: int | None = None
    lease_seconds: int = default_of("LEASE_SECONDS")
    # The one inversion of a setting: the variable names the exception (UNSTABLE_IS_FAILURE, off by default),
    # the code asks the question it settles a build with (is UNSTABLE a success?) from here on, end to end.
    unstable_is_success: bool = not default_of("UNSTABLE_IS_FAILURE")
    retry_base_seconds: float = default_of("RETRY_BASE_SECONDS")
    retry_max_seconds: float = default_of("RETRY_MAX_SECONDS")
    time_margin_seconds: float = default_of("TIME_MARGIN_SECONDS")
    # Sessions the webhook may hold under `serve` (Lambda: one per container, whatever this says).
    webhook_db_pool_size: int = default_of("WEBHOOK_DB_POOL_SIZE")
    # `serve` and `ui`: idle connections and slow clients are closed after this long (http_service).
    http_idle_timeout_seconds: int = default_of("HTTP_IDLE_TIMEOUT_SECONDS")
    # Lambda dispatcher: "continuous" keeps dispatching (woken by new work) until the invocation's time
    # is nearly up; "single" runs one pass and returns.
    dispatcher_mode: str = default_of("DISPATCHER_MODE")
    # A dispatch Jenkins showed no trace of is sent again at most this many times (no attempt spent)...
    max_resends: int = default_of("MAX_RESENDS")
    # ...held this long in Jenkins's queue (a quiet period), so that an original Jenkins acts on late
    # merges with it instead of building twice. Default: RESEND_QUIET_LEASES leases of the default length (a
    # Settings built by hand with another lease says its own; load_settings derives it from LEASE_SECONDS).
    resend_quiet_seconds: float = resend_quiet_for(default_of("LEASE_SECONDS"))
    # When Jenkins counts as down (dispatching/breaker.py): JENKINS_BREAKER_FAILURES suspect failures in a row
    # about that many different jobs; while down it is tried again after a backoff doubling from
    # JENKINS_RETRY_BASE_SECONDS up to JENKINS_RETRY_MAX_SECONDS (one success starts it again from the base).
    jenkins_breaker_failures: int = default_of("JENKINS_BREAKER_FAILURES")
    jenkins_retry_base_seconds: float = default_of("JENKINS_RETRY_BASE_SECONDS")
    jenkins_retry_max_seconds: float = default_of("JENKINS_RETRY_MAX_SECONDS")
    # `serve`'s /healthz: a statement outstanding this long means the database stopped answering.
    db_stall_seconds: float = default_of("DB_STALL_SECONDS")
    # MySQL/MariaDB: an idle dispatcher's fingerprint read, this often (dispatching/wakeup.PollingSignal).
    poll_seconds: float = default_of("POLL_SECONDS")
    # `migrate` of a seed table: how long the old worker's results for the jobs it holds still count.
    cutover_window_seconds: float = default_of("CUTOVER_WINDOW_SECONDS")
    # Print CloudWatch EMF metric lines (METRICS_EMF; default: only inside Lambda, where CloudWatch reads
    # them). Outside Lambda `serve` exposes Prometheus metrics at GET /metrics instead.
    metrics_emf: bool = False

    def require_jenkins(self) -> JenkinsSettings:
        """The Jenkins of one controller's lane (``for_controller``; with one controller configured, that one), or
        ConfigError naming the variables to set. Only the dispatcher's lanes ask this: a row's controller is
        ``jenkins/controllers.py``'s to resolve (tests/unit/test_layout.py holds everyone else to it)."""
        found = self.jenkins or next(iter(self.controllers), None)
        if found is None:
            raise self._no_jenkins()
        return found

    def require_controllers(self) -> dict[str, JenkinsSettings]:
        """Every configured controller by name, or ConfigError naming the variables to set when there is none."""
        found = self.controllers_by_name()
        if not found:
            raise self._no_jenkins()
        return found

    @staticmethod
    def _no_jenkins() -> ConfigError:
        return ConfigError("Jenkins is not configured: set JENKINS_URL, JENKINS_USER and JENKINS_API_TOKEN "
                           "(or JENKINS_SECRET_ARN, or JENKINS_CONTROLLERS)")

    def controller(self, name: str) -> JenkinsSettings:
        """Controller ``name``'s settings (URL, credentials, its own cap), or ControllerNotConfigured. The one way
        from a name a row or a command gives to that controller's Jenkins (``jenkins/controllers.py``)."""
        found = self.controllers_by_name().get(name)
        if found is None:
            raise ControllerNotConfigured(name, list(self.controllers_by_name()))
        return found

    def controllers_by_name(self) -> dict[str, JenkinsSettings]:
        """Every configured controller by name (the default one alone when JENKINS_CONTROLLERS is unset)."""
        if self.controllers:
            return {c.name: c for c in self.controllers}
        return {} if self.jenkins is None else {self.jenkins.name: self.jenkins}

    def for_controller(self, name: str) -> Settings:
        """These settings with ``jenkins`` set to controller ``name``'s: what one controller's pass, client and
        breaker are built from."""
        return replace(self, jenkins=self.controller(name))

    def check_pass_budget(self, budget_seconds: float, where: str) -> None:
        """Refuse a pass that could never send a trigger: it must fit the margin plus one timeout."""
        timeout = self.jenkins.timeout_seconds if self.jenkins else 0.0
        if budget_seconds - self.time_margin_seconds < timeout:
            raise ConfigError(
                f"{where} ({budget_seconds:g} s) must be at least TIME_MARGIN_SECONDS ({self.time_margin_seconds:g}) "
                f"plus JENKINS_TIMEOUT_SECONDS ({timeout:g}): otherwise no trigger can ever be sent"
            )

    def webhook_secrets(self) -> list[str]:
        """Every secret a notification may carry: the shared one and each controller's own (which one a
        notification needs depends on its build's controller, known once its body is read)."""
        own = [c.webhook_secret for c in self.controllers_by_name().values() if c.webhook_secret]
        return [s for s in (self.webhook_secret, *own) if s]

    def require_webhook_secret(self) -> str:
        """The webhook's shared secret, or ConfigError naming the variables to set."""
        if not self.webhook_secret:
            raise ConfigError("the webhook secret is not configured: set WEBHOOK_SECRET or WEBHOOK_SECRET_ARN")
        return self.webhook_secret


# --------------------------------------------------------------------------- parsing helpers


_FROM_TABLE = object()  # a reader's default: the variable's own, from ENVIRONMENT


def _text(env: Mapping[str, str], name: str) -> str:
    """The variable's value without surrounding blanks ('' when unset). Only listed variables may be read."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not listed in config.ENVIRONMENT")
    return (env.get(name) or "").strip()


def _range(name: str) -> tuple[float, float]:
    """A numeric variable's range; a variable read as a number must have one (else a KeyError, as ``_text``)."""
    variable = VARIABLES[name]
    if variable.minimum is None or variable.maximum is None:
        raise KeyError(f"{name} has no minimum and maximum in config.ENVIRONMENT")
    return variable.minimum, variable.maximum


def _range_error(name: str, raw: str, whole: bool) -> ConfigError:
    low, high = _range(name)
    kind = "a whole number" if whole else "a number"
    return ConfigError(f"{name} must be {kind} from {low:g} to {high:g}, got {raw!r}")


def _int(env: Mapping[str, str], name: str) -> int:
    """A whole number within the variable's range (``ENVIRONMENT``); unset or empty: its default."""
    value = _optional_int(env, name)
    return default_of(name) if value is None else value


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    """A whole number within the variable's range (``ENVIRONMENT``); unset or empty: None."""
    low, high = _range(name)
    raw = _text(env, name)
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise _range_error(name, raw, whole=True) from None
    if not low <= value <= high:
        raise _range_error(name, raw, whole=True)
    return value


def _float(env: Mapping[str, str], name: str, *, default: Any = _FROM_TABLE) -> float:
    """A finite number within the variable's range (``ENVIRONMENT``); unset or empty: ``default``."""
    low, high = _range(name)
    raw = _text(env, name)
    if raw == "":
        return default_of(name) if default is _FROM_TABLE else default
    try:
        value = float(raw)
    except ValueError:
        raise _range_error(name, raw, whole=False) from None
    if not low <= value <= high:  # also refuses NaN and both infinities
        raise _range_error(name, raw, whole=False)
    return value


def _base_and_maximum(base_name: str, base: float, maximum_name: str, maximum: float) -> None:
    """A backoff's first wait may not exceed its longest (the doubling would never start)."""
    if base > maximum:
        raise ConfigError(f"{base_name} ({base:g}) must not exceed {maximum_name} ({maximum:g})")


def _bool(env: Mapping[str, str], name: str) -> bool:
    raw = _text(env, name).lower()
    if raw == "":
        return default_of(name)
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    raw = _text(env, name).lower()
    if raw == "":
        return default_of(name)
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
    if mode in ("disabled", "disable", "preferred", "prefer", "allow"):
        tls = "disable"
    elif mode in ("required", "require", "verify_ca", "verify_identity", "verify_full"):
        tls = "verify"  # never unverified TLS: REQUIRED is upgraded to full verification, as for PostgreSQL
    else:
        raise ConfigError(f"{name} has an unknown ssl-mode {mode!r} (use DISABLED or VERIFY_IDENTITY)")
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
        secret: dict = {}
        if arn:
            if fetch is None:
                raise ConfigError("DB_SECRET_ARN is set but no secrets source is available")
            secret = _secret_json(fetch, "DB_SECRET_ARN", arn)
        host = _text(env, "DB_HOST") or secret.get("host")
        user = _text(env, "DB_USER") or secret.get("username")
        if not host:
            raise ConfigError("no database host: set DB_HOST or put 'host' in the secret named by DB_SECRET_ARN")
        if not user:
            raise ConfigError("no database user: set DB_USER or put 'username' in the secret named by DB_SECRET_ARN")
        password = None if iam else secret.get("password")
        if not iam and not password:
            raise ConfigError("the secret named by DB_SECRET_ARN has no 'password' (or set DB_IAM_AUTH=true)")
        named = engine_of(_text(env, "DB_ENGINE"), "DB_ENGINE") if _text(env, "DB_ENGINE") else None
        stored = (engine_of(str(secret["engine"]), "the secret named by DB_SECRET_ARN ('engine')")
                  if secret.get("engine") else None)
        if named and stored and named != stored:
            # The template always sets DB_ENGINE: a MySQL secret under the default would otherwise be spoken to
            # in PostgreSQL's protocol and fail with a driver's error.
            raise ConfigError(f"DB_ENGINE is {named} but the secret named by DB_SECRET_ARN says engine "
                              f"{secret['engine']!r}: make them agree (the template's DatabaseEngine parameter)")
        engine = named or stored or "postgresql"
        dbname = _text(env, "DB_NAME") or secret.get("dbname") or (
            default_of("DB_NAME") if engine == "postgresql" else None)
        if not dbname:  # MySQL has no default database to fall back on
            raise ConfigError("no database name: set DB_NAME or put 'dbname' in the secret named by DB_SECRET_ARN")
        port = _optional_int(env, "DB_PORT")
        if port is None:
            try:
                port = int(secret.get("port") or DEFAULT_PORTS[engine])
            except (TypeError, ValueError):
                port = 0
            if not 1 <= port <= 65535:
                raise ConfigError("the secret named by DB_SECRET_ARN has a 'port' that is not a whole number from "
                                  "1 to 65535 (or set DB_PORT)")
        return DatabaseSettings(
            engine=engine,
            host=str(host),
            port=port,
            user=str(user),
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


def _jenkins(env: Mapping[str, str], fetch: SecretFetcher | None, timeout: float) -> JenkinsSettings | None:
    arn = _text(env, "JENKINS_SECRET_ARN")
    secret: dict = {}
    if arn:
        if fetch is None:
            raise ConfigError("JENKINS_SECRET_ARN is set but no secrets source is available")
        secret = _secret_json(fetch, "JENKINS_SECRET_ARN", arn)
    url = _text(env, "JENKINS_URL") or secret.get("url") or ""
    user = _text(env, "JENKINS_USER") or secret.get("user") or ""
    token = _text(env, "JENKINS_API_TOKEN") or secret.get("api_token") or ""
    if not (url or user or token):
        return None
    if not url:
        raise ConfigError("JENKINS_URL is not set (nor 'url' in the secret named by JENKINS_SECRET_ARN)")
    if "@" in url:  # checked first, and the URL never echoed: it may hold a password or token
        raise ConfigError("JENKINS_URL must not carry credentials: use JENKINS_USER and JENKINS_API_TOKEN")
    if problem := _url_problem(url, "JENKINS_URL"):
        raise ConfigError(problem)
    if not user:
        raise ConfigError("JENKINS_USER is not set (nor 'user' in the secret named by JENKINS_SECRET_ARN)")
    if not token:
        raise ConfigError("JENKINS_API_TOKEN is not set (nor 'api_token' in the secret named by JENKINS_SECRET_ARN)")
    return JenkinsSettings(
        url=url.rstrip("/") + "/",
        user=user,
        api_token=token,
        timeout_seconds=timeout,
        verify_tls=_bool(env, "JENKINS_VERIFY_TLS"),
        search_window=_int(env, "JENKINS_SEARCH_WINDOW"),
    )


def _url_problem(url: str, name: str) -> str | None:
    """Why ``url`` cannot be a Jenkins base URL (None: it can); ``name`` says where it was given. Never echoes it."""
    if "@" in url:  # checked first, and the URL never echoed: it may hold a password or token
        return f"{name} must not carry credentials: give the user and API token apart"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        well_formed = bool(parts.hostname)
    except ValueError:  # an unclosed "[", a port that is not a number or out of range
        well_formed = False
    if not well_formed or parts.scheme not in ("http", "https"):
        return f"{name} must be an http(s) URL such as https://ci.example.com/jenkins/"
    return None


def same_jenkins_key(url: str) -> str:
    """A Jenkins base URL as two spellings of the same one compare (scheme and host ignore case, one slash)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/"
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{path}"


def _controller(name: str, entry: object, timeout: float, env: Mapping[str, str],
                problems: list[str]) -> JenkinsSettings | None:
    """One entry of JENKINS_CONTROLLERS, or None with its problems appended (one line each)."""
    where = f"JENKINS_CONTROLLERS[{name!r}]"
    if not CONTROLLER_NAME.match(name):
        problems.append(f"JENKINS_CONTROLLERS: bad controller name {name!r}: use lower-case letters, digits, '_' "
                        "and '-', starting with a letter or digit (at most 64 characters)")
        return None
    if not isinstance(entry, dict):
        problems.append(f"{where} must be a JSON object with url, user and api_token")
        return None
    before = len(problems)
    unknown = sorted(set(entry) - set(CONTROLLER_KEYS))
    if unknown:
        problems.append(f"{where} has unknown keys {unknown}: use {', '.join(CONTROLLER_KEYS)}")
    texts: dict[str, str] = {}
    for key in ("url", "user", "api_token"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"{where}: {key} must be a string")
            value = None
        texts[key] = (value or "").strip()
    for key in ("url", "user", "api_token"):
        if not texts[key]:
            problems.append(f"{where} has no {key}")
    if texts["url"] and (problem := _url_problem(texts["url"], f"{where}'s url")):
        problems.append(problem)
    cap = entry.get("max_in_flight")
    low, high = CONTROLLER_MAX_IN_FLIGHT
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not low <= cap <= high):
        problems.append(f"{where}: max_in_flight must be a whole number from {low} to {high}")
    hook = entry.get("webhook_secret")
    if "webhook_secret" in entry and (not isinstance(hook, str) or not hook.strip()):
        problems.append(f"{where}: webhook_secret must be a non-empty string (or left out: WEBHOOK_SECRET then)")
    if len(problems) > before:
        return None
    return JenkinsSettings(
        url=texts["url"].rstrip("/") + "/", user=texts["user"], api_token=texts["api_token"],
        timeout_seconds=timeout, verify_tls=_bool(env, "JENKINS_VERIFY_TLS"),
        search_window=_int(env, "JENKINS_SEARCH_WINDOW"), name=name, max_in_flight=cap,
        webhook_secret=hook.strip() if isinstance(hook, str) else None,
    )


def _check_webhook_secrets(controllers: tuple[JenkinsSettings, ...], shared: str | None) -> None:
    """Each controller's own webhook secret differs from the shared one and from the others': a secret two of
    them accept would let either's Jenkins speak for the other, which is what a secret of its own prevents."""
    problems = []
    seen: dict[str, str] = {}
    for c in controllers:
        if not c.webhook_secret:
            continue
        if shared and hmac.compare_digest(c.webhook_secret.encode(), shared.encode()):
            problems.append(f"JENKINS_CONTROLLERS[{c.name!r}]: webhook_secret must differ from WEBHOOK_SECRET "
                            "(leave it out to use the shared one)")
        if c.webhook_secret in seen:
            problems.append(f"JENKINS_CONTROLLERS: controllers {seen[c.webhook_secret]!r} and {c.name!r} have the "
                            "same webhook_secret: give each its own")
        seen.setdefault(c.webhook_secret, c.name)
    if problems:
        raise ConfigError("\n".join(problems))


def _controllers(env: Mapping[str, str], fetch: SecretFetcher | None, timeout: float,
                 default: JenkinsSettings | None) -> tuple[JenkinsSettings, ...]:
    """Every controller: ``default`` (JENKINS_URL & co.) and JENKINS_CONTROLLERS' (or its secret's). Every problem
    is found before any is reported: ConfigError holds one line per problem, each naming the variable."""
    raw = _text(env, "JENKINS_CONTROLLERS")
    given = "JENKINS_CONTROLLERS"
    if not raw and (arn := _text(env, "JENKINS_CONTROLLERS_SECRET_ARN")):
        if fetch is None:
            raise ConfigError("JENKINS_CONTROLLERS_SECRET_ARN is set but no secrets source is available")
        raw = json.dumps(_secret_json(fetch, "JENKINS_CONTROLLERS_SECRET_ARN", arn))
        given = "the secret named by JENKINS_CONTROLLERS_SECRET_ARN"
    if not raw:
        return () if default is None else (default,)
    try:
        entries = json.loads(raw)
    except ValueError:
        raise ConfigError(f"{given} must be JSON: {{\"NAME\": {{\"url\": ..., \"user\": ..., "
                          "\"api_token\": ...}}") from None
    if not isinstance(entries, dict) or not entries:
        raise ConfigError(f"{given} must be a non-empty JSON object: {{\"NAME\": {{\"url\": ..., \"user\": ..., "
                          "\"api_token\": ...}}")
    problems: list[str] = []
    found: list[JenkinsSettings] = [] if default is None else [default]
    for name, entry in entries.items():
        if name == DEFAULT_CONTROLLER and default is not None:
            problems.append("JENKINS_CONTROLLERS defines 'default', which JENKINS_URL (or JENKINS_SECRET_ARN) "
                            "already is: define it in one place")
            continue
        controller = _controller(name, entry, timeout, env, problems)
        if controller is not None:
            found.append(controller)
    seen: dict[str, str] = {}
    for controller in found:
        key = same_jenkins_key(controller.url)
        if key in seen:
            problems.append(f"JENKINS_CONTROLLERS: controllers {seen[key]!r} and {controller.name!r} have the same "
                            "url: each Jenkins is one controller")
        seen.setdefault(key, controller.name)
    if problems:
        raise ConfigError("\n".join(problems))
    return tuple(sorted(found, key=lambda c: (c.name != DEFAULT_CONTROLLER, c.name)))


def emf_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether metrics go out as CloudWatch EMF lines on stdout: METRICS_EMF when set, else only in Lambda
    (AWS_LAMBDA_FUNCTION_NAME set), where CloudWatch Logs turns them into metrics. Elsewhere they would
    only crowd the log. ``env``: ``os.environ`` unless given."""
    env = os.environ if env is None else env
    if _text(env, "METRICS_EMF") == "":
        return bool(_text(env, "AWS_LAMBDA_FUNCTION_NAME"))
    return _bool(env, "METRICS_EMF")


def log_format_wanted(is_terminal: bool, env: Mapping[str, str] | None = None) -> str:
    """"json" or "text": LOG_FORMAT when it says which, else text only on a terminal (``is_terminal``: the log's
    stream is one). Read before any Settings exist (the logger is built at import), so an unknown value cannot
    stop the command: it counts as ``auto``, which keeps machines' logs JSON."""
    env = os.environ if env is None else env
    wanted = _text(env, "LOG_FORMAT").lower()
    if wanted in ("json", "text"):
        return wanted
    return "text" if is_terminal else "json"


def tracing_wanted() -> bool:
    """Whether X-Ray tracing is on: Powertools' own POWERTOOLS_TRACE_DISABLED (set_powertools_defaults turns it
    off outside Lambda unless set)."""
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() not in ("true", "1")


def set_powertools_defaults(service: str, namespace: str) -> None:
    """Powertools reads its settings from the environment when its objects are built: give local runs sane
    values (service name, metrics namespace, no tracing outside Lambda) without overriding Lambda's."""
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", service)
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", namespace)
    if "AWS_LAMBDA_FUNCTION_NAME" not in os.environ:
        os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")


def _sources(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None) -> tuple[Mapping[str, str], SecretFetcher | None]:
    """The environment to read (``os.environ`` by default) and, when a ``*_SECRET_ARN`` is set, Secrets Manager."""
    env = os.environ if env is None else env
    if fetch_secret is None and any(_text(env, k) for k in ("DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN",
                                                                 "UI_TOKEN_SECRET_ARN", "JENKINS_CONTROLLERS_SECRET_ARN")):
        from .secrets import fetch_secret_string

        fetch_secret = fetch_secret_string
    return env, fetch_secret


def load_database_settings(env: Mapping[str, str] | None = None,
                           fetch_secret: SecretFetcher | None = None) -> DatabaseSettings:
    """The database part of the settings alone (DATABASE_URL or DB_SECRET_ARN, DB_* timeouts)."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _database(env, fetch_secret)


def load_jenkins_settings(env: Mapping[str, str] | None = None,
                          fetch_secret: SecretFetcher | None = None) -> JenkinsSettings | None:
    """The Jenkins part of the settings alone; None when no JENKINS_* variable (nor JENKINS_SECRET_ARN) is set."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _jenkins(env, fetch_secret, _float(env, "JENKINS_TIMEOUT_SECONDS"))


def load_controllers(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None,
                     default: JenkinsSettings | None = None) -> tuple[JenkinsSettings, ...]:
    """Every Jenkins controller: ``default`` (JENKINS_URL & co., as ``load_jenkins_settings`` read it) and those
    of JENKINS_CONTROLLERS (or JENKINS_CONTROLLERS_SECRET_ARN), validated together."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _controllers(env, fetch_secret, _float(env, "JENKINS_TIMEOUT_SECONDS"), default)


def _token(name: str, arn_name: str, env: Mapping[str, str] | None,
           fetch_secret: SecretFetcher | None) -> str | None:
    """A token given as variable ``name``, else in the secret named by ``arn_name``; None if neither is set."""
    env, fetch_secret = _sources(env, fetch_secret)
    token = _text(env, name) or None
    arn = _text(env, arn_name)
    if not token and arn:
        if fetch_secret is None:  # _sources gives one whenever an ARN is set
            raise ConfigError(f"{arn_name} is set but no secrets source is available")
        token = _secret_text(fetch_secret, arn_name, arn, "token")
    return token


def load_webhook_secret(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> str | None:
    """The webhook's shared secret (WEBHOOK_SECRET, else the secret named by WEBHOOK_SECRET_ARN), None if unset."""
    return _token("WEBHOOK_SECRET", "WEBHOOK_SECRET_ARN", env, fetch_secret)


def load_ui_token(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> str | None:
    """The web page's login token (UI_TOKEN, else the secret named by UI_TOKEN_SECRET_ARN), None if unset."""
    return _token("UI_TOKEN", "UI_TOKEN_SECRET_ARN", env, fetch_secret)


def load_cutover_window(env: Mapping[str, str] | None = None) -> float:
    """CUTOVER_WINDOW_SECONDS alone: `migrate` reads it and no other tuning setting (docs/cutover.md)."""
    return _float(os.environ if env is None else env, "CUTOVER_WINDOW_SECONDS")


class Tuning(TypedDict):
    """What ``load_tuning`` reads: the keyword arguments of ``Settings`` beyond the database, Jenkins and tokens."""
    batch_size: int
    max_parallel_triggers: int
    max_in_flight: int
    lease_seconds: int
    unstable_is_success: bool
    retry_base_seconds: float
    retry_max_seconds: float
    time_margin_seconds: float
    webhook_db_pool_size: int
    http_idle_timeout_seconds: int
    dispatcher_mode: str
    max_resends: int
    resend_quiet_seconds: float
    jenkins_breaker_failures: int
    jenkins_retry_base_seconds: float
    jenkins_retry_max_seconds: float
    db_stall_seconds: float
    poll_seconds: float
    metrics_emf: bool
    cutover_window_seconds: float


def load_tuning(env: Mapping[str, str] | None = None) -> Tuning:
    """Every setting but the database, Jenkins and the webhook secret (batch sizes, lease, retries...),
    validated, as keyword arguments of ``Settings``."""
    env = os.environ if env is None else env
    timeout = _float(env, "JENKINS_TIMEOUT_SECONDS")
    lease = _int(env, "LEASE_SECONDS")
    if lease < timeout + LEASE_SAFETY_SECONDS + CLAIM_ROOM_SECONDS:
        raise ConfigError(
            f"LEASE_SECONDS ({lease}) must be at least JENKINS_TIMEOUT_SECONDS ({timeout:g}) plus "
            f"{LEASE_SAFETY_SECONDS + CLAIM_ROOM_SECONDS:g} s: a claimed row's trigger must end within its "
            "lease, so a shorter lease would never send one"
        )
    retry_base, retry_max = _float(env, "RETRY_BASE_SECONDS"), _float(env, "RETRY_MAX_SECONDS")
    _base_and_maximum("RETRY_BASE_SECONDS", retry_base, "RETRY_MAX_SECONDS", retry_max)
    jenkins_base, jenkins_max = _float(env, "JENKINS_RETRY_BASE_SECONDS"), _float(env, "JENKINS_RETRY_MAX_SECONDS")
    _base_and_maximum("JENKINS_RETRY_BASE_SECONDS", jenkins_base, "JENKINS_RETRY_MAX_SECONDS", jenkins_max)
    return Tuning(
        batch_size=_int(env, "BATCH_SIZE"),
        max_parallel_triggers=_int(env, "MAX_PARALLEL_TRIGGERS"),
        max_in_flight=_int(env, "MAX_IN_FLIGHT"),
        lease_seconds=lease,
        unstable_is_success=not _bool(env, "UNSTABLE_IS_FAILURE"),
        retry_base_seconds=retry_base,
        retry_max_seconds=retry_max,
        time_margin_seconds=_float(env, "TIME_MARGIN_SECONDS"),
        webhook_db_pool_size=_int(env, "WEBHOOK_DB_POOL_SIZE"),
        http_idle_timeout_seconds=_int(env, "HTTP_IDLE_TIMEOUT_SECONDS"),
        dispatcher_mode=_choice(env, "DISPATCHER_MODE", DISPATCHER_MODES),
        max_resends=_int(env, "MAX_RESENDS"),
        resend_quiet_seconds=_float(env, "RESEND_QUIET_SECONDS", default=resend_quiet_for(lease)),
        jenkins_breaker_failures=_int(env, "JENKINS_BREAKER_FAILURES"),
        jenkins_retry_base_seconds=jenkins_base,
        jenkins_retry_max_seconds=jenkins_max,
        db_stall_seconds=_float(env, "DB_STALL_SECONDS"),
        poll_seconds=_float(env, "POLL_SECONDS"),
        metrics_emf=emf_wanted(env),
        cutover_window_seconds=_float(env, "CUTOVER_WINDOW_SECONDS"),
    )


def load_settings(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> Settings:
    """Read and validate every setting. Raises ConfigError naming the variable at fault."""
    env, fetch_secret = _sources(env, fetch_secret)
    tuning = load_tuning(env)
    jenkins = load_jenkins_settings(env, fetch_secret)
    controllers = load_controllers(env, fetch_secret, jenkins)
    webhook_secret = load_webhook_secret(env, fetch_secret)
    _check_webhook_secrets(controllers, webhook_secret)
    return Settings(
        database=load_database_settings(env, fetch_secret),
        jenkins=jenkins,
        controllers=controllers,
        webhook_secret=webhook_secret,
        ui_token=load_ui_token(env, fetch_secret),
        ui_identity=load_ui_identity(env),
        **tuning,
    )
