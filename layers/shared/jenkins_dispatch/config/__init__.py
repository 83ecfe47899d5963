"""Settings: read once from the environment (and Secrets Manager on AWS), validated, passed around typed.

Nothing else in the package reads or writes ``os.environ``: what Powertools needs before any Settings exist
(its service defaults, whether EMF lines and tracing are on) is asked of this package too
(``set_powertools_defaults``, ``emf_wanted``, ``tracing_wanted``). Every error names the variable at fault and
never echoes a secret's value.

This module is the package's public face: the rest of ``jenkins_dispatch`` imports from ``config`` alone, never
from the modules below, one per settings group:

- ``variables``: the table of every variable (meaning, default, range) that ``--help`` prints;
- ``reading``: the readers (text, numbers in range, booleans, choices, secrets by ARN);
- ``database``: ``DatabaseSettings`` from DATABASE_URL or DB_SECRET_ARN / IAM authentication;
- ``controllers``: ``JenkinsSettings`` of the default controller and of JENKINS_CONTROLLERS;
- ``web``: the webhook's secret, the page's token and login proxy, `serve`'s and `ui`'s option defaults;
- ``tuning``: the dispatcher's batch sizes, caps, lease, retries, breaker, polling, cutover window;
- ``pruning``: PRUNE_FINISHED_AFTER, how long the dispatchers' pruner keeps finished jobs;
- ``telemetry``: logs, metrics and traces, asked before any Settings exist;
- ``settings``: ``Settings`` and ``load_settings``, which reads every group once.
"""

from .controllers import (
    CONTROLLER_KEYS,
    CONTROLLER_MAX_IN_FLIGHT,
    CONTROLLER_NAME,
    DEFAULT_CONTROLLER,
    JenkinsSettings,
    load_controllers,
    load_jenkins_settings,
    same_jenkins_key,
)
from .database import (
    DEFAULT_PORTS,
    ENGINE_NAMES,
    LOCAL_HOSTS,
    DatabaseSettings,
    engine_of,
    load_database_settings,
    parse_database_url,
)
from .pruning import PRUNE_DEFAULT_SECONDS
from .reading import SecretFetcher
from .settings import Settings, load_settings
from .telemetry import emf_wanted, log_format_wanted, set_powertools_defaults, tracing_wanted
from .tuning import (
    CLAIM_ROOM_SECONDS,
    DISPATCHER_MODES,
    LEASE_SAFETY_SECONDS,
    Tuning,
    load_cutover_window,
    load_tuning,
    resend_quiet_for,
)
from .variables import ENVIRONMENT, RESEND_QUIET_LEASES, VARIABLES, Variable, default_of
from .web import (
    SERVE_HOST,
    SERVE_INTERVAL_SECONDS,
    SERVE_PORT,
    UI_PORT,
    UI_REFRESH_SECONDS,
    UiIdentity,
    load_ui_identity,
    load_ui_token,
    load_webhook_secret,
)

__all__ = [
    "CLAIM_ROOM_SECONDS", "CONTROLLER_KEYS", "CONTROLLER_MAX_IN_FLIGHT", "CONTROLLER_NAME", "DEFAULT_CONTROLLER",
    "DEFAULT_PORTS", "DISPATCHER_MODES", "ENGINE_NAMES", "ENVIRONMENT", "LEASE_SAFETY_SECONDS", "LOCAL_HOSTS",
    "PRUNE_DEFAULT_SECONDS", "RESEND_QUIET_LEASES", "SERVE_HOST", "SERVE_INTERVAL_SECONDS", "SERVE_PORT", "UI_PORT",
    "UI_REFRESH_SECONDS",
    "VARIABLES", "DatabaseSettings", "JenkinsSettings", "SecretFetcher", "Settings", "Tuning", "UiIdentity",
    "Variable", "default_of", "emf_wanted", "engine_of", "load_controllers", "load_cutover_window",
    "load_database_settings", "load_jenkins_settings", "load_settings", "load_tuning", "load_ui_identity",
    "load_ui_token", "load_webhook_secret", "log_format_wanted", "parse_database_url", "resend_quiet_for",
    "same_jenkins_key", "set_powertools_defaults", "tracing_wanted",
]
