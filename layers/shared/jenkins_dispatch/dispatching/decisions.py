"""Decisions that need no I/O: what to do with a Jenkins answer, how long to back off.

Pure functions over the outcome types of ``jenkins.answers``; the dispatcher carries them out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from ..errors import ConfigError, DatabaseBusy, DatabaseUnavailable, DispatchError
from ..jenkins.answers import (
    Accepted,
    AuthRejected,
    BadRequest,
    BuildGone,
    Building,
    BuildStarted,
    BuildState,
    Disabled,
    Finished,
    Forbidden,
    JobForbidden,
    JobInfo,
    JobNotFound,
    Merged,
    NotParameterized,
    NotStartedYet,
    OutcomeUnknown,
    QueueCancelled,
    QueueItemGone,
    QueueState,
    Refused,
    ServerError,
    StillQueued,
    TriggerOutcome,
    Unavailable,
)


class Act(Enum):
    """What the dispatcher does with a row after Jenkins answered its trigger."""
    RECORD = "record"  # Jenkins has it: remember the queue item
    FAIL = "fail"  # this job can never run as asked: settle failed with the reason
    RETRY_LATER = "retry_later"  # this job cannot run now, or Jenkins failed on this one request: back off, spend the attempt
    STOP_PASS = "stop_pass"  # Jenkins as a whole is unusable: release unsent rows, stop
    KEEP_LEASE = "keep_lease"  # maybe sent: never resend blindly; the reconciler looks after the lease


@dataclass(frozen=True)
class Decision:
    """An act, with the reason to record and the queue id when Jenkins took the trigger."""
    act: Act
    reason: str = ""
    queue_id: int | None = None
    error_class: str = ""
    # RETRY_LATER because Jenkins failed on this one request (not because of the job): the row backs off on
    # Jenkins's scale (JENKINS_RETRY_BASE_SECONDS...), as a hiccup clears in seconds, not on a job's
    # (RETRY_BASE_SECONDS...), which waits for a person to enable the job or lift a queue plugin's veto.
    jenkins_hiccup: bool = False


# One cause, one metric (TriggerErrors<class>), whether the job check or the trigger's answer tells it.
MISSING_DISPATCH_ID = "MissingDispatchIdParameter"


def missing_dispatch_id_fix(job_name: str) -> str:
    """What to do about a job that does not declare DISPATCH_ID (the row's last_error)."""
    return (
        f"Jenkins job {job_name!r} does not declare the parameter DISPATCH_ID, so Jenkins would drop it and "
        f"could merge or lose this build: add a String parameter named DISPATCH_ID to {job_name!r} "
        "(This project is parameterized → String Parameter), then retry the job"
    )


def job_not_found(job_name: str) -> Decision:
    """The decision for a job Jenkins does not have: fail the row, naming the path."""
    return Decision(Act.FAIL, f"Jenkins has no job {job_name!r} (404): check the job path", error_class="JobNotFound")


# What a missing job permission stops our user from doing, in the words of the fix.
_FORBIDDEN_VERBS = {"Job/Build": "build", "Job/Read": "read", "Job/Discover": "read"}


def job_forbidden(job_name: str, forbidden: JobForbidden) -> Decision:
    """Our credentials work but this job is off limits to our user: only a person granting the permission can
    change that, so the row fails (saying what to grant) instead of stopping every pass or retrying in vain."""
    verb = _FORBIDDEN_VERBS.get(forbidden.permission, "use")
    return Decision(
        Act.FAIL,
        f"Jenkins user {forbidden.user} may not {verb} {job_name}: missing the {forbidden.permission} permission "
        "(grant it, then `jenkins-dispatch retry ID`)",
        error_class="JobForbidden",
    )


def check_job(job_name: str, info: JobInfo) -> Decision | None:
    """Before sending: a job that cannot take our trigger fails (or waits) without a request."""
    if info.forbidden is not None:
        return job_forbidden(job_name, info.forbidden)
    if not info.exists:
        return job_not_found(job_name)
    if not info.declares_dispatch_id:
        return Decision(Act.FAIL, missing_dispatch_id_fix(job_name), error_class=MISSING_DISPATCH_ID)
    if not info.buildable:
        return Decision(Act.RETRY_LATER, f"Jenkins job {job_name!r} is disabled (not buildable)",
                        error_class="Disabled")
    return None


def decide_trigger(job_name: str, outcome: TriggerOutcome) -> Decision:
    """What to do with a row, given the outcome of its trigger (docs/jenkins.md, trigger outcomes)."""
    match outcome:
        case Accepted(queue_id=queue_id):
            return Decision(Act.RECORD, queue_id=queue_id)
        case Merged(queue_id=queue_id):
            # Only an item carrying our own DISPATCH_ID can be identical to our request: a late copy of
            # our earlier send. Adopting it is exactly right.
            return Decision(Act.RECORD, queue_id=queue_id, reason="merged into queued item")
        case JobNotFound():
            return job_not_found(job_name)
        case NotParameterized():
            return Decision(Act.FAIL, missing_dispatch_id_fix(job_name), error_class=MISSING_DISPATCH_ID)
        case BadRequest(detail=detail):
            return Decision(Act.FAIL, f"Jenkins refused the parameters of {job_name!r}: {detail}",
                            error_class="BadRequest")
        case Disabled():
            return Decision(Act.RETRY_LATER, f"Jenkins job {job_name!r} is disabled (409)", error_class="Disabled")
        case Refused(detail=detail):
            return Decision(Act.RETRY_LATER, f"Jenkins's queue refused {job_name!r}: {detail}", error_class="Refused")
        case JobForbidden() as forbidden:
            return job_forbidden(job_name, forbidden)
        case AuthRejected(detail=detail):
            return Decision(Act.STOP_PASS, f"{detail}", error_class="AuthRejected")
        case Forbidden(permission=permission):
            # The client always settles a Forbidden with whoAmI; unsettled, it may be our credentials: stop
            # without spending attempts, as for any 403 before.
            return Decision(Act.STOP_PASS, f"Jenkins refused {job_name} (403, {permission})", error_class="AuthRejected")
        case Unavailable(reason=reason):
            return Decision(Act.STOP_PASS, f"Jenkins unavailable: {reason}", error_class="Unavailable")
        case ServerError(reason=reason):
            # Not acted upon: this row backs off like any transient error. Whether Jenkins as a whole is failing
            # is the breaker's question (jenkins_evidence): if it opens on this answer, the row is released.
            return Decision(Act.RETRY_LATER, reason, error_class="ServerError", jenkins_hiccup=True)
        case OutcomeUnknown(reason=reason):
            return Decision(Act.KEEP_LEASE, f"outcome unknown: {reason}", error_class="OutcomeUnknown")
    return Decision(Act.KEEP_LEASE, f"unexpected answer {outcome!r}", error_class="Unexpected")


class Evidence(Enum):
    """What one trigger's answer says about Jenkins as a whole (the breaker's input)."""
    WORKS = "works"  # Jenkins answered as Jenkins does, whatever it said about the job
    SUSPECT = "suspect"  # this request failed in a way one request can: a 500, a proxy's 5xx, no answer
    DOWN = "down"  # Jenkins as a whole: restarting or starting, unreachable, busy proxy, credentials rejected


def jenkins_evidence(outcome: TriggerOutcome) -> Evidence:
    """The evidence a trigger's outcome gives about Jenkins as a whole (see ``breaker.Breaker``)."""
    match outcome:
        case Unavailable() | AuthRejected() | Forbidden():
            return Evidence.DOWN
        case ServerError() | OutcomeUnknown():
            return Evidence.SUSPECT
    return Evidence.WORKS


def worth_a_probe(outcome: TriggerOutcome) -> bool:
    """Whether Jenkins itself should be asked right after this answer: only after its own 5xx. After no answer at
    all (a timeout, a reset) Jenkins is slow or the path is, and a probe would only wait as long again on a
    trigger thread: the run of failures decides those."""
    return isinstance(outcome, ServerError)


def retry_delay(decision: Decision, attempt: int, job_scale: tuple[float, float], jenkins_scale: tuple[float, float],
                rng: random.Random | None = None) -> float:
    """How long a RETRY_LATER row waits: a job's condition on ``job_scale`` (RETRY_BASE_SECONDS, RETRY_MAX_SECONDS),
    Jenkins failing on that one request on ``jenkins_scale`` (JENKINS_RETRY_BASE_SECONDS, _MAX_SECONDS)."""
    base, maximum = jenkins_scale if decision.jenkins_hiccup else job_scale
    return backoff_seconds(attempt, base, maximum, rng)


def final_status(result: str, unstable_is_success: bool = True) -> str:
    """Jenkins result → our final status."""
    if result == "SUCCESS" or (result == "UNSTABLE" and unstable_is_success):
        return "completed"
    return "failed"


def build_error(result: str, number: int | None, unstable_is_success: bool = True) -> str | None:
    """The row's error text for a build that did not succeed; None when it completed."""
    if final_status(result, unstable_is_success) == "completed":
        return None
    return f"Jenkins build #{number} finished {result}" if number is not None else f"Jenkins build finished {result}"


class Next(Enum):
    """What the reconciler does next with a row whose queue item or build it followed."""
    SETTLE = "settle"  # the build finished: settle from its result
    PROGRESS = "progress"  # the build started: record it, check again after the lease
    WAIT = "wait"  # still queued or running: the lease was renewed, nothing else to do
    SEARCH = "search"  # Jenkins forgot the queue item or build: look for our DISPATCH_ID
    FAIL = "fail"


@dataclass(frozen=True)
class Followup:
    """The reconciler's next step, with the build (and result) Jenkins showed."""
    next: Next
    reason: str = ""
    build_number: int | None = None
    build_url: str | None = None
    result: str | None = None


def follow_queue_item(state: QueueState) -> Followup:
    """What the reconciler does with a known queue item."""
    match state:
        case StillQueued(why=why):
            return Followup(Next.WAIT, f"still queued: {why}" if why else "still queued")
        case BuildStarted(build_number=number, build_url=url):
            return Followup(Next.PROGRESS, build_number=number, build_url=url)
        case NotStartedYet():
            return Followup(Next.WAIT, "leaving the queue")
        case QueueCancelled():
            return Followup(Next.FAIL, "its Jenkins queue item was cancelled in Jenkins")
        case QueueItemGone():
            return Followup(Next.SEARCH, "Jenkins no longer knows the queue item")
    return Followup(Next.WAIT, f"unexpected queue state {state!r}")


def follow_build(state: BuildState) -> Followup:
    """The next step for a row whose build Jenkins was asked about."""
    match state:
        case Finished(number=number, result=result, url=url):
            return Followup(Next.SETTLE, build_number=number, build_url=url, result=result)
        case Building(number=number, url=url):
            return Followup(Next.WAIT, "still running", build_number=number, build_url=url)
        case BuildGone():
            return Followup(Next.SEARCH, "Jenkins no longer knows the build")
    return Followup(Next.WAIT, f"unexpected build state {state!r}")


def watch_window_seconds(lease_seconds: float, resend_quiet_seconds: float, timeout_seconds: float) -> float:
    """How long after a re-sent row settled a request of its dispatch may still wait in Jenkins's queue, so that the
    reconciler keeps looking for it (and cancels it) until then.

    The row settled no sooner than its last re-send went out. Jenkins may act on that request as late as the
    guarantee covers any trigger — one lease plus RESEND_QUIET_SECONDS after it was sent — and the re-send then waits
    RESEND_QUIET_SECONDS in the queue: a look at any moment of that wait must still find it. Twice the HTTP timeout:
    the re-send's own request, and the look's.
    """
    return lease_seconds + 2 * resend_quiet_seconds + 2 * timeout_seconds


def backoff_seconds(attempt: int, base: float, maximum: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: base·2^(attempt-1), capped, then a random 50–100 % of it.

    The jitter keeps rows that failed together from coming back together.
    """
    if attempt < 1:
        attempt = 1
    ceiling = min(maximum, base * (2 ** min(attempt - 1, 30)))
    return ceiling * (0.5 + 0.5 * (rng or random).random())


# --------------------------------------------------------------------------- a pass that failed

BUSY_RETRY_SECONDS = 1.0  # the database was busy (a lock or statement timeout, a deadlock): soon again


@dataclass(frozen=True)
class FailedPass:
    """What a lane does after a pass that ended on an error: how long it pauses, what it says, what it records.

    ``pause_seconds``: a fixed pause; else the database's retry backoff at ``backoff_attempt`` (None: at the database's
    own count of failures in a row, which this failure adds to). ``database_ok``: what the failure says of the database
    (None: nothing). ``beat``: the heartbeat's (outcome, detail), None when the database could not take it anyway."""

    reason: str  # the pass's "stopped because"
    log: str
    level: str  # "warning", "error" or "exception" (a defect: with its traceback)
    database_ok: bool | None
    beat: tuple[str, str] | None
    pause_seconds: float | None = None
    backoff_attempt: int | None = None


def after_a_failed_pass(exc: Exception) -> FailedPass | None:
    """A pass's error → what the lane does; None for a configuration error (nothing will ever work: the loop ends).
    Failures end a pass, never the loop: callbacks keep arriving meanwhile."""
    text = str(exc)
    if isinstance(exc, ConfigError):
        return None
    if isinstance(exc, DatabaseBusy):  # it answered: busy is not down
        return FailedPass("database busy", "pass ended early: the database is busy; trying again shortly", "warning",
                          database_ok=True, beat=("database_busy", text), pause_seconds=BUSY_RETRY_SECONDS)
    if isinstance(exc, DatabaseUnavailable):  # nowhere to record it
        return FailedPass("database unavailable", "pass ended: the database is unavailable; retrying", "error",
                          database_ok=False, beat=None)
    if isinstance(exc, DispatchError):
        return FailedPass(text, "pass failed", "error", database_ok=None, beat=("failed", text), backoff_attempt=1)
    crash = f"{type(exc).__name__}: {exc}"  # a defect: keep serving callbacks, say what broke, try again later
    return FailedPass("crashed", "pass crashed", "exception", database_ok=None, beat=("crashed", crash),
                      backoff_attempt=3)
