"""The webhook: one Jenkins Notification-plugin callback in, one fenced transition of one row out.

Order of work, each step able to end the request:
  authenticate (exactly one token) → read and check the body → map the phase to a transition — none of
  which needs the database — → borrow a session → apply the transition, fenced on dispatch id, status and
  the job the notification names, in ONE statement when the dispatch id names its row → only if that changed
  nothing, look the row up to tell another job's build (a downstream build that inherited the DISPATCH_ID:
  200 ignored) from a duplicate (200), a stale (409) or an unknown (404) dispatch id.

The Notification plugin ignores our status code and never retries on one, so answers are for people
and logs; correctness comes from the fences, and a lost callback is covered by the reconciler.

The core is transport-free: a ``Callback`` (method, path, query, headers, a body reader) in, a
``WebhookAnswer`` out, through ``answer`` (routing: the notify path, 405, 404), which never raises. Two thin
adapters carry it: `serve`'s WSGI app (serve.py) calls ``answer`` straight from its HTTP threads, many at
once; the Lambda handler's Powertools resolver (``http_api.py``) calls ``notify`` / ``wrong_method`` /
``no_route`` from its routes. ``process`` is the core with its queue passed in, for tests and benchmarks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .. import runtime
from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import ConfigError, DatabaseBusy, DatabaseUnavailable, InvalidInput, SchemaMissing
from ..jenkins.jobs import controller_of_url
from ..observability import MetricUnit, logger, metrics
from ..store.db import DatabaseError
from ..store.dispatch_ids import row_id_hint
from ..store.queue import FINAL_STATUSES
from ..store.webhook import WebhookStore
from .notifications import (
    Notification,
    RejectedNotification,
    Transition,
    checked_body,
    names_job,
    parse_notification,
    redact_query,
    token_failure,
    tokens_in,
    transition_for,
)

NOTIFY_PATH = "/jenkins/notify"

# outcome → (metric counted, log level)
OUTCOMES = {
    "applied": ("NotificationsAccepted", "info"),
    "duplicate": ("NotificationsDuplicate", "info"),
    "already_final": ("NotificationsDuplicate", "info"),
    "ignored": ("NotificationsIgnored", "info"),
    "stale": ("NotificationsStale", "warning"),
    "unknown": ("NotificationsUnknown", "warning"),
    "unauthorised": ("NotificationsRejectedAuth", "warning"),
    "malformed": ("NotificationsMalformed", "warning"),
    "too_large": ("NotificationsMalformed", "warning"),
    "unavailable": ("WebhookUnavailable", "error"),
    "no_route": ("WebhookNoRoute", "warning"),
    "internal_error": ("WebhookInternalError", "error"),
}


def _no_body() -> bytes:
    return checked_body(b"")


@dataclass(frozen=True)
class Callback:
    """One HTTP request to the webhook, as any transport hands it over (nothing of API Gateway or WSGI).

    ``body`` reads the body when the request is authenticated, and checks it: the bytes (at most 256 KiB),
    or RejectedNotification (400, 413)."""

    method: str
    path: str
    query: str = ""  # the raw query string
    headers: Mapping[str, str] = field(default_factory=dict)  # any case
    body: Callable[[], bytes] = _no_body
    query_parameters: Mapping[str, Any] | None = None  # API Gateway's parsed copy, read only without a query

    @classmethod
    def of(cls, method: str, path: str, query: str = "", headers: Mapping[str, str] | None = None,
           body: bytes = b"") -> Callback:
        """A plain request with its body in hand."""
        return cls(method.upper(), path, query, dict(headers or {}), lambda: checked_body(body))

    def tokens(self) -> list[str]:
        """Every candidate secret the request carries (``tokens_in``)."""
        return tokens_in(self.query, self.headers, self.query_parameters)

    def refusal(self, secret: str | Sequence[str]) -> str | None:
        """Why the request is not authenticated (one line), or None when it carries exactly the secret (one of
        the secrets)."""
        return token_failure(self.tokens(), secret)


@dataclass(frozen=True)
class WebhookSecrets:
    """The shared secret (WEBHOOK_SECRET) and the controllers' own (``own``: name → secret, from their
    ``webhook_secret``), with every controller's URL (name → base URL) to tell which one a build is of."""

    shared: str
    own: Mapping[str, str] = field(default_factory=dict)
    urls: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> WebhookSecrets:
        """The secrets as configured (ConfigError without the shared one)."""
        controllers = settings.controllers_by_name()
        return cls(settings.require_webhook_secret(),
                   {name: c.webhook_secret for name, c in controllers.items() if c.webhook_secret},
                   {name: c.url for name, c in controllers.items()})

    def every(self) -> list[str]:
        """The secrets a request may carry before its body is read."""
        return [self.shared, *self.own.values()]

    def refusal_for_build(self, candidates: list[str], build_url: str | None) -> str | None:
        """Why the token is not the one of the build's controller: its own secret if it has one, else the shared
        one (a relative build URL, or one under no controller, needs the shared one). None when it is."""
        if not self.own:
            return None  # every secret accepted is the shared one
        owner = controller_of_url(build_url, self.urls)
        if owner is not None and owner in self.own:
            if token_failure(candidates, self.own[owner]) is None:
                return None
            return (f"wrong token for this build: controller {owner!r} has a webhook secret of its own "
                    "(webhook_secret in JENKINS_CONTROLLERS)")
        if token_failure(candidates, self.shared) is None:
            return None
        whose = f"controller {owner!r}" if owner else "a build of no controller with a secret of its own"
        return f"wrong token for this build: {whose} uses the shared WEBHOOK_SECRET"


def may_need_session(method: str, path: str, query: str, headers: Mapping[str, str],
                     secret: str | Sequence[str] | None) -> bool:
    """Whether a request could borrow a database session: a POST to the notify path with exactly the right
    token (one of the secrets). Everything else is answered without one (`serve` gives the two kinds different
    threads)."""
    return (method.upper() == "POST" and _route(path) == NOTIFY_PATH and bool(secret)
            and token_failure(tokens_in(query, headers), secret or "") is None)


@dataclass(frozen=True)
class WebhookAnswer:
    """What the webhook answers one callback: HTTP status, outcome, message and the row it touched."""
    status_code: int
    outcome: str
    message: str
    job_id: int | None = None
    dispatch_id: str | None = None
    phase: str | None = None
    build_number: int | None = None
    job: str | None = None  # the job the notification names (logged, not answered)

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer, without the fields that are not known."""
        body: dict[str, Any] = {"outcome": self.outcome, "message": self.message}
        for key in ("job_id", "dispatch_id", "phase"):
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        return body

    def headers(self) -> dict[str, str]:
        """The answer's headers besides its JSON content type (405 names the method to use)."""
        return {"Allow": "POST"} if self.status_code == 405 else {}


# --------------------------------------------------------------------------- the core


def check(callback: Callback, *, secret: str | WebhookSecrets,
          unstable_is_success: bool = True) -> WebhookAnswer | tuple[Notification, Transition]:
    """Authenticate, read, parse and map one notification, without the database: the refusal to answer
    (401, 400, 413), or the notification and the transition it asks for. With controllers that have a webhook
    secret of their own, a token that is one of the secrets has the body read; the notification is then refused
    (401) unless it is its build's controller's secret (``WebhookSecrets.refusal_for_build``)."""
    secrets = secret if isinstance(secret, WebhookSecrets) else WebhookSecrets(secret)
    candidates = callback.tokens()
    refused = token_failure(candidates, secrets.every())
    if refused is not None:
        return WebhookAnswer(401, "unauthorised", refused)
    try:
        notification = parse_notification(callback.body())
        transition = transition_for(notification, unstable_is_success=unstable_is_success)
    except RejectedNotification as exc:
        return WebhookAnswer(exc.http_status, "too_large" if exc.http_status == 413 else "malformed", str(exc))
    wrong = secrets.refusal_for_build(candidates, notification.build_url)
    if wrong is not None:
        return WebhookAnswer(401, "unauthorised", wrong)
    return notification, transition


def apply(queue: WebhookStore, notification: Notification, transition: Transition,
          controllers: Mapping[str, str] | None = None) -> WebhookAnswer:
    """Apply a checked notification's transition to its row. Raises only for an unusable database.
    ``controllers`` (name → base URL), when several are configured: the build's URL must belong to the row's
    controller, else the notification is ignored (200), as a downstream build's is."""
    if notification.dispatch_id is not None:
        return _apply_by_dispatch_id(queue, notification, notification.dispatch_id, transition, controllers)
    return _apply_by_queue_id(queue, notification, transition, controllers)


def _other_controller(n: Notification, row: Mapping[str, Any], controllers: Mapping[str, str] | None) -> str | None:
    """Why the notification is not for the row's controller (None: it is, or only one controller is configured)."""
    if not controllers or len(controllers) < 2:
        return None
    owner = controller_of_url(n.build_url, controllers)
    mine = row.get("controller") or DEFAULT_CONTROLLER
    if owner == mine:
        return None
    if owner is None:
        return (f"ignored: the build's URL does not belong to controller {mine!r} (several controllers are "
                "configured: Jenkins must send an absolute build URL, so set its root URL)")
    return f"ignored: the build belongs to controller {owner!r}, job is on controller {mine!r}"


def process(callback: Callback, *, secret: str, queue: WebhookStore, unstable_is_success: bool = True) -> WebhookAnswer:
    """``check`` then ``apply`` on a queue given (tests, benchmarks). Raises only for an unusable database."""
    checked = check(callback, secret=secret, unstable_is_success=unstable_is_success)
    if isinstance(checked, WebhookAnswer):
        return checked
    return apply(queue, *checked)


IGNORED_MESSAGE = "ignored: not the dispatched job"
NAMES_NO_JOB_MESSAGE = (
    "the notification names no job: send the job's url (or build.url) and name, as the Notification plugin "
    "does, so a downstream build that inherited DISPATCH_ID can be told from the dispatched one"
)


class _Fence(TypedDict):
    """What a notification's row must be besides its dispatch: the job the notification names, its build."""
    job_path: str | None
    job_leaf: str | None
    only_build: int | None


class _About(TypedDict, total=False):
    """What every answer to one notification repeats about it (WebhookAnswer's keyword arguments)."""
    dispatch_id: str | None
    phase: str
    build_number: int | None
    job: str | None


def _apply(queue: WebhookStore, job_id: int, dispatch_id: str, t: Transition, n: Notification) -> bool:
    """One fenced statement (the row's job must be the one ``n`` names); True only if the row changed."""
    job = _Fence(job_path=n.job_path, job_leaf=None if n.job_path else n.job_name, only_build=t.build_number)
    if t.final_status is not None:  # t.settles
        settled = queue.settle(
            job_id, dispatch_id, t.final_status, result=t.result, error=t.error,
            build_number=t.build_number, build_url=t.build_url, actor="webhook", **job,
        )
        if settled:
            metrics.add_metric(name="JobsCompleted" if t.final_status == "completed" else "JobsFailed",
                               unit=MetricUnit.Count, value=1)
            metrics.observe_settled(n.job or "unknown", settled.queue_wait_seconds, settled.build_seconds)
        return settled is not None
    return queue.record_progress(
        job_id, dispatch_id, build_number=t.build_number, build_url=t.build_url, queue_id=t.queue_id,
        started=t.started, event=t.event, actor="webhook", detail=t.describe(), **job,
    )


def _apply_by_dispatch_id(queue: WebhookStore, n: Notification, dispatch_id: str, t: Transition,
                          controllers: Mapping[str, str] | None = None) -> WebhookAnswer:
    answer = _About(dispatch_id=dispatch_id, phase=n.phase, build_number=n.build_number, job=n.job)
    if n.job is None:
        return WebhookAnswer(400, "malformed", NAMES_NO_JOB_MESSAGE, **answer)
    # Several controllers: the row is read first (its controller decides), never changed blind by its id hint.
    hinted_id = row_id_hint(dispatch_id) if not controllers or len(controllers) < 2 else None
    if hinted_id is not None and _apply(queue, hinted_id, dispatch_id, t, n):
        return WebhookAnswer(200, "applied", f"job {hinted_id}: {t.describe()} recorded", job_id=hinted_id, **answer)

    row = queue.find_by_dispatch_id(dispatch_id)
    if row is None:
        if queue.was_dispatched(dispatch_id):
            return WebhookAnswer(
                409, "stale",
                "this DISPATCH_ID belongs to an earlier attempt of its job; the job has been dispatched again, "
                "so this notification changes nothing",
                **answer,
            )
        return WebhookAnswer(404, "unknown", "no job was ever dispatched with this DISPATCH_ID", **answer)
    if not names_job(n, row["job_name"]):
        # Another job's build carrying this DISPATCH_ID: a downstream job started with the dispatched
        # build's parameters. 200, so that nobody retries it; the row is not its to change.
        return WebhookAnswer(200, "ignored", IGNORED_MESSAGE, job_id=row["id"], **answer)
    if (elsewhere := _other_controller(n, row, controllers)) is not None:
        return WebhookAnswer(200, "ignored", elsewhere, job_id=row["id"], **answer)
    if row["status"] == "processing" and row["id"] != hinted_id and _apply(queue, row["id"], dispatch_id, t, n):
        return WebhookAnswer(200, "applied", f"job {row['id']}: {t.describe()} recorded", job_id=row["id"], **answer)
    return _unchanged(row, t, answer)


def _apply_by_queue_id(queue: WebhookStore, n: Notification, t: Transition,
                       controllers: Mapping[str, str] | None = None) -> WebhookAnswer:
    answer = _About(phase=n.phase, build_number=n.build_number, job=n.job)
    if n.job_path is None or n.queue_id is None:
        return WebhookAnswer(
            400, "malformed",
            "the build has no DISPATCH_ID parameter and no job url + build.queue_id to find its job by: "
            "dispatch it through jenkins-dispatch (which adds DISPATCH_ID), or send the plugin's full payload",
            **answer,
        )
    row = queue.find_by_queue_id(n.job_path, n.queue_id)
    if row is None:
        return WebhookAnswer(
            404, "unknown",
            f"no job {n.job_path!r} was triggered as Jenkins queue item {n.queue_id} (and the build has no DISPATCH_ID)",
            **answer,
        )
    dispatch_id = answer["dispatch_id"] = row["dispatch_id"]
    if (elsewhere := _other_controller(n, row, controllers)) is not None:
        return WebhookAnswer(200, "ignored", elsewhere, job_id=row["id"], **answer)
    # A processing row always has its dispatch's id (the table's check).
    if row["status"] == "processing" and dispatch_id is not None and _apply(queue, row["id"], dispatch_id, t, n):
        return WebhookAnswer(200, "applied", f"job {row['id']}: {t.describe()} recorded", job_id=row["id"], **answer)
    return _unchanged(row, t, answer)


def _unchanged(row: Mapping[str, Any], t: Transition, answer: _About) -> WebhookAnswer:
    """The fenced transition changed nothing: say why, from the row as it is now."""
    job_id, status = row["id"], row["status"]
    if status == "processing" and None not in (row.get("build_number"), t.build_number) \
            and row["build_number"] != t.build_number:
        # A second build of the same dispatch (a late duplicate the Pipeline guard stops): not the row's.
        return WebhookAnswer(200, "ignored", f"ignored: build #{t.build_number} is not job {job_id}'s build "
                             f"#{row['build_number']}", job_id=job_id, **answer)
    if status == "processing":
        return WebhookAnswer(
            200, "duplicate", f"job {job_id}: {t.describe()} was already recorded", job_id=job_id, **answer
        )
    if status in FINAL_STATUSES:
        return WebhookAnswer(
            200, "already_final", f"job {job_id} is already {status}; a finished job never changes", job_id=job_id,
            **answer,
        )
    return WebhookAnswer(
        409, "stale",
        f"job {job_id} is {status}: the attempt this notification belongs to is no longer in flight",
        job_id=job_id, **answer,
    )


# --------------------------------------------------------------------------- one request, whatever carried it


def _route(path: str) -> str:
    """The path as routed: a trailing slash does not matter."""
    return (path.rstrip("/") or "/") if isinstance(path, str) else "/"


def answer(callback: Callback) -> WebhookAnswer:
    """Answer one request to the webhook (POST to the notify path; 405 for another method there; 404
    elsewhere), logged and counted. Never raises."""
    try:
        if _route(callback.path) != NOTIFY_PATH:
            return no_route(callback)
        if callback.method.upper() != "POST":
            return wrong_method(callback)
        return notify(callback)
    except Exception as exc:  # a bug, not an input problem: one line for the caller, the stack in the log
        return unexpected(exc)


def notify(callback: Callback) -> WebhookAnswer:
    """A POST to the notify path: checked first, then applied on a session borrowed only if it must be."""
    started = time.perf_counter()
    try:
        settings = runtime.settings()
        checked = check(callback, secret=WebhookSecrets.of(settings), unstable_is_success=settings.unstable_is_success)
        if isinstance(checked, WebhookAnswer):
            result = checked
        else:
            with runtime.session() as db:
                result = apply(WebhookStore(db), *checked,
                               controllers={c.name: c.url for c in settings.controllers_by_name().values()})
    except ConfigError as exc:
        # The caller may not be authenticated yet: the detail goes to the logs, not into the answer.
        logger.error("webhook configuration error", extra={"reason": str(exc)})
        result = WebhookAnswer(503, "unavailable", "the webhook is misconfigured; its logs say how")
    except (DatabaseUnavailable, DatabaseBusy, SchemaMissing) as exc:
        result = WebhookAnswer(503, "unavailable", str(exc).splitlines()[0])
    except DatabaseError as exc:
        result = WebhookAnswer(503, "unavailable", f"the database refused the update: {exc}")
    except InvalidInput as exc:  # a value the database's checks refused, so nothing was changed
        result = WebhookAnswer(400, "malformed", str(exc))
    _record(result, callback, time.perf_counter() - started)
    return result


def wrong_method(callback: Callback) -> WebhookAnswer:
    """Another method than POST on the notify path: 405 naming POST."""
    result = WebhookAnswer(405, "no_route", f"use POST {NOTIFY_PATH}")
    _record(result, callback, 0.0)
    return result


def no_route(callback: Callback) -> WebhookAnswer:
    """A path the webhook does not answer: 404 naming the one it does."""
    result = WebhookAnswer(404, "no_route", f"no such endpoint: Jenkins notifications go to POST {NOTIFY_PATH}")
    _record(result, callback, 0.0)
    return result


def unexpected(exc: Exception) -> WebhookAnswer:
    """A bug: the caller gets one line, the log gets the stack trace."""
    logger.exception("webhook failed unexpectedly", extra={"error_type": type(exc).__name__})
    _count("internal_error")
    return WebhookAnswer(500, "internal_error", "internal error; see the webhook's logs")


def _record(result: WebhookAnswer, callback: Callback, seconds: float) -> None:
    """One log line and the metrics for one request; never the token, never the raw query string."""
    metric_name, level = OUTCOMES[result.outcome]
    latency_ms = round(seconds * 1000, 3)
    fields = {
        "outcome": result.outcome,
        "status_code": result.status_code,
        "job_id": result.job_id,
        "dispatch_id": result.dispatch_id,
        "phase": result.phase,
        "build_number": result.build_number,
        "job": result.job[:200] if result.job else None,
        "latency_ms": latency_ms,
        "method": callback.method,
        "path": callback.path,
        "query": redact_query(callback.query),
    }
    if result.status_code != 200:
        fields["reason"] = result.message
    getattr(logger, level)("jenkins notification", extra=fields)
    _count(result.outcome, latency_ms if result.outcome in ("applied", "duplicate", "already_final") else None)


def _count(outcome: str, latency_ms: float | None = None) -> None:
    metrics.add_metric(name=OUTCOMES[outcome][0], unit=MetricUnit.Count, value=1)
    if latency_ms is not None:
        metrics.add_metric(name="NotificationLatency", unit=MetricUnit.Milliseconds, value=latency_ms)
