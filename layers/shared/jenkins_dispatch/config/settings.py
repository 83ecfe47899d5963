"""``Settings``, every setting of the package in one typed object, and ``load_settings``, which reads and
validates each group (database, controllers, webhook and page, tuning) once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..errors import ConfigError, ControllerNotConfigured
from .controllers import JenkinsSettings, _check_webhook_secrets, load_controllers, load_jenkins_settings
from .database import DatabaseSettings, load_database_settings
from .pruning import PRUNE_DEFAULT_SECONDS
from .reading import SecretFetcher, _sources
from .tuning import load_tuning, resend_quiet_for
from .variables import default_of
from .web import UiIdentity, load_ui_identity, load_ui_token, load_webhook_secret


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
    # The pruner duty (dispatching/duties/pruner.py): finished rows older than this go; None: never.
    prune_finished_after_seconds: float | None = PRUNE_DEFAULT_SECONDS
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
