"""The table of every environment variable the configuration reads: its meaning, default and range.

``load_settings`` takes defaults from here and ``jenkins-dispatch --help`` prints this table, so the two cannot
disagree; the readers (``reading.py``) refuse a variable missing from it. A new setting is a row here, in its
group's place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# RESEND_QUIET_SECONDS' default, in leases (``tuning.resend_quiet_for``); here because the table says it.
RESEND_QUIET_LEASES = 3


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


# Every variable the configuration reads, with its default, grouped as the help shows them (database, Jenkins,
# webhook and page, dispatcher tuning, logs and metrics). Reading a variable missing from the table is a KeyError.
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
    Variable("PRUNE_FINISHED_AFTER", "the dispatchers delete finished jobs (and their history) this long after they "
             "finished, and the time page's aggregates past its window: a duration like 30d or 12h (at least 1h), or "
             "off", "30d"),
    Variable("METRICS_EMF", "print metrics as CloudWatch EMF lines on stdout", default_text="true in Lambda only"),
    Variable("AWS_LAMBDA_FUNCTION_NAME", "set by Lambda: metrics default to EMF there"),
    Variable("LOG_FORMAT", "log lines as `json` (one object a line) or `text` (for a person); `auto`: text when "
             "the log's stream is a terminal, else JSON", "auto"),
)
VARIABLES = {variable.name: variable for variable in ENVIRONMENT}


def default_of(name: str) -> Any:
    """The default ``name`` has in ``ENVIRONMENT``."""
    return VARIABLES[name].default

