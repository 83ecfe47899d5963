"""`jenkins-dispatch doctor`: is everything this package needs in place? One row per check, the fix for each failure.

Every check runs, whatever failed before it: a check that cannot run because another failed (no schema to read
when the database is down) says ``skip`` and names the failure. A check is ``pass``, ``fail`` or ``skip``; there is
no "warning": a condition worth a person's attention (a transaction open for too long) is a failure, with a
threshold the operator can set. Skipped checks never fail the run (they either were not asked for, like the webhook
probe without ``--webhook-url``, or follow a failure that does), so the run is healthy exactly when nothing fails.

Secrets never appear in a row: the database is named by host, port and database, Jenkins by URL and user, the
webhook by scheme, host and path (its query string may hold the token).

Deciding what an answer means is pure (``*_check`` functions, table-tested); ``run_checks`` does the I/O.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..config import (
    DEFAULT_CONTROLLER,
    JenkinsSettings,
    SecretFetcher,
    load_controllers,
    load_database_settings,
    load_jenkins_settings,
    load_tuning,
    load_webhook_secret,
)
from ..errors import ConfigError, DispatchError, JenkinsError, SchemaMissing
from ..jenkins.answers import DISPATCH_ID_PARAMETER, JobInfo
from ..jenkins.jobs import job_path_error
from .display import duration
from .waiting import not_configured_text

if TYPE_CHECKING:
    from ..jenkins.client import JenkinsClient, WhoAmIAnswer
    from ..store.rows import CutoverWindow, OldestTransaction
    from ..store.session import TransactionHelp

PASS, FAIL, SKIP = "pass", "fail", "skip"

DEFAULT_MAX_TRANSACTION_AGE_SECONDS = 300.0
DEFAULT_MAX_JOBS_CHECKED = 50
WEBHOOK_PROBE_TIMEOUT_SECONDS = 10.0
# The DISPATCH_ID of the probe `doctor` sends to the webhook: not of the dispatcher's form (jd-ID-HEX, legacy-ID),
# so no row can carry it; the webhook looks it up, changes nothing and answers 404 "unknown dispatch id".
PROBE_DISPATCH_PREFIX = "doctor-probe-"
PROBE_JOB = "jenkins-dispatch-doctor"

MIGRATE_FIX = "run `jenkins-dispatch migrate` (on AWS the stack's migrate custom resource does it on deploy)"


@dataclass(frozen=True)
class Check:
    """One row of the report: what was checked, how it went, what was seen, and (on failure) what to do."""

    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """The check as a plain dict, for ``--json``."""
        return asdict(self)


@dataclass(frozen=True)
class DoctorOptions:
    """What `doctor` was asked to check, and its thresholds."""
    webhook_url: str | None = None
    max_transaction_age_seconds: float = DEFAULT_MAX_TRANSACTION_AGE_SECONDS
    max_jobs_checked: int = DEFAULT_MAX_JOBS_CHECKED


def healthy(checks: Sequence[Check]) -> bool:
    """Exit 0 exactly when this holds: no check failed (skips follow a failure or were not asked for)."""
    return not any(c.status == FAIL for c in checks)


def _skip(name: str, because: str) -> Check:
    return Check(name, SKIP, f"skipped: {because}")


# --------------------------------------------------------------------------- pure decisions: database


def database_unreachable_check(message: str) -> Check:
    """The database row when no session could be opened; ``message`` is DatabaseUnavailable's (no password)."""
    lowered = message.lower()
    # PostgreSQL's words and SQLSTATEs, then MySQL's (errors 1045 and 1049).
    if ("password authentication failed" in lowered or "28p01" in lowered or "no password" in lowered
            or "access denied for user" in lowered):
        fix = "correct the user or password in DATABASE_URL (on AWS: the secret named by DB_SECRET_ARN)"
    elif ("does not exist" in lowered and "database" in lowered) or "unknown database" in lowered:
        fix = "create the database, or correct its name at the end of DATABASE_URL"
    elif "no pg_hba.conf entry" in lowered:  # before the TLS test: its message says "SSL off"
        fix = "allow this client's address in the server's pg_hba.conf (or use TLS: ?sslmode=verify-full)"
    elif "ca bundle" in lowered:
        fix = "point DB_CA_BUNDLE (or sslrootcert= in DATABASE_URL) at a readable PEM file of CA certificates"
    elif "certificate" in lowered or "tls" in lowered or "ssl" in lowered:
        fix = "the server's TLS certificate was not verified: set DB_CA_BUNDLE to its CA (RDS: the RDS CA bundle)"
    else:
        fix = ("start the database server, or correct the host and port in DATABASE_URL; check the network path "
               "from here (security group, VPC, firewall)")
    return Check("database", FAIL, message, fix)


def schema_check(applied: Mapping[int, str] | None, known: Sequence[tuple[int, str]]) -> Check:
    """Applied migrations (None: not even the migrations table) against the migration files of this version."""
    if applied is None:
        return Check("schema", FAIL, "the schema is not applied (no jenkins_dispatch_migrations table)", MIGRATE_FIX)
    known_versions = {version for version, _ in known}
    missing = [f"{version:04d}_{name}" for version, name in known if version not in applied]
    unknown = [f"{version:04d}_{name}" for version, name in sorted(applied.items()) if version not in known_versions]
    if missing:
        return Check("schema", FAIL, f"{len(missing)} of {len(known)} migrations not applied: {', '.join(missing)}",
                     MIGRATE_FIX)
    if unknown:
        return Check("schema", FAIL,
                     f"the database has migrations this version of jenkins-dispatch does not know: {', '.join(unknown)}",
                     "upgrade jenkins-dispatch here to the version that applied them (the schema is newer than this code)")
    latest = f"{known[-1][0]:04d}_{known[-1][1]}" if known else "none"
    return Check("schema", PASS, f"current: all {len(known)} migrations applied (latest {latest})")


def transaction_check(oldest: OldestTransaction, max_age_seconds: float, tools: TransactionHelp) -> Check:
    """The oldest open transaction (a row of ``Introspection.oldest_transaction``) against the threshold; ``tools``: the
    session's ``long_transaction_help`` (what such a transaction holds back, where to find it, how to end it)."""
    holds_back, listed_in, end_it, grant = tools.holds_back, tools.listed_in, tools.end_it, tools.grant
    hidden = int(oldest.get("hidden_sessions") or 0)
    note = (f"; {hidden} sessions of other users are hidden from us (grant {grant} to see them)"
            if hidden else "")
    seconds = oldest.get("seconds")
    if seconds is None:
        return Check("oldest transaction", PASS, f"no other transaction is open{note}")
    where = (f"pid {oldest.get('pid')}, user {oldest.get('user_name')}, "
             f"application {oldest.get('application_name') or '-'}, {oldest.get('state') or 'state unknown'}")
    if float(seconds) <= max_age_seconds:
        return Check("oldest transaction", PASS,
                     f"{duration(float(seconds))} ({where}), within {duration(max_age_seconds)}{note}")
    return Check(
        "oldest transaction", FAIL,
        f"open for {duration(float(seconds))}, over {duration(max_age_seconds)} ({where}): it holds back {holds_back} "
        f"and may hold locks the dispatcher waits for{note}",
        f"find it in {listed_in} (pid {oldest.get('pid')}) and end it: "
        f"{end_it.format(pid=oldest.get('pid'))}; then fix the client that left it open",
    )


def cutover_check(window: CutoverWindow | None) -> Check | None:
    """The "cutover" row (a row of ``Introspection.cutover_window``), while the worker that ran before jenkins-dispatch may
    still report on the jobs it held at the upgrade, or some of them wait for the reconciler; None otherwise."""
    if window is None:
        return None
    held = int(window.get("held") or 0)
    seconds_left = float(window.get("seconds_left") or 0.0)
    ends = window["window_ends_at"]
    ends_text = f"{ends:%Y-%m-%d %H:%M:%S} UTC" if hasattr(ends, "strftime") else str(ends)
    jobs = f"{held} job{'s' if held != 1 else ''}"
    if seconds_left > 0:
        return Check("cutover", PASS,
                     f"window open until {ends_text} ({duration(seconds_left)} left; CUTOVER_WINDOW_SECONDS="
                     f"{float(window.get('window_seconds') or 0):g} at `migrate`): {jobs} held by the worker that ran "
                     "before jenkins-dispatch, whose results for them count until then; its other writes are refused, "
                     "so stop that worker once they are done (docs/cutover.md)")
    if held:
        return Check("cutover", PASS,
                     f"window closed at {ends_text}: {jobs} the worker that ran before jenkins-dispatch held "
                     "wait for the reconciler, which settles them at its next pass (failed unless Jenkins shows "
                     "otherwise; docs/cutover.md)")
    return None


# --------------------------------------------------------------------------- pure decisions: Jenkins


def jenkins_checks(answer: WhoAmIAnswer, user: str, where: str) -> tuple[Check, Check]:
    """The "jenkins" (reachable) and "credentials" rows from Jenkins's answer to whoAmI."""
    version = f"Jenkins {answer.version}" if answer.version else "Jenkins"
    status = answer.status
    if status in (401, 403):
        reach = Check("jenkins", PASS, f"{version} answers at {where}")
        if status == 401:
            return reach, Check(
                "credentials", FAIL, f"Jenkins rejected the API token of user {user} (HTTP 401)",
                f"create an API token for {user} in Jenkins (user menu > Security > API Token) and set "
                "JENKINS_API_TOKEN to it; JENKINS_USER must be the user's id",
            )
        return reach, Check(
            "credentials", FAIL, f"Jenkins refused whoAmI to user {user} (HTTP 403)",
            f"grant {user} Overall/Read; if a proxy or firewall in front of Jenkins answered, let this client through",
        )
    if status == 200 and answer.identity is not None:
        reach = Check("jenkins", PASS, f"{version} answers at {where}")
        identity = answer.identity
        if identity.is_user(user):
            return reach, Check("credentials", PASS, f"Jenkins takes our requests as user {identity.name}")
        seen = "anonymous" if identity.anonymous or not identity.name else f"user {identity.name}"
        return reach, Check(
            "credentials", FAIL, f"Jenkins takes our requests as {seen}, not as user {user}",
            f"check JENKINS_USER and JENKINS_API_TOKEN (a new API token for {user}); a single sign-on realm or a "
            "proxy may drop credentials it does not know",
        )
    skipped = _skip("credentials", "Jenkins did not answer whoAmI")
    if status >= 500:
        return Check(
            "jenkins", FAIL, f"Jenkins at {where} answered HTTP {status} ({answer.excerpt or 'no text'})",
            "Jenkins is starting, restarting or failing: wait for it to finish starting, else read its log "
            "(or the proxy's, if one answered)",
        ), skipped
    if 300 <= status < 400:
        return Check(
            "jenkins", FAIL, f"{where} redirects whoAmI (HTTP {status}) to {answer.location or 'somewhere'}",
            "set JENKINS_URL to the URL Jenkins really serves (https://, its host name, its context path)",
        ), skipped
    if status == 404:
        return Check(
            "jenkins", FAIL, f"{where} has no whoAmI (HTTP 404): it is not Jenkins's root URL",
            "set JENKINS_URL to Jenkins's root URL, with its context path (https://ci.example.com/jenkins/)",
        ), skipped
    return Check(
        "jenkins", FAIL,
        f"{where} answered whoAmI with HTTP {status} but not Jenkins's JSON ({answer.excerpt or 'no text'})",
        "check that JENKINS_URL points at Jenkins itself, not a login page or a proxy in front of it",
    ), skipped


JENKINS_UNREACHABLE_FIX = ("start Jenkins, or correct JENKINS_URL; check the network path from here (firewall, "
                           "security group, VPC)")


def job_check(job_name: str, waiting: int, info: JobInfo | None, user: str) -> Check | None:
    """A row for one job name waiting in the queue, or None when Jenkins has it ready for dispatch. ``info`` is
    None for a name no Jenkins item can have (never asked)."""
    name = f"job {job_name}"
    rows = f"{waiting} row{'s' if waiting != 1 else ''} waiting"
    if (invalid := job_path_error(job_name)) is not None:
        return Check(name, FAIL, f"{invalid} ({rows})",
                     f"cancel its rows (jenkins-dispatch ls --job '{job_name}', then jenkins-dispatch cancel ID) "
                     "and enqueue them under the job's real path")
    if info is None:
        raise ValueError(f"what Jenkins says of {job_name!r} is needed to check it")
    if info.forbidden is not None:
        return Check(name, FAIL, f"user {user} lacks {info.forbidden.permission} on {job_name} ({rows})",
                     f"grant user {user} Job/Read and Job/Build on {job_name} (or on its folder)")
    if not info.exists:
        return Check(name, FAIL, f"Jenkins has no job {job_name} (HTTP 404; {rows})",
                     f"create {job_name} in Jenkins, or cancel its rows: jenkins-dispatch ls --job '{job_name}', "
                     "then jenkins-dispatch cancel ID")
    if not info.buildable:
        return Check(name, FAIL, f"Jenkins will not build {job_name}: it is disabled, or a folder ({rows})",
                     f"enable {job_name} in Jenkins (or queue a job inside the folder)")
    if not info.declares_dispatch_id:
        has = f"its parameters are {', '.join(info.parameter_names)}" if info.parameter_names else "it has no parameters"
        return Check(name, FAIL, f"{job_name} declares no {DISPATCH_ID_PARAMETER} parameter: {has} ({rows})",
                     f"add a String parameter named {DISPATCH_ID_PARAMETER} to {job_name} (This project is "
                     "parameterized): without it no build can be matched to its row")
    return None


def queued_jobs_summary(checked: int, total: int, failures: int) -> Check:
    """The "queued jobs" row above the per-job rows (only the failing jobs get a row of their own)."""
    if total == 0:
        return Check("queued jobs", PASS, "no job is waiting in the queue")
    scope = f"the {checked} job names with the most rows waiting, of {total}" if checked < total else (
        f"{total} job name{'s' if total != 1 else ''} waiting")
    if failures:
        return Check("queued jobs", FAIL, f"{failures} of {scope} cannot be dispatched (rows below)",
                     "fix each job below in Jenkins, or cancel its rows")
    return Check("queued jobs", PASS, f"{scope}: each exists, is buildable and declares {DISPATCH_ID_PARAMETER}")


def scheduled_job_check(job_name: str, schedules: str, info: JobInfo | None, user: str) -> Check | None:
    """A row for one job some schedules enqueue (``schedules``: their names), or None when Jenkins has it ready:
    a schedule whose job cannot be dispatched fails every tick, and nobody is there to see it happen."""
    name = f"scheduled job {job_name}"
    fix_schedule = f"or remove the schedule: jenkins-dispatch schedule rm NAME ({schedules})"
    if (invalid := job_path_error(job_name)) is not None:
        return Check(name, FAIL, f"{invalid} (schedules {schedules})", fix_schedule)
    if info is None:
        raise ValueError(f"what Jenkins says of {job_name!r} is needed to check it")
    if info.forbidden is not None:
        return Check(name, FAIL, f"user {user} lacks {info.forbidden.permission} on {job_name} (schedules "
                     f"{schedules})", f"grant user {user} Job/Read and Job/Build on {job_name}, {fix_schedule}")
    if not info.exists:
        return Check(name, FAIL, f"Jenkins has no job {job_name} (HTTP 404; schedules {schedules})",
                     f"create {job_name} in Jenkins, {fix_schedule}")
    if not info.buildable:
        return Check(name, FAIL, f"Jenkins will not build {job_name}: it is disabled, or a folder (schedules "
                     f"{schedules})", f"enable {job_name} in Jenkins, {fix_schedule}")
    if not info.declares_dispatch_id:
        return Check(name, FAIL, f"{job_name} declares no {DISPATCH_ID_PARAMETER} parameter (schedules {schedules})",
                     f"add a String parameter named {DISPATCH_ID_PARAMETER} to {job_name}, {fix_schedule}")
    return None


def scheduled_jobs_summary(total: int, failures: int) -> Check:
    """The "scheduled jobs" row above the rows of the scheduled jobs that fail."""
    if failures:
        return Check("scheduled jobs", FAIL, f"{failures} of {total} scheduled job{'s' if total != 1 else ''} cannot "
                     "be dispatched (rows below): each of their ticks would fail", "fix each job below in Jenkins")
    return Check("scheduled jobs", PASS, f"{total} scheduled job{'s' if total != 1 else ''}: each exists, is "
                 f"buildable and declares {DISPATCH_ID_PARAMETER}")


# --------------------------------------------------------------------------- pure decisions: webhook


def display_url(url: str) -> str:
    """scheme://host[:port]/path: never the user info or the query string, where a token may sit."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def webhook_check(status: int | None, body: object, error: str | None, where: str,
                  controller: str | None = None) -> Check:
    """What the webhook's answer to the probe (an authenticated notification for a dispatch id no row can have)
    means. ``status`` None: no answer, ``error`` says why. ``controller``: the probe carried that controller's own
    webhook_secret and a build URL under it (the row is "webhook NAME"); None: WEBHOOK_SECRET."""
    name = f"webhook {controller}" if controller else "webhook"
    if status is None:
        return Check(name, FAIL, f"no answer from {where}: {error}",
                     "start the webhook (`jenkins-dispatch serve`, or deploy the stack), or correct --webhook-url")
    outcome = body.get("outcome") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    said = f": {message}" if isinstance(message, str) and message else ""
    secret = f"controller {controller}'s webhook_secret" if controller else "the secret"
    if status == 404 and outcome == "unknown":
        return Check(name, PASS, f"{where} took {secret} and read the database (404 unknown dispatch id, "
                                 "as expected for the probe)")
    if status == 401 and controller:
        return Check(name, FAIL, f"{where} refused {secret} for a build of {controller} (HTTP 401{said})",
                     f"give the webhook and this command the same webhook_secret for {controller} in "
                     "JENKINS_CONTROLLERS (and that controller's notification URL the same token)")
    if status == 401:
        return Check(name, FAIL, f"{where} refused WEBHOOK_SECRET (HTTP 401)",
                     "give the webhook and this command the same WEBHOOK_SECRET (and Jenkins's notification URL "
                     "the same token)")
    if status == 404:
        return Check(name, FAIL, f"nothing at {where} takes notifications (HTTP 404{said})",
                     "the webhook's URL ends in /jenkins/notify (serve: http://HOST:PORT/jenkins/notify; AWS: the "
                     "stack's WebhookUrl output)")
    if status == 503:
        return Check(name, FAIL, f"{where} is up but cannot work (HTTP 503{said})",
                     "read the webhook's log: its database is unreachable or not migrated, or its settings are "
                     "wrong (WEBHOOK_SECRET unset there)")
    return Check(name, FAIL, f"{where} answered the probe with HTTP {status}{said}",
                 "check that --webhook-url is jenkins-dispatch's webhook (POST /jenkins/notify)")


def probe_notification(dispatch_id: str, controller_url: str | None = None) -> dict:
    """The probe's body: a well-formed QUEUED notification whose DISPATCH_ID no row can carry; with
    ``controller_url``, its build's full URL is under that controller (whose secret the webhook then wants)."""
    build: dict[str, Any] = {"phase": "QUEUED", "queue_id": 1, "parameters": {DISPATCH_ID_PARAMETER: dispatch_id}}
    if controller_url:
        build["full_url"] = f"{controller_url.rstrip('/')}/job/{PROBE_JOB}/1/"
    return {"name": PROBE_JOB, "url": f"job/{PROBE_JOB}/", "build": build}


# --------------------------------------------------------------------------- rendering


def render(checks: Sequence[Check]) -> str:
    """The report for people: CHECK, RESULT, DETAIL columns, a `fix:` line under each failure, and the verdict
    when every check passes (a failure's verdict is ``failure_line``, which the command prints on stderr)."""
    name_width = max([len("CHECK"), *(len(c.name) for c in checks)])
    result_width = len("RESULT")
    lines = [f"{'CHECK'.ljust(name_width)}  {'RESULT'.ljust(result_width)}  DETAIL"]
    for check in checks:
        result = check.status.upper() if check.status == FAIL else check.status
        lines.append(f"{check.name.ljust(name_width)}  {result.ljust(result_width)}  {check.detail}")
        if check.status == FAIL and check.fix:
            lines.append(f"{''.ljust(name_width)}  {''.ljust(result_width)}  fix: {check.fix}")
    if healthy(checks):
        passed = sum(c.status == PASS for c in checks)
        skipped = sum(c.status == SKIP for c in checks)
        lines += ["", f"all {passed} checks pass" + (f" ({skipped} skipped)" if skipped else "")]
    else:
        lines.append("")  # the verdict of a failure is the command's one line on stderr (``failure_line``), not here too
    return "\n".join(lines)


def failure_line(checks: Sequence[Check]) -> str:
    """The verdict of a run with failures, said once: how many of the checks failed, and which."""
    failed = [c.name for c in checks if c.status == FAIL]
    return f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}"


# --------------------------------------------------------------------------- the checks, with their I/O


@dataclass
class _Findings:
    """What one group of checks learnt that another needs."""

    checks: list[Check] = field(default_factory=list)
    waiting: list[tuple[str, int]] | None = None  # job names waiting and their row counts; None: unknown
    waiting_total: int = 0
    waiting_unknown_because: str = ""
    waiting_read_failed: Check | None = None  # the queue could not be read although the database answers
    scheduled: list[tuple[str, str]] = field(default_factory=list)  # (job name, its schedules' names)
    # Unfinished rows per controller they name (controller, pending, in_flight); None: not read.
    per_controller: list[tuple[str, int, int]] | None = None


def _settings_check(env: Mapping[str, str] | None) -> Check:
    try:
        load_tuning(env)
    except ConfigError as exc:
        return Check("settings", FAIL, str(exc), "correct the variable named, or unset it to use its default")
    return Check("settings", PASS, "BATCH_SIZE, LEASE_SECONDS and the other tuning settings are valid")


def _database_checks(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None, options: DoctorOptions) -> _Findings:
    from ..store.db import open_database
    from ..store.introspection import Introspection
    from ..store.migrations import migration_files
    from ..store.reports import Reports

    found = _Findings()
    dependent = ("schema", "oldest transaction")
    try:
        settings = load_database_settings(env, fetch_secret)
    except ConfigError as exc:
        found.checks.append(Check("database", FAIL, str(exc),
                                  "set DATABASE_URL=postgresql://USER:PASSWORD@HOST:PORT/DB (or mysql://…; on AWS: "
                                  "DB_SECRET_ARN)"))
        found.checks += [_skip(n, "no database configured") for n in dependent]
        found.waiting_unknown_because = "no database configured"
        return found
    db = open_database(settings, application_name="jenkins-dispatch-doctor")
    try:
        queue = Introspection(db)
        try:
            who = queue.server_identity()
        except DispatchError as exc:
            found.checks.append(database_unreachable_check(str(exc)))
            found.checks += [_skip(n, "database unreachable") for n in dependent]
            found.waiting_unknown_because = "database unreachable"
            return found
        found.checks.append(Check("database", PASS, f"{settings.describe()} as {who['user_name']}, "
                                                    f"{db.server_label(str(who['server_version']))}"))
        try:
            applied: dict[int, str] | None = queue.applied_migrations()
        except SchemaMissing:
            applied = None
        schema = schema_check(applied, [(version, name) for version, name, _ in migration_files(db.dialect)])
        found.checks.append(schema)
        found.checks.append(_guarded("oldest transaction", lambda: transaction_check(
            queue.oldest_transaction(), options.max_transaction_age_seconds, db.long_transaction_help)))
        if applied is None:
            found.waiting_unknown_because = "the schema is not applied"
            return found
        try:
            cutover = cutover_check(queue.cutover_window())
        except DispatchError:  # a schema from before the cutover migration: the schema row says to migrate
            cutover = None
        if cutover is not None:
            found.checks.append(cutover)
        from ..store.schedules import Schedules

        with suppress(DispatchError):  # a schema from before schedules: the schema row says to migrate
            found.scheduled = [(r["job_name"], r["schedules"]) for r in Schedules(db).scheduled_job_names()]
        with suppress(DispatchError):  # a read that fails here leaves the row out; the others say why
            found.per_controller = [(r["controller"], int(r["pending"]), int(r["in_flight"]))
                                    for r in Reports(db).stats_per_controller()]
        try:
            rows = queue.waiting_job_names(options.max_jobs_checked)
        except DispatchError as exc:
            found.waiting_read_failed = Check("queued jobs", FAIL, f"cannot read the job names waiting: {exc}",
                                              "run doctor again; if it persists, read the database server's log")
            return found
        found.waiting = [(r["job_name"], int(r["waiting"])) for r in rows]
        found.waiting_total = int(rows[0]["job_names"]) if rows else 0
        return found
    finally:
        db.close()


def _guarded(name: str, run: Callable[[], Check]) -> Check:
    """A check whose database read may still fail after the session opened (a timeout, a lost session)."""
    try:
        return run()
    except DispatchError as exc:
        return Check(name, FAIL, str(exc), "run doctor again; if it persists, read the database server's log")


def _jenkins_checks(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None, found: _Findings) -> list[Check]:
    """The default controller's rows (reach, credentials, the jobs waiting and scheduled), then the reach and
    credentials of every other configured controller, each row named for its controller."""
    try:
        default = load_jenkins_settings(env, fetch_secret)
    except ConfigError:
        default = None  # the default controller's row says why
    try:
        controllers = load_controllers(env, fetch_secret, default=default)
    except ConfigError as exc:
        return [*_default_jenkins_checks(env, fetch_secret, found, None),
                Check("controllers", FAIL, str(exc).replace("\n", "; "),
                      "correct JENKINS_CONTROLLERS (docs/controllers.md, \"Configure them\")")]
    first = next((c for c in controllers if c.name == DEFAULT_CONTROLLER), None) if default is None else None
    checks = _default_jenkins_checks(env, fetch_secret, found, first)
    for controller in controllers:
        if controller.name != DEFAULT_CONTROLLER:
            checks += controller_checks(controller)
    configured = {c.name for c in controllers} | ({default.name} if default else set())
    if found.per_controller is not None and configured:
        checks.append(row_controllers_check(found.per_controller, configured))
    return checks


def row_controllers_check(per_controller: Sequence[tuple[str, int, int]], configured: set[str]) -> Check:
    """Whether every unfinished row names a configured controller (``per_controller``: each named controller's
    pending and in-flight rows); else what each missing one's rows go through, and the way out."""
    missing = [(name, pending, in_flight) for name, pending, in_flight in per_controller
               if name not in configured and (pending or in_flight)]
    if not missing:
        return Check("row controllers", PASS, "every unfinished row names a configured controller")
    detail = "; ".join(not_configured_text(name, in_flight=in_flight, pending=pending)
                       for name, pending, in_flight in missing)
    names = ", ".join(name for name, _, _ in missing)
    return Check("row controllers", FAIL, detail,
                 f"configure {names} again (JENKINS_CONTROLLERS), or cancel its rows "
                 f"(`jenkins-dispatch cancel --controller {missing[0][0]} --status processing --yes`)")


def reach_and_credentials(client: JenkinsClient, user: str, url: str) -> tuple[Check, Check]:
    """The "jenkins" (reachable) and "credentials" rows from one whoAmI of ``client``."""
    try:
        return jenkins_checks(client.who_am_i(), user, display_url(url))
    except JenkinsError as exc:
        return (Check("jenkins", FAIL, str(exc), JENKINS_UNREACHABLE_FIX),
                _skip("credentials", "Jenkins unreachable"))


def controller_checks(controller: JenkinsSettings) -> list[Check]:
    """A controller's "jenkins NAME" (reachable) and "credentials NAME" rows, asked of its own Jenkins."""
    from ..jenkins.client import jenkins_client

    with jenkins_client(controller) as client:
        reach, credentials = reach_and_credentials(client, controller.user, controller.url)
    return [replace(check, name=f"{check.name} {controller.name}",
                    fix=check.fix and check.fix.replace("JENKINS_URL", f"the url of {controller.name} in "
                                                                       "JENKINS_CONTROLLERS"))
            for check in (reach, credentials)]


def _default_jenkins_checks(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None, found: _Findings,
                            defined_in_controllers: JenkinsSettings | None) -> list[Check]:
    from ..jenkins.client import jenkins_client

    checks: list[Check] = []
    try:
        settings = defined_in_controllers or load_jenkins_settings(env, fetch_secret)
    except ConfigError as exc:
        settings, problem = None, str(exc)
    else:
        problem = ("Jenkins is not configured: JENKINS_URL, JENKINS_USER and JENKINS_API_TOKEN are unset "
                   "(nor JENKINS_SECRET_ARN)")
    if settings is None:
        checks.append(Check("jenkins", FAIL, problem, "set JENKINS_URL, JENKINS_USER and JENKINS_API_TOKEN "
                                                      "(on AWS: JENKINS_SECRET_ARN)"))
        checks.append(_skip("credentials", "Jenkins is not configured"))
        checks.append(_queued_row(found, "Jenkins is not configured"))
        return checks
    with jenkins_client(settings) as client:
        reach, credentials = reach_and_credentials(client, settings.user, settings.url)
        checks += [reach, credentials]
        if reach.status != PASS or credentials.status != PASS:
            checks.append(_queued_row(found, "Jenkins unreachable" if reach.status != PASS
                                      else "Jenkins rejected the credentials"))
            return checks
        if found.waiting is None:
            checks.append(_queued_row(found, "the queue was not read"))
            return checks
        problems: list[Check] = []
        try:
            for job_name, waiting in found.waiting:
                info = None if job_path_error(job_name) else client.job_info(job_name)
                job_problem = job_check(job_name, waiting, info, settings.user)
                if job_problem is not None:
                    problems.append(job_problem)
        except JenkinsError as exc:
            checks.append(Check("queued jobs", FAIL, f"Jenkins failed while the jobs were read: {exc}",
                                "run doctor again; if it persists, see Jenkins's log"))
            return checks + problems
        checks.append(queued_jobs_summary(len(found.waiting), found.waiting_total, len(problems)))
        return checks + problems + _scheduled_checks(client, found, settings.user)


def _scheduled_checks(client: JenkinsClient, found: _Findings, user: str) -> list[Check]:
    """Every job a schedule enqueues, asked of Jenkins (nothing when there is no schedule)."""
    if not found.scheduled:
        return []
    problems: list[Check] = []
    try:
        for job_name, schedules in found.scheduled:
            info = None if job_path_error(job_name) else client.job_info(job_name)
            problem = scheduled_job_check(job_name, schedules, info, user)
            if problem is not None:
                problems.append(problem)
    except JenkinsError as exc:
        return [Check("scheduled jobs", FAIL, f"Jenkins failed while the jobs were read: {exc}",
                      "run doctor again; if it persists, see Jenkins's log")]
    return [scheduled_jobs_summary(len(found.scheduled), len(problems)), *problems]


def _queued_row(found: _Findings, because: str) -> Check:
    """The "queued jobs" row when the jobs cannot be checked: the queue's read failure, else a skip saying why."""
    if found.waiting_read_failed is not None:
        return found.waiting_read_failed
    return _skip("queued jobs", found.waiting_unknown_because or because)


def _webhook_checks(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None, options: DoctorOptions) -> list[Check]:
    try:
        secret = load_webhook_secret(env, fetch_secret)
    except ConfigError as exc:
        secret, problem = None, str(exc)
    else:
        problem = "neither WEBHOOK_SECRET nor WEBHOOK_SECRET_ARN is set: the webhook answers 503 to every notification"
    if secret is None:
        checks = [Check("webhook secret", FAIL, problem,
                        "set WEBHOOK_SECRET to a long random string (on AWS: WEBHOOK_SECRET_ARN), the same for the "
                        "webhook, this command and the token in Jenkins's notification URL")]
        if options.webhook_url:
            checks.append(_skip("webhook", "no webhook secret to probe with"))
        else:
            checks.append(_skip("webhook", "no --webhook-url given"))
        return checks
    checks = [Check("webhook secret", PASS, "set")]
    if not options.webhook_url:
        return checks + [_skip("webhook", "no --webhook-url given")]
    where = display_url(options.webhook_url)
    status, body, error = _probe_webhook(options.webhook_url, secret)
    checks.append(webhook_check(status, body, error, where))
    # Each controller with a secret of its own: the same probe with that secret, for a build of that controller.
    for controller in _controllers_with_own_secret(env, fetch_secret):
        status, body, error = _probe_webhook(options.webhook_url, controller.webhook_secret or "", controller.url)
        checks.append(webhook_check(status, body, error, where, controller.name))
    return checks


def _controllers_with_own_secret(env: Mapping[str, str] | None,
                                 fetch_secret: SecretFetcher | None) -> list[JenkinsSettings]:
    """The configured controllers that have a webhook_secret (none when JENKINS_CONTROLLERS cannot be read: the
    "controllers" row says why)."""
    try:
        default = load_jenkins_settings(env, fetch_secret)
    except ConfigError:
        default = None
    try:
        return [c for c in load_controllers(env, fetch_secret, default=default) if c.webhook_secret]
    except ConfigError:
        return []


def _probe_webhook(url: str, secret: str, controller_url: str | None = None) -> tuple[int | None, object, str | None]:
    """POST the probe; (status, JSON body or None, None) or (None, None, why no answer came)."""
    import requests

    dispatch_id = PROBE_DISPATCH_PREFIX + secrets.token_hex(8)
    with requests.Session() as session:
        session.trust_env = False  # a .netrc must not add a second token, nor a proxy read it
        try:
            response = session.post(
                url, data=json.dumps(probe_notification(dispatch_id, controller_url)),
                headers={"Content-Type": "application/json", "X-Jenkins-Dispatch-Token": secret},
                timeout=WEBHOOK_PROBE_TIMEOUT_SECONDS, allow_redirects=False,
            )
        except requests.exceptions.ConnectionError as exc:
            # requests's message repeats the URL, query string and all: say only what kind of failure it was.
            refused = "refused" in str(exc).lower()
            return None, None, "connection refused" if refused else f"cannot connect ({type(exc).__name__})"
        except requests.exceptions.RequestException as exc:
            return None, None, type(exc).__name__
        try:
            body = response.json()
        except ValueError:
            body = None
        return response.status_code, body, None


def run_checks(options: DoctorOptions, env: Mapping[str, str] | None = None,
               fetch_secret: SecretFetcher | None = None) -> list[Check]:
    """Every check, in order: settings; database, schema, oldest transaction; Jenkins, credentials, the jobs
    waiting in the queue; the webhook's secret and (with ``options.webhook_url``) the webhook itself."""
    checks = [_settings_check(env)]
    found = _database_checks(env, fetch_secret, options)
    checks += found.checks
    checks += _jenkins_checks(env, fetch_secret, found)
    checks += _webhook_checks(env, fetch_secret, options)
    return checks
