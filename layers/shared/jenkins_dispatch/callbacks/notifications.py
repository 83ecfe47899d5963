"""Jenkins Notification-plugin callbacks, as pure functions: no I/O, no clock, no database.

The webhook (``webhook.py``) feeds each request, whichever transport carried it, through these steps:

1. ``token_failure`` of ``tokens_in`` — exactly one token, from any of the four places the contract allows,
   compared with the shared secret in constant time;
2. ``checked_body`` — the raw bytes, at most 256 KiB (``request_body`` reads them out of an HTTP API event,
   base64-decoded when API Gateway says so);
3. ``parse_notification`` — the plugin's JSON into a typed ``Notification``;
4. ``transition_for`` — what that notification asks of the job's row (progress, or a final state);
5. ``names_job`` — whether the notification is about the row's own job: a downstream build started with
   "current build parameters" carries its parent's DISPATCH_ID, and must leave the parent's row alone.

Every rejection is a ``RejectedNotification`` with the HTTP status to answer and one line saying what
is wrong and what is expected. Messages never quote a token and quote the payload only in short,
truncated pieces.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..dispatching.decisions import build_error, final_status
from ..errors import RejectedNotification
from ..inputs import BIGINT_HIGHEST, INT_HIGHEST
from ..jenkins.answers import DISPATCH_ID_PARAMETER, header_value
from ..jenkins.jobs import job_path_from_url

MAX_BODY_BYTES = 256 * 1024
# Sanity bounds on single fields: far above anything Jenkins sends, far below what could hurt us.
MAX_TEXT_CHARS = 8192  # job names, URLs
MAX_DISPATCH_ID_CHARS = 256
MAX_BUILD_NUMBER = INT_HIGHEST  # the build_number column is an integer
MAX_QUEUE_ID = BIGINT_HIGHEST  # jenkins_queue_id is a bigint

PROGRESS_PHASES = ("QUEUED", "STARTED")
FINAL_PHASES = ("COMPLETED", "FINALIZED")
PHASES = PROGRESS_PHASES + FINAL_PHASES
BUILD_RESULTS = ("SUCCESS", "UNSTABLE", "FAILURE", "NOT_BUILT", "ABORTED")

TOKEN_QUERY_PARAMETER = "token"
TOKEN_HEADER = "x-jenkins-dispatch-token"

TOKEN_PLACES = "?token=, the HTTP Basic password, 'Authorization: Bearer' or the X-Jenkins-Dispatch-Token header"
MISSING_OR_WRONG_TOKEN = f"missing or wrong webhook token: give the shared secret as {TOKEN_PLACES}"
SEVERAL_TOKENS = f"several different webhook tokens in one request: give exactly one, in one of {TOKEN_PLACES}"

EXPECTED_FORMAT = "expected the Jenkins Notification plugin's JSON payload (endpoint Format: JSON)"

@dataclass(frozen=True)
class Notification:
    """What one Notification-plugin POST says about one build."""

    phase: str
    job_name: str | None  # the leaf name Jenkins sends (ambiguous across folders)
    job_path: str | None  # folders joined by '/', read from the job url, else build.url, else build.full_url
    build_number: int | None
    queue_id: int | None
    build_url: str | None  # full_url when Jenkins knows its root URL, else the relative url
    status: str | None  # absent before COMPLETED
    dispatch_id: str | None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def job(self) -> str | None:
        """The job this notification names, as well as it names it: the full path, else the leaf name."""
        return self.job_path or self.job_name


@dataclass(frozen=True)
class Transition:
    """The change a notification asks for. ``final_status`` None means: record progress only."""

    phase: str
    final_status: str | None = None  # 'completed' or 'failed'
    result: str | None = None  # Jenkins's build result, kept on the final row
    error: str | None = None  # last_error for a failed row
    build_number: int | None = None
    build_url: str | None = None
    queue_id: int | None = None
    started: bool = False

    @property
    def settles(self) -> bool:
        """Whether this transition ends the row (COMPLETED / FINALIZED) rather than records progress."""
        return self.final_status is not None

    @property
    def event(self) -> str:
        """The history event the transition writes (the phase, lower case)."""
        return self.phase.lower()

    def describe(self) -> str:
        """The build and its phase in words, for the webhook's answer and logs."""
        build = f"Jenkins build #{self.build_number}" if self.build_number is not None else "Jenkins build"
        return f"{build} {self.phase.lower()}"


# --------------------------------------------------------------------------- authentication


def _password_from_basic(credentials: str) -> str | None:
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        userinfo = decoded.decode("utf-8")
    except UnicodeDecodeError:
        userinfo = decoded.decode("latin-1")  # the plugin encodes with the JVM's platform charset
    user, colon, password = userinfo.partition(":")
    return password if colon else None


def tokens_in(query: str | None, headers: Mapping[str, Any] | None,
              query_parameters: Mapping[str, Any] | None = None) -> list[str]:
    """Every candidate secret in a request: the raw query's ``token`` values, the Basic password, the Bearer
    token and our header. ``query_parameters`` (API Gateway's parsed copy of the query, repeated names joined
    by commas) is read only when there is no raw query."""
    tokens: list[str] = []
    if isinstance(query, str) and query:
        tokens += [v for k, v in parse_qsl(query, keep_blank_values=True) if k == TOKEN_QUERY_PARAMETER]
    elif isinstance(query_parameters, Mapping) and isinstance(query_parameters.get(TOKEN_QUERY_PARAMETER), str):
        tokens.append(query_parameters[TOKEN_QUERY_PARAMETER])
    if isinstance(headers, Mapping):
        authorization = header_value(headers, "authorization")
        if authorization:
            scheme, _, credentials = authorization.strip().partition(" ")
            if scheme.lower() == "basic":
                password = _password_from_basic(credentials)
                if password is not None:
                    tokens.append(password)
            elif scheme.lower() == "bearer":
                tokens.append(credentials.strip())
        header_token = header_value(headers, TOKEN_HEADER)
        if header_token is not None:
            tokens.append(header_token.strip())
    return tokens


def presented_tokens(event: Mapping[str, Any]) -> list[str]:
    """Every candidate secret in an HTTP API event (``rawQueryString``, else ``queryStringParameters``; headers)."""
    return tokens_in(event.get("rawQueryString"), event.get("headers"), event.get("queryStringParameters"))


def _as_bytes(text: str) -> bytes:
    # surrogatepass keeps the encoding one-to-one, so two different strings never compare equal.
    return text.encode("utf-8", "surrogatepass")


def token_matches(candidates: Iterable[str], secret: str) -> bool:
    """Constant-time comparison of every candidate (no early exit that would time the secret)."""
    expected = _as_bytes(secret)
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(_as_bytes(candidate), expected)
    return matched and bool(secret)


def token_failure(candidates: Iterable[str], secret: str | Sequence[str]) -> str | None:
    """None when the candidates are exactly one token and it is the secret (or one of the secrets: a
    controller may have its own); else why not (one line).

    One token per request, wherever it is: a request with several different candidates (``?token=a&token=b``,
    or a query token and a header that disagree) is refused without comparing any, so one request cannot
    try many guesses. The same value given in several places is one token. Every secret is compared (no early
    exit that would time which one matched).
    """
    candidates = set(candidates)
    if len(candidates) > 1:
        return SEVERAL_TOKENS
    matched = False
    for one in [secret] if isinstance(secret, str) else secret:
        matched |= token_matches(candidates, one)
    if not matched:
        return MISSING_OR_WRONG_TOKEN
    return None


def authentication_failure(event: Mapping[str, Any], secret: str) -> str | None:
    """``token_failure`` of an HTTP API event's tokens."""
    return token_failure(presented_tokens(event), secret)


def is_authorised(event: Mapping[str, Any], secret: str) -> bool:
    """Whether the event carries exactly one token and it matches ``secret``."""
    return authentication_failure(event, secret) is None


def redact_query(raw_query: Any) -> str:
    """The query string for logs, with the token's value (and anything secret-looking) blanked."""
    if not isinstance(raw_query, str) or not raw_query:
        return ""
    parts = []
    for pair in raw_query.split("&"):
        name, eq, _value = pair.partition("=")
        if eq and unquote(name).lower() in (TOKEN_QUERY_PARAMETER, "secret", "password", "api_token"):
            parts.append(f"{name}=REDACTED")
        else:
            parts.append(pair[:200])
    return "&".join(parts)


# --------------------------------------------------------------------------- body


TOO_LARGE = (f"the body is larger than {MAX_BODY_BYTES // 1024} KiB: a Notification-plugin payload is a few KiB "
             "(keep 'Log lines' at 0)")


def checked_body(raw: bytes) -> bytes:
    """A request's raw body, refused (400, 413) when absent, blank or larger than 256 KiB."""
    if not raw:
        raise RejectedNotification(f"the request has no body: {EXPECTED_FORMAT}")
    if len(raw) > MAX_BODY_BYTES:
        raise RejectedNotification(TOO_LARGE, http_status=413)
    if not raw.strip():
        raise RejectedNotification(f"the request body is blank: {EXPECTED_FORMAT}")
    return raw


def request_body(event: Mapping[str, Any]) -> bytes:
    """An HTTP API event's body as bytes, decoded from base64 when API Gateway encoded it; ≤ 256 KiB."""
    body = event.get("body")
    if body is None or body == "":
        raise RejectedNotification(f"the request has no body: {EXPECTED_FORMAT}")
    if not isinstance(body, str):
        raise RejectedNotification(f"the request body must be text, got {type(body).__name__}: {EXPECTED_FORMAT}")
    if event.get("isBase64Encoded") is True:
        # Four base64 characters carry three bytes: refuse before decoding anything absurd.
        if len(body) > (MAX_BODY_BYTES + 2) // 3 * 4 + 4:
            raise RejectedNotification(TOO_LARGE, http_status=413)
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise RejectedNotification("the body is marked isBase64Encoded but is not valid base64") from None
    else:
        if len(body) > MAX_BODY_BYTES:
            raise RejectedNotification(TOO_LARGE, http_status=413)
        raw = body.encode("utf-8", "surrogatepass")
    return checked_body(raw)


# --------------------------------------------------------------------------- parsing


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _decode_json(raw: bytes) -> Any:
    text_start = raw.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text_start.startswith(b"<"):
        raise RejectedNotification(
            "the body is XML: the Notification plugin endpoint must use Format: JSON (set it in the job's "
            "Job Notifications endpoint)"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RejectedNotification(f"the body is not UTF-8 text: {EXPECTED_FORMAT}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise RejectedNotification(
            f"the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): {EXPECTED_FORMAT}"
        ) from None
    except RecursionError:
        raise RejectedNotification(f"the body's JSON is nested too deeply: {EXPECTED_FORMAT}") from None
    except ValueError as exc:  # NaN/Infinity, or an integer with thousands of digits
        raise RejectedNotification(f"the body's JSON has an invalid value ({exc}): {EXPECTED_FORMAT}") from None


def _optional_text(container: Mapping[str, Any], key: str, where: str, limit: int = MAX_TEXT_CHARS) -> str | None:
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RejectedNotification(f"{where}{key} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise RejectedNotification(f"{where}{key} is longer than {limit} characters")
    _check_storable(value, f"{where}{key}")
    return value


def _optional_url(container: Mapping[str, Any], key: str, where: str) -> str | None:
    """A URL field: text that ``urlsplit`` can read. Never quoted back (a full_url may carry userinfo)."""
    value = _optional_text(container, key, where)
    if value is not None:
        try:
            urlsplit(value)
        except ValueError:
            raise RejectedNotification(
                f"{where}{key} is not a valid URL: its host cannot be read (an unbalanced or non-IP '[...]', or "
                "characters that change under Unicode NFKC normalisation); expected a Jenkins URL such as "
                "job/team/job/app/"
            ) from None
    return value


def _check_storable(value: str, what: str) -> None:
    """PostgreSQL text holds neither NUL characters nor lone surrogates (JSON's \\ud800 escapes)."""
    if "\x00" in value:
        raise RejectedNotification(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RejectedNotification(f"{what} is not valid Unicode (a lone surrogate)") from None


def _optional_int(container: Mapping[str, Any], key: str, where: str, minimum: int, maximum: int) -> int | None:
    value = container.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RejectedNotification(f"{where}{key} must be a whole number, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise RejectedNotification(f"{where}{key} must be between {minimum} and {maximum}, got {value}")
    return value


def _parameter(parameters: Mapping[str, Any], name: str) -> Any:
    # Jenkins's EnvVars is case-insensitive, so the key may come back in another case.
    if name in parameters:
        return parameters[name]
    for key, value in parameters.items():
        if key.upper() == name:
            return value
    return None


def parse_notification(raw: bytes) -> Notification:
    """The Notification plugin's JSON (``Format: JSON``) into a ``Notification``; 400 on anything else."""
    payload = _decode_json(raw)
    if not isinstance(payload, dict):
        raise RejectedNotification(f"the body must be a JSON object, got a JSON {_json_kind(payload)}: {EXPECTED_FORMAT}")
    build = _build_of(payload)
    phase = _phase_of(build)
    parameters = _parameters_of(build)
    dispatch_id = _dispatch_id_of(parameters)
    status = _optional_text(build, "status", "build.")
    job_url = _optional_url(payload, "url", "")
    relative_build_url = _optional_url(build, "url", "build.")
    full_build_url = _optional_url(build, "full_url", "build.")
    return Notification(
        phase=phase,
        job_name=_optional_text(payload, "name", "") or None,
        job_path=job_path_from_url(job_url) or job_path_from_url(relative_build_url)
        or job_path_from_url(full_build_url),
        build_number=_optional_int(build, "number", "build.", 0, MAX_BUILD_NUMBER),
        queue_id=_optional_int(build, "queue_id", "build.", 1, MAX_QUEUE_ID),
        build_url=full_build_url or relative_build_url or None,
        status=status,
        dispatch_id=dispatch_id,
        parameters=parameters,
    )


def _build_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload's ``build`` object, which every notification of the plugin carries."""
    build = payload.get("build")
    if build is None:
        raise RejectedNotification(f"the body has no 'build' object: {EXPECTED_FORMAT}")
    if not isinstance(build, dict):
        raise RejectedNotification(f"'build' must be a JSON object, got a JSON {_json_kind(build)}")
    return build


def _phase_of(build: Mapping[str, Any]) -> str:
    """``build.phase``: one of PHASES."""
    phase = build.get("phase")
    if not isinstance(phase, str):
        raise RejectedNotification(
            f"build.phase is {'missing' if phase is None else 'not a string'}: expected one of {', '.join(PHASES)}"
        )
    if phase not in PHASES:
        raise RejectedNotification(f"build.phase {_short(phase)} is unknown: expected one of {', '.join(PHASES)}")
    return phase


def _parameters_of(build: Mapping[str, Any]) -> dict[str, Any]:
    """``build.parameters`` (absent or null: none)."""
    parameters = build.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise RejectedNotification(f"build.parameters must be a JSON object, got a JSON {_json_kind(parameters)}")
    return parameters


def _dispatch_id_of(parameters: Mapping[str, Any]) -> str | None:
    """The build's DISPATCH_ID parameter, stripped; None when absent or blank (an empty default means: not
    dispatched by us)."""
    dispatch_id = _parameter(parameters, DISPATCH_ID_PARAMETER)
    if dispatch_id is not None and not isinstance(dispatch_id, str):
        raise RejectedNotification(
            f"build.parameters.{DISPATCH_ID_PARAMETER} must be a string, got {type(dispatch_id).__name__}"
        )
    dispatch_id = (dispatch_id or "").strip() or None
    if dispatch_id is None:
        return None
    if len(dispatch_id) > MAX_DISPATCH_ID_CHARS:
        raise RejectedNotification(
            f"build.parameters.{DISPATCH_ID_PARAMETER} is longer than {MAX_DISPATCH_ID_CHARS} characters"
        )
    _check_storable(dispatch_id, f"build.parameters.{DISPATCH_ID_PARAMETER}")
    return dispatch_id


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null"
    )


# --------------------------------------------------------------------------- mapping


def transition_for(notification: Notification, *, unstable_is_success: bool = True) -> Transition:
    """QUEUED/STARTED record progress; COMPLETED/FINALIZED settle from ``build.status``."""
    n = notification
    about = partial(Transition, phase=n.phase, build_number=n.build_number, build_url=n.build_url,
                    queue_id=n.queue_id)
    if n.phase in PROGRESS_PHASES:
        return about(started=n.phase == "STARTED")
    if n.status is None:
        raise RejectedNotification(
            f"build.status is missing in a {n.phase} notification: expected one of {', '.join(BUILD_RESULTS)}"
        )
    if n.status not in BUILD_RESULTS:
        raise RejectedNotification(
            f"build.status {_short(n.status)} is unknown: expected one of {', '.join(BUILD_RESULTS)}"
        )
    # The one rule for a result (shared with the reconciler and `cancel`): decisions.final_status.
    return about(final_status=final_status(n.status, unstable_is_success), result=n.status,
                 error=build_error(n.status, n.build_number, unstable_is_success))


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _fold(name: str) -> str:
    # Jenkins finds items whatever the case of their names. PostgreSQL's lower(... COLLATE "C"), which the
    # fenced statements use for the same test, folds ASCII letters only: so does this.
    return name.translate(_ASCII_LOWER)


def names_job(notification: Notification, job_name: str) -> bool:
    """Is this notification about ``job_name`` (a row's job path, e.g. ``team/app/deploy``)?

    The path read from the job url (or build.url, or build.full_url) must be the row's, folders included;
    a payload without any url is compared by its leaf ``name`` with the row's last segment. Names are
    compared as Jenkins names items: decoded once from the URL (a multibranch ``feature%2Ffoo`` stays
    encoded, as in the row), ASCII case ignored. The same test runs in the record_progress and settle
    statements, so the webhook's happy path stays one statement.
    """
    if notification.job_path is not None:
        return _fold(notification.job_path) == _fold(job_name)
    if notification.job_name is not None:
        return _fold(notification.job_name) == _fold(job_name.rsplit("/", 1)[-1])
    return False
