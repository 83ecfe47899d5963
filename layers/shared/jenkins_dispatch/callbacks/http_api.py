"""The webhook on Lambda: API Gateway HTTP API / Function URL events (payload 2.0) through Powertools' resolver,
a thin adapter around the transport-free core (``webhook.py``).

The resolver routes (a named stage's prefix cut off, trailing slashes ignored) and shapes the JSON answer;
each route turns the event into a ``Callback`` and hands it to the core. Powertools keeps the event being
resolved on the resolver, so resolving is one request at a time per process: Lambda runs one invocation at a
time per container anyway. `serve` never comes here: its HTTP threads call the core directly, many at once.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types

from . import webhook
from .notifications import request_body

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

OTHER_METHODS = ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

app = APIGatewayHttpResolver()
_resolve_lock = threading.Lock()  # the resolver holds one event at a time (see the module's docstring)


def callback_from_event(event: Mapping[str, Any]) -> webhook.Callback:
    """The request an HTTP API event carries; its body is read (base64-decoded when so marked) on demand."""
    http = (event.get("requestContext") or {}).get("http") or {}
    query, path, headers = event.get("rawQueryString"), event.get("rawPath"), event.get("headers")
    return webhook.Callback(
        method=str(http.get("method") or "POST").upper(),
        path=path if isinstance(path, str) else "/",
        query=query if isinstance(query, str) else "",
        headers=headers if isinstance(headers, Mapping) else {},
        body=lambda: request_body(event),
        query_parameters=event.get("queryStringParameters"),
    )


def _response(answer: webhook.WebhookAnswer) -> Response:
    return Response(status_code=answer.status_code, content_type=content_types.APPLICATION_JSON,
                    body=answer.body(), headers=answer.headers() or None)


@app.post(webhook.NOTIFY_PATH)
def _notify() -> Response:
    return _response(webhook.notify(callback_from_event(app.current_event.raw_event)))


@app.route(webhook.NOTIFY_PATH, method=OTHER_METHODS)
def _wrong_method() -> Response:
    return _response(webhook.wrong_method(callback_from_event(app.current_event.raw_event)))


@app.not_found
def _no_route(_exc: Exception) -> Response:
    return _response(webhook.no_route(callback_from_event(app.current_event.raw_event)))


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    return _response(webhook.unexpected(exc))


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

    Metrics are added, not flushed: the Lambda handler's decorator flushes them."""
    routable = _routable(event)
    if routable is None:
        return {"statusCode": 400, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                "body": '{"outcome":"malformed","message":"the event is not an HTTP API (payload 2.0) event"}',
                "isBase64Encoded": False}
    with _resolve_lock:
        # Powertools types the context as required; it only stores it, and outside Lambda there is none.
        return app.resolve(routable, context)  # type: ignore[arg-type]


def http_api_event(
    method: str, raw_path: str, raw_query: str = "", headers: Mapping[str, str] | None = None, body: bytes = b""
) -> dict[str, Any]:
    """The HTTP API payload-2.0 event API Gateway would send for a plain HTTP request (tests, benchmarks)."""
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
