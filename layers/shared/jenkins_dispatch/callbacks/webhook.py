"""The webhook: one Jenkins Notification-plugin callback in, one fenced transition of one row out.

Order of work, each step able to end the request:
  authenticate (exactly one token; no database before this) → read and check the body → map the phase
  to a transition → apply it, fenced on dispatch id, status and the job the notification names, in ONE
  statement when the dispatch id names its row → only if that changed nothing, look the row up to tell
  another job's build (a downstream build that inherited the DISPATCH_ID: 200 ignored) from a duplicate
  (200), a stale (409) or an unknown (404) dispatch id.

The Notification plugin ignores our status code and never retries on one, so answers are for people
and logs; correctness comes from the fences, and a lost callback is covered by the reconciler.

Entry points: ``handle_http_event(event, context)`` for the Lambda handler (functions/webhook/app.py) and
for `serve` (which builds the event with ``http_api_event``), and ``process_notification`` — the core, with
its queue passed in — for tests and benchmarks.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types

from .. import runtime
from ..errors import ConfigError, DatabaseBusy, DatabaseUnavailable, InvalidInput, SchemaMissing
from ..observability import MetricUnit, logger, metrics
from ..store.db import DatabaseError
from ..store.queue import FINAL_STATUSES, Queue
from .notifications import (
    Notification,
    RejectedNotification,
    Transition,
    authentication_failure,
    names_job,
    parse_notification,
    redact_query,
    request_body,
    row_id_hint,
    transition_for,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

NOTIFY_PATH = "/jenkins/notify"
OTHER_METHODS = ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

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


# --------------------------------------------------------------------------- the core


def process_notification(
    event: Mapping[str, Any], *, secret: str, queue: Queue, unstable_is_success: bool = True
) -> WebhookAnswer:
    """Authenticate, parse, map and apply one notification. Raises only for an unusable database."""
    refused = authentication_failure(event, secret)
    if refused is not None:
        return WebhookAnswer(401, "unauthorised", refused)
    try:
        notification = parse_notification(request_body(event))
        transition = transition_for(notification, unstable_is_success=unstable_is_success)
    except RejectedNotification as exc:
        return WebhookAnswer(exc.http_status, "too_large" if exc.http_status == 413 else "malformed", str(exc))
    if notification.dispatch_id is not None:
        return _apply_by_dispatch_id(queue, notification, transition)
    return _apply_by_queue_id(queue, notification, transition)


IGNORED_MESSAGE = "ignored: not the dispatched job"
NAMES_NO_JOB_MESSAGE = (
    "the notification names no job: send the job's url (or build.url) and name, as the Notification plugin "
    "does, so a downstream build that inherited DISPATCH_ID can be told from the dispatched one"
)


def _apply(queue: Queue, job_id: int, dispatch_id: str, t: Transition, n: Notification) -> bool:
    """One fenced statement (the row's job must be the one ``n`` names); True only if the row changed."""
    job = dict(job_path=n.job_path, job_leaf=None if n.job_path else n.job_name, only_build=t.build_number)
    if t.settles:
        settled = queue.settle(
            job_id, dispatch_id, t.final_status, result=t.result, error=t.error,
            build_number=t.build_number, build_url=t.build_url, actor="webhook", **job,
        )
        if settled:
            metrics.add_metric(name="JobsCompleted" if t.final_status == "completed" else "JobsFailed",
                               unit=MetricUnit.Count, value=1)
        return settled
    return queue.record_progress(
        job_id, dispatch_id, build_number=t.build_number, build_url=t.build_url, queue_id=t.queue_id,
        started=t.started, event=t.event, actor="webhook", detail=t.describe(), **job,
    )


def _apply_by_dispatch_id(queue: Queue, n: Notification, t: Transition) -> WebhookAnswer:
    dispatch_id = n.dispatch_id
    answer = dict(dispatch_id=dispatch_id, phase=n.phase, build_number=n.build_number, job=n.job)
    if n.job is None:
        return WebhookAnswer(400, "malformed", NAMES_NO_JOB_MESSAGE, **answer)
    hinted_id = row_id_hint(dispatch_id)
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
    if row["status"] == "processing" and row["id"] != hinted_id and _apply(queue, row["id"], dispatch_id, t, n):
        return WebhookAnswer(200, "applied", f"job {row['id']}: {t.describe()} recorded", job_id=row["id"], **answer)
    return _unchanged(row, t, answer)


def _apply_by_queue_id(queue: Queue, n: Notification, t: Transition) -> WebhookAnswer:
    answer = dict(phase=n.phase, build_number=n.build_number, job=n.job)
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
    answer["dispatch_id"] = row["dispatch_id"]
    if row["status"] == "processing" and _apply(queue, row["id"], row["dispatch_id"], t, n):
        return WebhookAnswer(200, "applied", f"job {row['id']}: {t.describe()} recorded", job_id=row["id"], **answer)
    return _unchanged(row, t, answer)


def _unchanged(row: Mapping[str, Any], t: Transition, answer: dict) -> WebhookAnswer:
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


# --------------------------------------------------------------------------- HTTP routing

app = APIGatewayHttpResolver()

# Powertools keeps the current event on a class attribute, so resolving is one request at a time per
# process. Lambda runs one invocation at a time anyway; `serve` threads queue up here.
_resolve_lock = threading.Lock()


def _json_response(status_code: int, body: dict, headers: dict | None = None) -> Response:
    return Response(status_code=status_code, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


@app.post(NOTIFY_PATH)
def _notify() -> Response:
    event = app.current_event.raw_event
    started = time.perf_counter()
    try:
        settings = runtime.settings()
        with runtime.session() as db:
            answer = process_notification(
                event,
                secret=settings.require_webhook_secret(),
                queue=Queue(db, settings.lease_seconds),
                unstable_is_success=settings.unstable_is_success,
            )
    except ConfigError as exc:
        # The caller may not be authenticated yet: the detail goes to the logs, not into the answer.
        logger.error("webhook configuration error", extra={"reason": str(exc)})
        answer = WebhookAnswer(503, "unavailable", "the webhook is misconfigured; its logs say how")
    except (DatabaseUnavailable, DatabaseBusy, SchemaMissing) as exc:
        answer = WebhookAnswer(503, "unavailable", str(exc).splitlines()[0])
    except DatabaseError as exc:
        answer = WebhookAnswer(503, "unavailable", f"the database refused the update: {exc}")
    except InvalidInput as exc:  # a value the database's checks refused, so nothing was changed
        answer = WebhookAnswer(400, "malformed", str(exc))
    _record(answer, event, time.perf_counter() - started)
    return _json_response(answer.status_code, answer.body())


@app.route(NOTIFY_PATH, method=OTHER_METHODS)
def _wrong_method() -> Response:
    answer = WebhookAnswer(405, "no_route", f"use POST {NOTIFY_PATH}")
    _record(answer, app.current_event.raw_event, 0.0)
    return _json_response(405, answer.body(), headers={"Allow": "POST"})


@app.not_found
def _no_route(_exc: Exception) -> Response:
    answer = WebhookAnswer(404, "no_route", f"no such endpoint: Jenkins notifications go to POST {NOTIFY_PATH}")
    _record(answer, app.current_event.raw_event, 0.0)
    return _json_response(404, answer.body())


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    # A bug, not an input problem: the caller gets one line, the log gets the stack trace.
    logger.exception("webhook failed unexpectedly", extra={"error_type": type(exc).__name__})
    _count("internal_error")
    return _json_response(500, {"outcome": "internal_error", "message": "internal error; see the webhook's logs"})


def _record(answer: WebhookAnswer, event: Mapping[str, Any], seconds: float) -> None:
    """One log line and the metrics for one request; never the token, never the raw query string."""
    metric_name, level = OUTCOMES[answer.outcome]
    http = (event.get("requestContext") or {}).get("http") or {}
    latency_ms = round(seconds * 1000, 3)
    fields = {
        "outcome": answer.outcome,
        "status_code": answer.status_code,
        "job_id": answer.job_id,
        "dispatch_id": answer.dispatch_id,
        "phase": answer.phase,
        "build_number": answer.build_number,
        "job": answer.job[:200] if answer.job else None,
        "latency_ms": latency_ms,
        "method": http.get("method"),
        "path": event.get("rawPath"),
        "query": redact_query(event.get("rawQueryString")),
    }
    if answer.status_code != 200:
        fields["reason"] = answer.message
    getattr(logger, level)("jenkins notification", extra=fields)
    _count(answer.outcome, latency_ms if answer.outcome in ("applied", "duplicate", "already_final") else None)


def _count(outcome: str, latency_ms: float | None = None) -> None:
    metrics.add_metric(name=OUTCOMES[outcome][0], unit=MetricUnit.Count, value=1)
    if latency_ms is not None:
        metrics.add_metric(name="NotificationLatency", unit=MetricUnit.Milliseconds, value=latency_ms)


def _routable(event: Any) -> dict | None:
    """A copy of the event Powertools can route, whatever a caller put in it (None: not an event)."""
    if not isinstance(event, Mapping):
        return None
    event = dict(event)
    context = event.get("requestContext")
    context = dict(context) if isinstance(context, Mapping) else {}
    http = context.get("http")
    http = dict(http) if isinstance(http, Mapping) else {}
    method = http.get("method")
    http["method"] = method.upper() if isinstance(method, str) and method else "POST"
    raw_path = event.get("rawPath")
    raw_path = raw_path if isinstance(raw_path, str) and raw_path.startswith("/") else "/"
    if len(raw_path) > 1:
        raw_path = raw_path.rstrip("/") or "/"
    # Powertools cuts '/<stage>' off rawPath for a named stage; only let it when rawPath really has it.
    stage = context.get("stage")
    if not isinstance(stage, str) or not (raw_path == f"/{stage}" or raw_path.startswith(f"/{stage}/")):
        stage = "$default"
    context.update(http=http, stage=stage)
    headers = event.get("headers")
    event.update(
        requestContext=context,
        rawPath=raw_path,
        headers={k: v for k, v in headers.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(headers, Mapping) else {},
    )
    return event


def handle_http_event(event: Any, context: LambdaContext | None = None) -> dict[str, Any]:
    """Answer one HTTP API (payload 2.0) or Function URL event: a response dict with statusCode, body.

    Metrics are added, not flushed: the caller flushes them (the Lambda handler's decorator, `serve` after
    each request)."""
    routable = _routable(event)
    if routable is None:
        return {"statusCode": 400, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                "body": '{"outcome":"malformed","message":"the event is not an HTTP API (payload 2.0) event"}',
                "isBase64Encoded": False}
    with _resolve_lock:
        return app.resolve(routable, context)


def http_api_event(
    method: str, raw_path: str, raw_query: str = "", headers: Mapping[str, str] | None = None, body: bytes = b""
) -> dict[str, Any]:
    """An HTTP API payload-2.0 event for a plain HTTP request (what `serve` hands to ``handle_http_event``)."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": {"http": {"method": method.upper(), "path": raw_path}, "stage": "$default"},
        "body": base64.b64encode(body).decode("ascii"),
        "isBase64Encoded": True,
    }
