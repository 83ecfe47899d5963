"""The shapes of the rows the stores' reads return: one ``TypedDict`` per statement, named for what it reads.

The CLI, the web page and the doctor read these rows by key (``row["status"]``); a TypedDict keeps that, and
lets the type checker catch a misspelt key or a value used as what it is not (a ``None`` queue id used as a
number). Both engines return the same columns under the same names (``tests/integration/test_row_shapes.py``
reads every one on each engine and compares the keys with these declarations).

Times: columns the package writes with the database's clock are ``datetime``; ``scheduled_at`` is ``Stamp``,
since a row written by hand may hold a time a datetime cannot (``OddTime``, the database's own text).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from .session import OddTime

Stamp = datetime | OddTime  # a time read back as the database gave it (see OddTime)


class Fingerprint(TypedDict):
    """``queue_fingerprint``: marks that move when anything a pass would act on changes (compared whole)."""
    last_job_id: int | None
    last_event_id: int | None
    processing: int
    limits: str | None
    key_limits: str | None
    pauses: str | None
    schedules: str | None  # how many, and the latest change: a new or resumed schedule wakes a polling pass


class WatchedRow(TypedDict):
    """``recently_finished_watched``: a final row a late request of its dispatch may still reach in Jenkins."""
    id: int
    job_name: str
    dispatch_id: str
    cancelled_in_flight: bool
    claimed_at: datetime | None  # only for cancelled_in_flight rows: when its dispatch was claimed


class FoundJob(TypedDict):
    """``get_job_by_dispatch_id`` / ``get_job_by_queue_id``: what the webhook needs to apply a notification (the
    controller: whether the build's URL is the row's)."""
    id: int
    job_name: str
    status: str
    dispatch_id: str | None
    controller: str
    jenkins_queue_id: int | None
    build_number: int | None
    jenkins_result: str | None


class Job(TypedDict):
    """``get_job`` / ``list_jobs``: the whole row (``show``, ``ls``, the page's job list and view); ``parameters``
    decoded."""
    id: int
    job_name: str
    parameters: dict[str, Any]
    status: str
    priority: int
    scheduled_at: Stamp
    attempts: int
    max_attempts: int
    resends: int
    cancel_requested_at: datetime | None
    dispatch_id: str | None
    controller: str
    jenkins_queue_id: int | None
    build_number: int | None
    build_url: str | None
    jenkins_result: str | None
    last_error: str | None
    dedupe_key: str | None
    lease_expires_at: datetime | None
    concurrency_key: str | None
    fairness_key: str | None
    started_at: datetime | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class JobEvent(TypedDict):
    """``job_events``: one line of a row's history."""
    id: int
    at: datetime
    event: str
    from_status: str | None
    to_status: str | None
    dispatch_id: str | None
    actor: str | None
    detail: str | None


class MatchedJob(TypedDict):
    """``select_jobs_matching`` (its ``total`` taken out): a row a bulk retry or cancel selected."""
    id: int
    job_name: str
    status: str
    controller: str
    updated_at: datetime


class OldestPending(TypedDict):
    """``oldest_pending_job``: the pending row scheduled earliest (the overview)."""
    id: int
    job_name: str
    status: str
    priority: int
    scheduled_at: Stamp
    attempts: int
    max_attempts: int
    last_error: str | None
    created_at: datetime
    controller: str  # why it waits reads its own controller's pauses


class HourCounts(TypedDict):
    """``finished_per_hour``: rows finished in one hour (``hour``: its start), by outcome."""
    hour: datetime
    completed: int
    failed: int
    cancelled: int


class Limit(TypedDict):
    """``list_limits``: a job's limits on one controller: its cap (None: none) and its rows in flight there, its
    rate (starts per minute; None: none) and its starts of the last minute."""
    controller: str
    job_name: str
    max_in_flight: int | None
    in_flight: int
    per_minute: int | None
    started_last_minute: int


class KeyLimit(TypedDict):
    """``list_key_limits``: a concurrency key's cap, its rows in flight on every controller, its rows waiting."""
    concurrency_key: str
    max_in_flight: int
    supersede: bool
    stop_running: bool
    in_flight: int
    pending: int


class KeyRule(TypedDict):
    """``list_key_rules``: the keys a job's rows get from their parameters when their INSERT leaves them out."""
    job_name: str
    concurrency_template: str | None
    fairness_template: str | None
    changed_by: str | None
    updated_at: datetime


class LimitChange(TypedDict):
    """``limit_history``: one cap or rate change (``kind``), from what to what (None: no limit), by whom."""
    id: int
    at: datetime
    controller: str
    job_name: str
    kind: str  # 'cap' (previous, max_in_flight) or 'rate' (previous_per_minute, per_minute); the other pair None
    previous: int | None
    max_in_flight: int | None
    previous_per_minute: int | None
    per_minute: int | None
    changed_by: str | None


class Stats(TypedDict):
    """``stats``: the queue at a glance (``stats``, the overview, ``/healthz``)."""
    pending: int
    due: int
    processing: int
    leases_expired: int
    oldest_pending_seconds: float | None
    completed_last_hour: int
    failed_last_hour: int
    cancelled_last_hour: int
    rows_estimate: int | None
    oldest_transaction_seconds: float | None
    everything_paused: bool
    paused_jobs: int


class Gauges(TypedDict):
    """``gauges``: what a dispatcher reports after each pass, and when it must look again."""
    processing: int
    processing_per_controller: dict[str, int] | None  # the same rows by controller (None: none in flight)
    capped_keys: dict[str, dict[str, int]] | None  # each capped key: {"cap": …, "in_flight": …} (None: none capped)
    oldest_pending_seconds: float | None
    everything_paused: bool
    paused_jobs: int
    next_due_seconds: float | None
    next_lease_seconds: float | None
    next_tick_seconds: float | None  # until the earliest enabled schedule's next tick
    pending: int
    oldest_transaction_seconds: float | None


class JobStats(TypedDict):
    """``stats_per_job``: one job's rows pending and in flight, its cap, pause and last hour."""
    job_name: str
    pending: int
    in_flight: int
    cap: int | None
    completed_last_hour: int
    failed_last_hour: int
    oldest_pending_seconds: float | None
    paused: bool  # on every controller, or on the default one (whose cap ``cap`` is)
    paused_at: datetime | None
    pause_reason: str | None
    paused_on: list[str]  # the other controllers the job has a pause of its own on, by name


class ServerIdentity(TypedDict):
    """``server_identity``: who the session is, on which database and server."""
    user_name: str
    dbname: str
    server_version: str


class OldestTransaction(TypedDict):
    """``oldest_transaction``: the oldest transaction open besides ours (its columns None when none is)."""
    pid: int | None
    user_name: str | None
    application_name: str | None
    state: str | None
    seconds: float | None
    hidden_sessions: int  # sessions whose details we may not see


class WaitingJobName(TypedDict):
    """``waiting_job_names``: a job with unfinished rows, and how many distinct jobs have some."""
    job_name: str
    waiting: int
    job_names: int


class Dispatcher(TypedDict):
    """``dispatchers``: a dispatcher seen in the last day."""
    id: str
    kind: str
    host: str
    pid: int
    started_at: datetime
    last_pass_at: datetime
    last_pass_seconds: float
    live: bool
    last_outcome: str
    last_detail: str | None
    passes: int
    jenkins_unavailable_since: datetime | None
    jenkins_reason: str | None
    # The controllers it serves, each {"status", "since", "reason"} as its breaker last stood; None: not recorded.
    controllers: dict[str, dict[str, Any]] | None


class JenkinsOutage(TypedDict):
    """``jenkins_outage``: Jenkins failing as a whole, as the live dispatcher that asked it last saw it."""
    dispatcher_id: str
    since: datetime
    reason: str | None
    checked_at: datetime


class CutoverWindow(TypedDict):
    """``cutover_window``: how long the results of the worker before jenkins-dispatch still count."""
    upgraded_at: datetime
    window_seconds: float
    window_ends_at: datetime
    seconds_left: float
    held: int
