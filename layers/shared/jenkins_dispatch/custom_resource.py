"""The CloudFormation custom resource that applies the queue schema on every stack create and update.

CloudFormation waits for an answer PUT to the request's pre-signed ``ResponseURL``; without one a stack
hangs. So every path answers exactly once: SUCCESS with what was applied, FAILED with a one-line reason
(never a password), or FAILED shortly before the function would time out. Delete is a no-op: the table
and its jobs belong to the users, not to the stack.

The answer goes to S3 from inside the VPC. Sending it never outlives the function: each attempt gets at
most what is left of the function's time, so even when S3 cannot be reached (no NAT, no S3 gateway
endpoint) the function ends by itself and its log says which route is missing.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from . import runtime
from .config import load_cutover_window
from .store.migrations import migrate

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

PHYSICAL_RESOURCE_ID = "jenkins-dispatch-schema"
RESPONSE_TIMEOUT_SECONDS = 10.0
RESPONSE_ATTEMPTS = 3
MIN_ATTEMPT_SECONDS = 0.2  # less time left than this: no attempt could connect, let alone answer
RETURN_RESERVE_SECONDS = 0.5  # kept to log and return before Lambda's timeout
MAX_REASON_CHARS = 900  # the whole response document must stay under 4 KiB
NO_DEADLINE_MS = 15 * 60 * 1000
NO_ROUTE_FIX = ("the function's subnets need a route to S3: a NAT gateway, or an S3 gateway endpoint on their "
                "route tables (CreateS3GatewayEndpoint=true); until then the stack waits for the resource's "
                "ServiceTimeout")

_URL_CREDENTIALS = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def _one_line(text: str, secrets: tuple[str, ...] = ()) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def _known_secrets() -> tuple[str, ...]:
    """Values that must never appear in a reason, from settings already loaded (never loads them)."""
    settings = runtime.loaded_settings()
    if settings is None:
        return ()
    controllers = settings.controllers_by_name().values()
    return tuple(
        s for s in (settings.database.password, *settings.webhook_secrets(), *(c.api_token for c in controllers))
        if s
    )


def _budget(context: LambdaContext | None) -> tuple[float, float]:
    """(seconds the work may take, seconds until the answer must have been sent): the function's remaining
    time, less room for the answer, less a moment to return."""
    try:
        remaining_ms = context.get_remaining_time_in_millis() if context is not None else NO_DEADLINE_MS
    except AttributeError:  # a context that is not Lambda's (a test's stand-in)
        remaining_ms = NO_DEADLINE_MS
    answer_by = max(0.0, remaining_ms / 1000 - RETURN_RESERVE_SECONDS)
    reserve = min(RESPONSE_TIMEOUT_SECONDS + 2.0, answer_by * 0.3)
    return max(0.0, answer_by - reserve), answer_by


def _where(url: str) -> str:
    """The URL without its query: the signature is a credential, not for the log."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def send_response(event: dict, status: str, reason: str, physical_id: str, data: dict | None = None,
                  deadline: float | None = None) -> bool:
    """PUT the response document to the pre-signed URL, trying until ``deadline`` (time.monotonic()) at the
    latest. Returns whether S3 accepted it."""
    from .observability import logger

    document = {
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
        "NoEcho": False,
        "Data": data or {},
    }
    body = json.dumps(document).encode("utf-8")
    url = event.get("ResponseURL")
    if not url:
        logger.error("custom resource event has no ResponseURL: cannot answer CloudFormation", extra={"status": status})
        return False
    deadline = time.monotonic() + NO_DEADLINE_MS / 1000 if deadline is None else deadline
    error = "no time left to send it"
    for attempt in range(1, RESPONSE_ATTEMPTS + 1):
        left = deadline - time.monotonic()
        if left < MIN_ATTEMPT_SECONDS:
            break
        # The URL is pre-signed for an empty Content-Type.
        request = urllib.request.Request(
            url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
        )
        try:
            with urllib.request.urlopen(request, timeout=min(RESPONSE_TIMEOUT_SECONDS, left)) as answer:
                answer.read()
            logger.info("answered CloudFormation", extra={"status": status, "reason": reason})
            return True
        except (urllib.error.URLError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("could not send the custom resource response", extra={"attempt": attempt, "error": error})
            pause = 0.5 * attempt
            if attempt < RESPONSE_ATTEMPTS and deadline - time.monotonic() > pause + MIN_ATTEMPT_SECONDS:
                time.sleep(pause)
    logger.error("could not answer CloudFormation", extra={
        "status": status, "reason": reason, "response_url": _where(url), "error": error, "fix": NO_ROUTE_FIX})
    return False


def _apply_schema() -> tuple[str, dict]:
    applied = migrate(runtime.database(), load_cutover_window())
    reason = ("applied " + ", ".join(applied)) if applied else "schema up to date: no migration to apply"
    return reason, {"Applied": ",".join(applied), "AppliedCount": str(len(applied))}


def handle(event: dict, context: LambdaContext | None = None) -> dict:
    """Answer one CloudFormation request; returns the document's Status, Reason and PhysicalResourceId."""
    from .observability import logger

    request_type = event.get("RequestType")
    physical_id = event.get("PhysicalResourceId") or PHYSICAL_RESOURCE_ID

    work_seconds, answer_seconds = _budget(context)
    started = time.monotonic()

    def answer(status: str, reason: str, data: dict | None = None) -> dict:
        send_response(event, status, reason, physical_id, data, deadline=started + answer_seconds)
        return {"Status": status, "Reason": reason, "PhysicalResourceId": physical_id}

    if request_type == "Delete":
        return answer("SUCCESS", "delete: nothing to do (the table and its jobs are kept)")
    if request_type not in ("Create", "Update"):
        return answer("FAILED", f"unknown RequestType {request_type!r} (expected Create, Update or Delete)")

    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["reason"], outcome["data"] = _apply_schema()
        except Exception as exc:  # every failure becomes a FAILED answer, never a hung stack
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=work, name="migrate", daemon=True)
    worker.start()
    worker.join(max(0.0, work_seconds - (time.monotonic() - started)))
    elapsed = time.monotonic() - started

    if worker.is_alive():
        reason = (
            f"{request_type}: migrations did not finish within {elapsed:.0f} s (database slow, locked or "
            "unreachable); the function was about to time out"
        )
        logger.error("migrations timed out", extra={"request_type": request_type, "seconds": round(elapsed, 1)})
        return answer("FAILED", _one_line(reason))
    if "error" in outcome:
        reason = _one_line(f"{request_type}: {outcome['error']}", _known_secrets())
        logger.error("migrations failed", extra={"request_type": request_type, "reason": reason})
        return answer("FAILED", reason)
    reason = _one_line(f"{request_type}: {outcome['reason']}")
    logger.info("migrations done", extra={"request_type": request_type, "reason": reason})
    return answer("SUCCESS", reason, outcome["data"])
