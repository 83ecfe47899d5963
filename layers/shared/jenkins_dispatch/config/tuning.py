"""The dispatcher's tuning: batch sizes, caps, the lease, retries and backoffs, the breaker, polling, the cutover
window; every setting but the database, Jenkins and the tokens, validated together (``load_tuning``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypedDict

from ..errors import ConfigError
from .pruning import prune_finished_after
from .reading import _base_and_maximum, _bool, _choice, _float, _int
from .telemetry import emf_wanted
from .variables import RESEND_QUIET_LEASES

# Room kept between the end of our last request and the end of a claim's lease (clocks, statement
# latency), and room for the claim itself and the job checks before the first trigger: a lease must
# hold one whole trigger wave (JENKINS_TIMEOUT_SECONDS) plus both, or no trigger is ever sent.
LEASE_SAFETY_SECONDS = 0.5
CLAIM_ROOM_SECONDS = 0.5
DISPATCHER_MODES = ("continuous", "single")


def resend_quiet_for(lease_seconds: float) -> float:
    """RESEND_QUIET_SECONDS unless set: RESEND_QUIET_LEASES leases, so that an original trigger Jenkins acts on
    late lands while the re-send still waits in its queue."""
    return float(RESEND_QUIET_LEASES * lease_seconds)


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
    prune_finished_after_seconds: float | None


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
        prune_finished_after_seconds=prune_finished_after(env),
    )

