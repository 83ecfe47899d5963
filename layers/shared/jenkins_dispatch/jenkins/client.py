"""The only room that speaks Jenkins HTTP: one pooled ``requests.Session`` per pass.

Requests are sent and their raw answers handed to ``answers.py``, which decides what they mean.
Two rules shape this module:

* A request that may have reached Jenkins is never repeated here. A timeout or a connection lost after
  sending is reported as :class:`OutcomeUnknown`; the reconciler later searches by ``DISPATCH_ID``.
* One call never runs longer than ``timeout_seconds`` in total, because the dispatcher's lease
  (LEASE_SECONDS > JENKINS_TIMEOUT_SECONDS) must outlast any request a crashed worker left behind.

A 403 that names a permission on one job is either about that job or about our credentials (Jenkins saw
us as anonymous). ``whoAmI`` tells which; its verdict is kept for ``CREDENTIALS_CHECK_SECONDS``, so a batch of
forbidden triggers costs one extra GET.

The API token is held only by the session's auth object; it never appears in a log line, an exception or
a repr.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.exceptions import SSLError as Urllib3SSLError

from ..config import JenkinsSettings, default_of
from ..errors import JenkinsAuthRejected, JenkinsRequestFailed, JenkinsUnavailable, SearchInconclusive
from .answers import (
    DISPATCH_ID_PARAMETER,
    AuthRejected,
    BuildGone,
    BuildState,
    CrumbRequired,
    Forbidden,
    Identity,
    JobForbidden,
    JobInfo,
    OutcomeUnknown,
    QueueItemGone,
    QueueState,
    ServerError,
    TriggerOutcome,
    Unavailable,
    answer_text,
    classify_forbidden,
    classify_trigger_answer,
    credentials_rejected_detail,
    dispatch_id_of,
    parse_build,
    parse_job_info,
    parse_queue_item,
    parse_who_am_i,
    resolve_forbidden,
)
from .jobs import form_value, job_path, job_url_matches

JOB_INFO_TREE = "_class,buildable,property[parameterDefinitions[name]],actions[parameterDefinitions[name]]"
QUEUE_ITEM_TREE = "_class,id,why,blocked,buildable,cancelled,executable[number,url]"
# What a search reads of each queue item and build: no more than it needs. A build is read with every parameter's
# value (Jenkins's tree= selects fields, not values); the "names" forms leave the values out, and
# _dispatch_id_by_position then reads the DISPATCH_ID alone.
QUEUE_NAMES_FIELDS = "id,task[url],actions[parameters[name]]"
BUILD_SEARCH_FIELDS = "number,url,queueId,building,result,timestamp,actions[parameters[name,value]]"
BUILD_NAMES_FIELDS = "number,url,queueId,building,result,timestamp,actions[parameters[name]]"
_BODY_LIMIT = 4 * 1024 * 1024  # an answer is read up to this; guards against a runaway proxy page
_LIMIT_TEXT = "4 MiB"
_PAGE_TARGET_BYTES = 512 * 1024  # a search's pages aim at this size: far under the body limit
_FIRST_BUILD_PAGE = 10  # builds in a search's first page, before it is known what one weighs
_QUEUE_NAMES_PAGE = 2000  # queue items listed without parameter values in a search's first answer (~150 B each)
_QUEUE_PAGE_MAX = 1000
_QUEUE_ITEMS_ONE_BY_ONE = 2  # up to this many queued items of the searched job are read one request each
_CONNECT_SHARE_CAP_SECONDS = 5.0
SEARCH_MAX_BUILDS = 5000
SEARCH_MAX_QUEUE_ITEMS = 20000
SEARCH_CLOCK_SKEW_MS = 10 * 60 * 1000  # Jenkins's clock and the database's may disagree by this much
# A look back for a cancelled item reads at most this many queue ids below the one it starts from.
LOOK_BACK_ITEMS = 100
# What it reads of each: small whatever the item's parameters (their names only); that many at a time.
LOOK_BACK_FIELDS = "id,cancelled,inQueueSince,task[url],actions[parameters[name]]"
LOOK_BACK_PARALLEL = 8
# How long a whoAmI verdict is trusted: a pass (one client) asks once; a client kept across passes asks again.
CREDENTIALS_CHECK_SECONDS = 60.0


def _dispatch_id_position(names_doc: dict[str, Any]) -> int | None:
    """Where DISPATCH_ID is among the parameters of a build or queue item read as ``actions[parameters[name]]``."""
    for action in names_doc.get("actions") or ():
        if isinstance(action, dict):
            for index, parameter in enumerate(action.get("parameters") or ()):
                if isinstance(parameter, dict) and parameter.get("name") == DISPATCH_ID_PARAMETER:
                    return index
    return None


class CancelResult(Enum):
    """What Jenkins did with a request to cancel a queue item."""
    CANCELLED = "cancelled"
    NOT_FOUND = "not_found"
    ALREADY_STARTED = "already_started"
    NOT_PERMITTED = "not_permitted"


class StopResult(Enum):
    """What Jenkins did with a request to stop a running build."""
    STOP_REQUESTED = "stop_requested"
    GONE = "gone"


@dataclass(frozen=True)
class Found:
    """Where a DISPATCH_ID was found: a queue item, a build, or both (a build knows its queue id)."""

    queue_id: int | None = None
    build_number: int | None = None
    build_url: str | None = None
    result: str | None = None
    building: bool | None = None


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: dict[str, str]
    text: str
    size: int = 0  # bytes read
    oversized: bool = False  # the body went past _BODY_LIMIT and was cut there


@dataclass(frozen=True)
class WhoAmIAnswer:
    """Jenkins's answer to ``whoAmI/api/json``, as it came: for ``doctor``, which tells people what it means."""

    status: int
    version: str | None  # the X-Jenkins header: absent when something other than Jenkins answered
    identity: Identity | None  # None unless the answer was whoAmI's JSON document
    location: str | None = None  # where a redirect points
    excerpt: str = ""  # the start of the body, one line, for an answer that is neither


# Private to this module (errors.py says why): a failed request's fate, turned into an outcome before returning.
class _NotSent(Exception):
    """The request never left this process (connection refused, connect timeout, TLS handshake)."""


class _NoTimeLeft(_NotSent):
    """Not sent: the earlier requests of the same operation spent its JENKINS_TIMEOUT_SECONDS (slowness)."""


class _MaybeSent(Exception):
    """The request may have reached Jenkins; no answer came back."""


def _never_sent(exc: BaseException) -> bool:
    """Whether a requests exception happened before any byte of the request could reach Jenkins."""
    if isinstance(exc, requests.exceptions.ConnectTimeout | requests.exceptions.SSLError):
        return True
    seen: set[int] = set()
    stack: list[Any] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NewConnectionError | ConnectTimeoutError | Urllib3SSLError):
            return True
        if isinstance(current, BaseException):
            stack.extend([current.__cause__, current.__context__, getattr(current, "reason", None)])
            stack.extend(arg for arg in current.args if isinstance(arg, BaseException))
    return False


class JenkinsClient:
    """Talks to one Jenkins. Use as a context manager; safe for concurrent ``trigger`` calls."""

    def __init__(
        self,
        base_url: str,
        user: str,
        api_token: str,
        timeout_seconds: float,
        verify_tls: bool = True,
        search_window: int = default_of("JENKINS_SEARCH_WINDOW"),
        logger: Any = None,
        pool_maxsize: int = 32,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.user = user
        self.timeout_seconds = float(timeout_seconds)
        self.search_window = max(1, int(search_window))
        self._logger = logger or logging.getLogger(__name__)
        self._session = requests.Session()
        self._session.auth = (user, api_token)
        self._session.verify = verify_tls
        self._session.trust_env = False  # a stray proxy or .netrc in the environment must not change the auth
        self._session.headers["User-Agent"] = "jenkins-dispatch"
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_maxsize, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._crumb_lock = threading.Lock()
        self._crumb: tuple[str, str] | None = None  # (header name, value), bound to the session cookie
        self._credentials_lock = threading.Lock()
        self._credentials: tuple[float, bool | None] | None = None  # (checked at, whoAmI verdict)
        self._page_sizes: dict[str, int] = {}  # search page sizes that kept answers near _PAGE_TARGET_BYTES
        if not verify_tls:
            self._logger.warning(f"TLS verification towards Jenkins at {self._where()} is switched off")

    def __repr__(self) -> str:
        return f"JenkinsClient(base_url={self.base_url!r}, user={self.user!r})"

    def __enter__(self) -> JenkinsClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled HTTP session."""
        self._session.close()

    # ------------------------------------------------------------------------------------------------------
    # HTTP plumbing

    def _where(self) -> str:
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}{parts.path}"

    def _timeouts(self, deadline: float) -> tuple[float, float]:
        """(connect, read) whose sum fits in the time left, so one request cannot outlive the deadline."""
        remaining = deadline - time.monotonic()
        if remaining <= 0.01:
            raise _NoTimeLeft("no time left within JENKINS_TIMEOUT_SECONDS")
        connect = min(remaining / 4, _CONNECT_SHARE_CAP_SECONDS)
        return connect, remaining - connect

    def _send(
        self,
        method: str,
        path: str,
        *,
        deadline: float,
        data: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> _Answer:
        """One request, redirects not followed. Raises _NotSent or _MaybeSent instead of requests' errors."""
        try:
            response = self._session.request(
                method,
                self.base_url + path,
                data=data,
                params=params,
                headers=headers,
                timeout=self._timeouts(deadline),
                allow_redirects=False,
                stream=True,
            )
        except requests.exceptions.RequestException as exc:
            kind = type(exc).__name__
            if _never_sent(exc):
                raise _NotSent(f"cannot connect to Jenkins at {self._where()} ({kind})") from None
            raise _MaybeSent(f"no answer from Jenkins at {self._where()} ({kind})") from None
        with response:
            # The status line arrived, so a body that is slow or breaks off does not hide the outcome.
            chunks: list[bytes] = []
            size = 0
            try:
                for chunk in response.iter_content(64 * 1024):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > _BODY_LIMIT or time.monotonic() > deadline:
                        break
            except requests.exceptions.RequestException:
                pass
            encoding = response.encoding or "utf-8"
            text = b"".join(chunks).decode(encoding, errors="replace")
            return _Answer(response.status_code, dict(response.headers), text, size, size > _BODY_LIMIT)

    def _post(self, path: str, *, deadline: float, data: dict[str, str] | None = None, params: dict[str, str] | None = None) -> _Answer:
        """A POST that fetches a CSRF crumb when Jenkins asks for one and retries once.

        Jenkins only answers 403 "No valid crumb" before acting, so this retry can never double a trigger.
        """
        crumb = self._crumb
        answer = self._send("POST", path, deadline=deadline, data=data, params=params, headers=dict([crumb]) if crumb else None)
        if answer.status != 403 or "No valid crumb" not in answer.text:
            return answer
        crumb = self._fetch_crumb(deadline)
        if crumb is None:
            return answer
        return self._send("POST", path, deadline=deadline, data=data, params=params, headers=dict([crumb]))

    def _fetch_crumb(self, deadline: float) -> tuple[str, str] | None:
        with self._crumb_lock:
            answer = self._send("GET", "crumbIssuer/api/json", deadline=deadline)
            if answer.status != 200:
                self._logger.warning(f"Jenkins asked for a CSRF crumb but crumbIssuer answered HTTP {answer.status}")
                return None
            try:
                doc = json.loads(answer.text)
                self._crumb = (str(doc["crumbRequestField"]), str(doc["crumb"]))
            except (ValueError, KeyError, TypeError):
                self._logger.warning("Jenkins crumbIssuer answered something that is not a crumb")
                return None
            return self._crumb

    def _get(self, path: str, what: str, deadline: float) -> _Answer:
        try:
            return self._send("GET", path, deadline=deadline)
        except _NoTimeLeft as exc:
            raise JenkinsRequestFailed(f"{exc} while reading {what}") from None
        except _NotSent as exc:
            raise JenkinsUnavailable(f"{exc} while reading {what}") from None
        except _MaybeSent as exc:
            raise JenkinsRequestFailed(f"{exc} while reading {what}") from None

    def _get_json(self, path: str, what: str) -> dict[str, Any] | None:
        """GET a JSON document; None for 404. Jenkins-wide problems raise."""
        answer = self._get(path, what, time.monotonic() + self.timeout_seconds)
        return self._json_of(answer, what)

    def _json_of(self, answer: _Answer, what: str) -> dict[str, Any] | None:
        if answer.status == 404:
            return None
        self._raise_for_jenkins_wide(answer, what)
        if answer.status != 200:
            raise JenkinsRequestFailed(f"Jenkins answered HTTP {answer.status} while reading {what}: {answer_text(answer.text)}")
        if answer.oversized:
            # Every read outside the searches asks for a few fields: an answer this large is not Jenkins's.
            raise JenkinsRequestFailed(f"Jenkins's answer to the read of {what} is larger than {_LIMIT_TEXT}")
        try:
            doc = json.loads(answer.text)
        except ValueError:
            raise JenkinsRequestFailed(f"Jenkins answered {what} with something that is not JSON: {answer_text(answer.text, 80)}") from None
        if not isinstance(doc, dict):
            raise JenkinsRequestFailed(f"Jenkins answered {what} with JSON that is not an object")
        return doc

    def _raise_for_jenkins_wide(self, answer: _Answer, what: str) -> None:
        if answer.status == 401 or (answer.status == 403 and "No valid crumb" not in answer.text):
            permission = answer.headers.get("X-Required-Permission")
            if answer.status == 403 and permission:
                raise JenkinsAuthRejected(f"Jenkins user {self.user} lacks the permission {permission} ({what})")
            raise JenkinsAuthRejected(credentials_rejected_detail(self.user))
        if answer.status >= 500:
            outcome = classify_trigger_answer(answer.status, answer.headers, answer.text, job_name=what, user=self.user)
            if isinstance(outcome, Unavailable):  # restarting, a busy proxy: Jenkins as a whole
                raise JenkinsUnavailable(f"{outcome.reason} (while reading {what})")
            reason = outcome.reason if isinstance(outcome, ServerError | OutcomeUnknown) else f"HTTP {answer.status}"
            raise JenkinsRequestFailed(f"{reason} (while reading {what})")

    def _credentials_work(self, deadline: float) -> bool | None:
        """Whether Jenkins authenticates our requests as our user (``whoAmI/api/json``): False when it answers 401
        or 403 or names someone else (anonymous), None when it cannot be read. Asked by one thread at a time, so
        concurrent 403s share one GET; the verdict, whichever it is, is kept for CREDENTIALS_CHECK_SECONDS."""
        with self._credentials_lock:
            now = time.monotonic()
            if self._credentials is not None and now - self._credentials[0] < CREDENTIALS_CHECK_SECONDS:
                return self._credentials[1]
            verdict = self._ask_who_am_i(deadline)
            self._credentials = (now, verdict)
            return verdict

    def check(self) -> None:
        """Jenkins answers and takes our credentials (one ``whoAmI`` request); raises JenkinsUnavailable or
        JenkinsAuthRejected otherwise. How `serve` learns that Jenkins is back while no job is waiting."""
        verdict = self._ask_who_am_i(time.monotonic() + self.timeout_seconds)
        if verdict is None:
            raise JenkinsUnavailable(f"Jenkins at {self._where()} did not answer whoAmI")
        if verdict is False:
            raise JenkinsAuthRejected(credentials_rejected_detail(self.user))

    def who_am_i(self) -> WhoAmIAnswer:
        """One ``whoAmI`` request, its answer as it came; raises JenkinsUnavailable only when none came."""
        return self._who_am_i(time.monotonic() + self.timeout_seconds)

    def _who_am_i(self, deadline: float) -> WhoAmIAnswer:
        try:
            answer = self._send("GET", "whoAmI/api/json", deadline=deadline)
        except (_NotSent, _MaybeSent) as exc:
            raise JenkinsUnavailable(str(exc)) from None
        headers = {k.lower(): v for k, v in answer.headers.items()}
        identity = None
        if answer.status == 200:
            try:
                doc = json.loads(answer.text)
            except ValueError:
                doc = None
            identity = parse_who_am_i(doc) if isinstance(doc, dict) else None
        return WhoAmIAnswer(answer.status, headers.get("x-jenkins"), identity, headers.get("location"),
                            answer_text(answer.text, 120))

    def _ask_who_am_i(self, deadline: float) -> bool | None:
        try:
            answer = self._who_am_i(deadline)
        except JenkinsUnavailable as exc:
            self._logger.warning(f"could not ask Jenkins's whoAmI whether our credentials work: {exc}")
            return None
        if answer.status in (401, 403):
            return False  # whoAmI is readable by anyone Jenkins lets in: refused here, refused everywhere
        identity = answer.identity
        if identity is None:
            self._logger.warning(f"Jenkins's whoAmI answered HTTP {answer.status} without its JSON document")
            return None
        if not identity.is_user(self.user):
            self._logger.warning(f"Jenkins takes our requests as {identity.name or 'nobody'!r}, not as user {self.user}")
        return identity.is_user(self.user)

    def _settle_forbidden(self, forbidden: Forbidden, deadline: float) -> JobForbidden | AuthRejected | Unavailable:
        return resolve_forbidden(forbidden, self._credentials_work(deadline), self.user)

    # ------------------------------------------------------------------------------------------------------
    # The operations

    def job_info(self, job_name: str) -> JobInfo:
        """Whether the job exists, is buildable, and declares DISPATCH_ID — or that our user may not read it."""
        what = f"job {job_name}"
        deadline = time.monotonic() + self.timeout_seconds
        answer = self._get(f"{job_path(job_name)}api/json?tree={JOB_INFO_TREE}", what, deadline)
        if answer.status == 403:
            first = classify_forbidden(answer.headers, answer.text, job_name=job_name, user=self.user)
            outcome = self._settle_forbidden(first, deadline) if isinstance(first, Forbidden) else first
            match outcome:
                case JobForbidden():
                    return JobInfo(exists=True, forbidden=outcome)
                case Unavailable(reason=reason):
                    raise JenkinsUnavailable(reason)
                case AuthRejected(detail=detail):
                    raise JenkinsAuthRejected(detail)
        doc = self._json_of(answer, what)
        return JobInfo(exists=False) if doc is None else parse_job_info(doc)

    def trigger(self, job_name: str, parameters: dict[str, Any], dispatch_id: str,
                delay_seconds: float | None = None) -> TriggerOutcome:
        """POST the job's parameters plus DISPATCH_ID to ``buildWithParameters``; never retried blindly.

        Each value goes through ``form_value``: a null parameter is left out (Jenkins uses the job's default).
        ``delay_seconds`` holds the item in Jenkins's queue that long (its quiet period, ``delay=Nsec``):
        an identical request arriving meanwhile merges into it instead of building twice.
        """
        form = {str(name): text for name, value in parameters.items() if (text := form_value(value)) is not None}
        form[DISPATCH_ID_PARAMETER] = dispatch_id
        query = {"delay": f"{max(0, int(delay_seconds))}sec"} if delay_seconds is not None else None
        deadline = time.monotonic() + self.timeout_seconds
        try:
            answer = self._post(f"{job_path(job_name)}buildWithParameters", deadline=deadline, data=form, params=query)
        except _NotSent as exc:
            return Unavailable(str(exc))
        except _MaybeSent as exc:
            return OutcomeUnknown(f"{exc} while triggering {job_name}; it may still be queued")
        outcome = classify_trigger_answer(answer.status, answer.headers, answer.text, job_name=job_name, user=self.user)
        if isinstance(outcome, CrumbRequired):
            # A fresh crumb was refused too: our session or credentials are not what Jenkins expects.
            return AuthRejected(f"Jenkins keeps refusing the CSRF crumb of user {self.user}: check JENKINS_USER / JENKINS_API_TOKEN")
        if isinstance(outcome, Forbidden):
            # Jenkins refuses before it queues anything, so one more request cannot double this trigger.
            return self._settle_forbidden(outcome, deadline)
        return outcome

    def queue_item(self, queue_id: int) -> QueueState:
        """The state of a queue item (waiting, left with a build, cancelled, or gone)."""
        # Only the fields parse_queue_item reads: the item's parameters (twice, in actions and params) can be large.
        doc = self._get_json(f"queue/item/{int(queue_id)}/api/json?tree={QUEUE_ITEM_TREE}", f"queue item {queue_id}")
        return QueueItemGone() if doc is None else parse_queue_item(doc)

    def build(self, job_name: str, number: int) -> BuildState:
        """The state of one build (running, finished with its result, or gone)."""
        doc = self._get_json(
            f"{job_path(job_name)}{int(number)}/api/json?tree=number,url,building,result,duration,queueId",
            f"build {job_name} #{number}",
        )
        return BuildGone() if doc is None else parse_build(doc)

    def find_by_dispatch_id(self, job_name: str, dispatch_id: str, since_ms: int | None = None) -> Found | None:
        """Search the queue, then the job's builds newest first, for an item or build carrying this DISPATCH_ID.

        The queue is read first: an item that starts between the two reads is then found among the builds.
        Builds are read until one started before ``since_ms`` (minus a margin for clock skew): a build of ours
        cannot be older than our dispatch, however many builds of the job ran since. Without ``since_ms`` the
        newest ``search_window`` builds are read.

        Both are read a page at a time (``tree=allBuilds[…]{M,N}``, ``items[…]{M,N}``) with only the fields a
        search needs, each page sized from what the last one weighed so that answers stay near
        ``_PAGE_TARGET_BYTES``, whatever the size of the jobs' parameters. An entry too large to read even alone
        has its DISPATCH_ID read by position (see ``_dispatch_id_by_position``).

        Raises SearchInconclusive when more than ``SEARCH_MAX_BUILDS`` builds would have to be read, or when an
        answer stays over the body limit even so (the reason names it). Jenkins-wide failures raise JenkinsError.
        """
        found = self._search_queue(job_name, dispatch_id)
        if found is not None:
            return found
        return self._search_builds(job_name, dispatch_id, None if since_ms is None else since_ms - SEARCH_CLOCK_SKEW_MS)

    def find_build_by_dispatch_id(self, job_name: str, dispatch_id: str, since_ms: int | None = None) -> Found | None:
        """The job's builds only (as ``find_by_dispatch_id`` reads them): has any build carried this DISPATCH_ID?"""
        return self._search_builds(job_name, dispatch_id, None if since_ms is None else since_ms - SEARCH_CLOCK_SKEW_MS)

    def _search_queue(self, job_name: str, dispatch_id: str) -> Found | None:
        found = self._queue_items_with(job_name, dispatch_id, first_only=True)
        return Found(queue_id=found[0]) if found else None

    def queued_items_with(self, job_name: str, dispatch_id: str) -> list[int]:
        """Ids of the queue items of ``job_name`` that carry this DISPATCH_ID (a re-send and a late original
        that did not merge show up as two)."""
        return sorted(self._queue_items_with(job_name, dispatch_id, first_only=False))

    def _queue_items_with(self, job_name: str, dispatch_id: str, *, first_only: bool) -> list[int]:
        """The queue holds every job's items, whose parameters may be large: it is first listed without parameter
        values, and only this job's items that carry a DISPATCH_ID are then read, for that one parameter (see
        ``_dispatch_id_by_position``): one by one when they are few, else from a second listing of every item's
        parameter at that position. The first listing is one answer (a consistent snapshot) for queues of up to
        two thousand items; read over several answers, an item moving between them can be missed, like an
        item that arrives after the read: the reconciler searches twice before it sends again, and a re-sent
        trigger carries the same DISPATCH_ID, so Jenkins merges it with an item still queued."""
        positions: dict[int, int] = {}  # this job's items: id → position of DISPATCH_ID among its parameters
        names: dict[int, dict[str, Any]] = {}
        for _start, items in self._pages("queue/api/json", "items", QUEUE_NAMES_FIELDS, "the queue",
                                         end=SEARCH_MAX_QUEUE_ITEMS, first=_QUEUE_NAMES_PAGE, most=SEARCH_MAX_QUEUE_ITEMS):
            for item in items:
                if item is None:
                    raise SearchInconclusive(f"the parameter names alone of an item in Jenkins's queue are larger than {_LIMIT_TEXT}")
                position = _dispatch_id_position(item)
                if position is not None and job_url_matches(str((item.get("task") or {}).get("url") or ""), job_name):
                    positions[int(item["id"])] = position
                    names[int(item["id"])] = item
        unread = set(positions)
        matches: list[int] = []
        if len(unread) > _QUEUE_ITEMS_ONE_BY_ONE:
            # Many: read the queue again with that one parameter of every item, a page at a time (other jobs'
            # parameters at the same position may be large).
            for position in sorted(set(positions.values())):
                fields = f"id,actions[parameters[name,value]{{{position}}}]"
                for _start, items in self._pages("queue/api/json", "items", fields, "the queue",
                                                 end=SEARCH_MAX_QUEUE_ITEMS, first=_QUEUE_PAGE_MAX, most=_QUEUE_PAGE_MAX):
                    for item in items:
                        if item is None or int(item["id"]) not in unread or positions[int(item["id"])] != position:
                            continue
                        unread.discard(int(item["id"]))
                        if dispatch_id_of(item) == dispatch_id:
                            matches.append(int(item["id"]))
                            if first_only:
                                return matches
        # Few, or items the pages above missed (moved between pages, too large even alone, or gone: then started,
        # and found among the builds read next).
        for queue_id in sorted(unread):
            path = f"queue/item/{queue_id}/api/json"
            if self._dispatch_id_by_position(path, names[queue_id], f"queue item {queue_id}") == dispatch_id:
                matches.append(queue_id)
                if first_only:
                    return matches
        return matches

    def cancelled_item_with(self, job_name: str, dispatch_id: str, *, below: int, began_ms_before: int | None = None,
                            skip: Collection[int] = (), most: int = LOOK_BACK_ITEMS,
                            seconds: float | None = None) -> int | None:
        """The id of a cancelled queue item of ``job_name`` carrying this DISPATCH_ID, looked for among the ``most``
        queue ids below ``below``, newest first; None when there is none, or when the look ran out of its time
        (``seconds``, by default one HTTP timeout, in all).

        Jenkins lists only live items (``Queue.getItems``; ``getLeftItems`` is not exported): a cancelled item, a
        LeftItem with ``cancelled: true``, can be read by its id alone, for five minutes after it left. Queue ids
        are handed out in order, so the item Jenkins made for a request sent before the one that got queue id
        ``below`` has a lower id. ``began_ms_before``: the dispatch began that long before item ``below`` was
        queued; the look stops at items queued before then (by Jenkins's own clock: item ``below`` is read first
        for it, so no clock skew between Jenkins and the database matters). ``skip``: ids known to be other
        dispatches' items, not read. The items are read ``LOOK_BACK_PARALLEL`` at a time, each for a few fields.
        Another job's item we may not read (403, ``Queue.Item.getApi``) or an id Jenkins does not know (404:
        forgotten, or never ours to see) is passed over, not taken for a Jenkins-wide refusal.
        """
        deadline = time.monotonic() + (self.timeout_seconds if seconds is None else seconds)
        oldest = None
        if began_ms_before is not None:
            anchor = self._look_back_doc(int(below), "inQueueSince")
            if anchor is not None and isinstance(anchor.get("inQueueSince"), int):
                # Less the time the re-send's request took before it was recorded (within the timeout).
                oldest = anchor["inQueueSince"] - began_ms_before - int(self.timeout_seconds * 1000) - 500
        wanted = [i for i in range(int(below) - 1, max(int(below) - 1 - most, 0), -1) if i not in skip]
        with ThreadPoolExecutor(max_workers=LOOK_BACK_PARALLEL, thread_name_prefix="look-back") as pool:
            for first in range(0, len(wanted), LOOK_BACK_PARALLEL):
                if time.monotonic() >= deadline:
                    return None
                ids = wanted[first:first + LOOK_BACK_PARALLEL]
                docs = pool.map(lambda queue_id: self._look_back_doc(queue_id, LOOK_BACK_FIELDS), ids)
                for queue_id, doc in zip(ids, docs, strict=True):  # newest first
                    if doc is None:
                        continue
                    queued_at = doc.get("inQueueSince")
                    if oldest is not None and isinstance(queued_at, int) and queued_at < oldest:
                        return None  # queued before the dispatch began: older ids cannot be its items either
                    if (doc.get("cancelled") is True
                            and job_url_matches(str((doc.get("task") or {}).get("url") or ""), job_name)
                            and self._dispatch_id_by_position(f"queue/item/{queue_id}/api/json", doc,
                                                              f"queue item {queue_id}") == dispatch_id):
                        return queue_id
        return None

    def _look_back_doc(self, queue_id: int, fields: str) -> dict[str, Any] | None:
        """Queue item ``queue_id`` read with ``fields``; None when we may not read it (403) or Jenkins does not
        know it (404)."""
        what = f"queue item {queue_id}"
        answer = self._get(f"queue/item/{queue_id}/api/json?tree={fields}", what, time.monotonic() + self.timeout_seconds)
        if answer.status in (403, 404):
            return None
        return self._json_of(answer, what)

    def _search_builds(self, job_name: str, dispatch_id: str, oldest_wanted: int | None) -> Found | None:
        end = self.search_window if oldest_wanted is None else SEARCH_MAX_BUILDS
        what = f"builds of {job_name}"
        path = f"{job_path(job_name)}api/json"
        read = 0
        for start, builds in self._pages(path, "allBuilds", BUILD_SEARCH_FIELDS, what, end=end,
                                         first=min(_FIRST_BUILD_PAGE, self.search_window), most=self.search_window):
            read = start + len(builds)
            # An entry too large to read with its parameters (None) is read again without them.
            builds = [self._build_by_position(job_name, path, i) if b is None else b for i, b in enumerate(builds, start)]
            for build in builds:
                if build is not None and dispatch_id_of(build) == dispatch_id:
                    queue_id = build.get("queueId")
                    return Found(
                        queue_id=int(queue_id) if queue_id is not None else None,
                        build_number=int(build["number"]),
                        build_url=build.get("url"),
                        result=build.get("result"),
                        building=bool(build.get("building")),
                    )
            timestamps = [t for b in builds if b is not None and isinstance(t := b.get("timestamp"), int)]
            if oldest_wanted is not None and timestamps and min(timestamps) < oldest_wanted:
                return None
        if oldest_wanted is not None and read >= SEARCH_MAX_BUILDS:
            raise SearchInconclusive(
                f"more than {SEARCH_MAX_BUILDS} builds of {job_name} started since DISPATCH_ID {dispatch_id} was sent"
            )
        return None

    def _build_by_position(self, job_name: str, path: str, index: int) -> dict[str, Any] | None:
        """The build at ``index`` (newest first) without its parameter values, then its DISPATCH_ID alone."""
        doc = self._search_json(f"{path}?tree=allBuilds[{BUILD_NAMES_FIELDS}]{{{index}}}", f"build {index + 1} (newest first) of {job_name}")
        build = next(iter(doc.get("allBuilds") or ()), None) if doc else None
        if build is None:
            return None
        number = int(build["number"])
        value = self._dispatch_id_by_position(f"{job_path(job_name)}{number}/api/json", build, f"build #{number} of {job_name}")
        build["actions"] = [] if value is None else [{"parameters": [{"name": DISPATCH_ID_PARAMETER, "value": value}]}]
        return build

    def _dispatch_id_by_position(self, path: str, names_doc: dict[str, Any], what: str) -> str | None:
        """The DISPATCH_ID of the build or queue item at ``path``, read by its position among the parameters.

        Jenkins's ``tree`` cannot select a parameter by name or value, but its ranges apply at every level: the
        parameter names (``names_doc``, read with ``actions[parameters[name]]``) give the position ``k`` of
        DISPATCH_ID, and ``actions[parameters[name,value]{k}]`` returns that one parameter with its value, however
        large the others are. None when the entry has no DISPATCH_ID or is gone.
        """
        position = _dispatch_id_position(names_doc)
        if position is None:
            return None
        doc = self._search_json(f"{path}?tree=actions[parameters[name,value]{{{position}}}]", f"the DISPATCH_ID of {what}")
        return dispatch_id_of(doc) if doc else None

    def _search_json(self, path: str, what: str) -> dict[str, Any] | None:
        """A search's GET: an answer over the body limit is a problem of this search (SearchInconclusive)."""
        answer = self._get(path, what, time.monotonic() + self.timeout_seconds)
        if answer.status == 200 and answer.oversized:
            raise SearchInconclusive(f"Jenkins's answer for {what} is larger than {_LIMIT_TEXT}")
        return self._json_of(answer, what)

    def _pages(
        self, path: str, collection: str, fields: str, what: str, *, end: int, first: int, most: int
    ) -> Iterator[tuple[int, list[dict[str, Any] | None]]]:
        """Read ``collection`` of the document at ``path`` from index 0 up to ``end`` (or its last entry), a page
        ``tree=collection[fields]{M,N}`` at a time. Yields (index of the page's first entry, its entries).

        A page holds as many entries as fit in ``_PAGE_TARGET_BYTES`` at the size the last page's entries had
        (``first`` before any is known, never more than ``most``); the size that worked is kept for the next
        search of the same collection. A page whose answer is over the body limit (its entries weigh at least
        limit / count each) is asked again with as many as fit in the target at that weight; an entry over the
        limit on its own is yielded as None, for the caller to read otherwise.
        """
        key = f"{path}|{fields}"
        size = max(1, min(most, self._page_sizes.get(key, first)))
        start = 0
        while start < end:
            count = min(size, end - start)
            answer = self._get(f"{path}?tree={collection}[{fields}]{{{start},{start + count}}}", what,
                               time.monotonic() + self.timeout_seconds)
            if answer.status == 200 and answer.oversized:
                if count == 1:
                    yield start, [None]
                    start += 1
                    continue
                size = max(1, count * _PAGE_TARGET_BYTES // _BODY_LIMIT)
                self._page_sizes[key] = size
                continue
            doc = self._json_of(answer, what) or {}
            entries: list[dict[str, Any] | None] = [entry for entry in doc.get(collection) or () if isinstance(entry, dict)]
            yield start, entries
            if len(entries) < count:
                return
            start += count
            size = max(1, min(most, _PAGE_TARGET_BYTES * len(entries) // max(answer.size, 1)))
            self._page_sizes[key] = size

    def cancel_queue_item(self, queue_id: int) -> CancelResult:
        """``POST queue/cancelItem?id=N``: 204 cancelled (302 on Jenkins before 2.211), 404, 500, 422."""
        answer = self._action_post(f"queue/cancelItem?id={int(queue_id)}", f"cancel of queue item {queue_id}")
        if answer.status in (204, 200, 302):
            return CancelResult.CANCELLED
        if answer.status == 404:
            return CancelResult.NOT_FOUND
        if answer.status == 422:
            return CancelResult.NOT_PERMITTED
        if answer.status == 500 and "Could not cancel" in answer.text:
            return CancelResult.ALREADY_STARTED
        self._raise_for_jenkins_wide(answer, f"cancel of queue item {queue_id}")
        raise JenkinsRequestFailed(f"Jenkins answered HTTP {answer.status} to the cancel of queue item {queue_id}")

    def stop_build(self, job_name: str, number: int) -> StopResult:
        """``POST job/…/N/stop``: Jenkins answers 302 whether or not the build was still running."""
        answer = self._action_post(f"{job_path(job_name)}{int(number)}/stop", f"stop of {job_name} #{number}")
        if answer.status in (302, 303, 200, 204):
            return StopResult.STOP_REQUESTED
        if answer.status == 404:
            return StopResult.GONE
        self._raise_for_jenkins_wide(answer, f"stop of {job_name} #{number}")
        raise JenkinsRequestFailed(f"Jenkins answered HTTP {answer.status} to the stop of {job_name} #{number}")

    def _action_post(self, path: str, what: str) -> _Answer:
        deadline = time.monotonic() + self.timeout_seconds
        try:
            answer = self._post(path, deadline=deadline)
        except _NotSent as exc:
            raise JenkinsUnavailable(f"{exc} during the {what}") from None
        except _MaybeSent as exc:
            raise JenkinsRequestFailed(f"{exc} during the {what}") from None
        if answer.status in (401, 403):
            self._raise_for_jenkins_wide(answer, what)
        return answer


# A pass's trigger threads share one client: its connection pool holds at least this many connections.
MIN_POOLED_CONNECTIONS = 10


def jenkins_client(controller: JenkinsSettings, threads: int = 1) -> JenkinsClient:
    """The one way the package builds a Jenkins client: every setting of ``controller`` (URL, user, token, timeout,
    TLS, search window) carried over, its connection pool sized for ``threads`` callers (a dispatcher lane: its
    trigger threads, MAX_PARALLEL_TRIGGERS). A client is always one controller's: a row's comes from
    ``controllers.client_for``."""
    return JenkinsClient(controller.url, controller.user, controller.api_token, controller.timeout_seconds,
                         verify_tls=controller.verify_tls, search_window=controller.search_window,
                         pool_maxsize=max(MIN_POOLED_CONNECTIONS, threads))
