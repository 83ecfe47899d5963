"""What Jenkins's HTTP answers mean: pure functions, no I/O.

Every rule here is described in ``docs/jenkins.md`` (its first table: trigger outcomes at a glance). The client in
``client.py`` sends requests and hands the answers to these functions; the dispatcher ``match``-es on the
frozen dataclasses they return.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

DISPATCH_ID_PARAMETER = "DISPATCH_ID"


_QUEUE_ITEM_PATH = re.compile(r"(?:^|/)queue/item/(\d+)/?$")


def queue_id_from_location(location: str | None) -> int | None:
    """The queue item id in a trigger's ``Location`` header, or None when it names no queue item.

    Only the path counts: Jenkins builds the host from the request it received, which behind a proxy may be
    an internal name or the wrong scheme. A Location pointing at a job page (refused or ``/build`` + json)
    yields None, even if the job's name is a number.
    """
    if not location:
        return None
    match = _QUEUE_ITEM_PATH.search(urlsplit(location.strip()).path)
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------------------------------------------
# Trigger outcomes


@dataclass(frozen=True)
class Accepted:
    """201: a new queue item was created."""

    queue_id: int


@dataclass(frozen=True)
class Merged:
    """303: Jenkins folded the request into an identical item already queued; no new build will run."""

    queue_id: int


@dataclass(frozen=True)
class JobNotFound:
    """404: no such job, or the user may not see it (Jenkins answers the same)."""

    job_name: str


@dataclass(frozen=True)
class NotParameterized:
    """400 ``is not parameterized`` (500 before Jenkins 2.524): the job declares no parameters at all."""

    job_name: str


@dataclass(frozen=True)
class Disabled:
    """409 ``is not buildable``: the job or one of its folders is disabled."""

    job_name: str


@dataclass(frozen=True)
class BadRequest:
    """Jenkins refused this particular request (400 and other 4xx about the job)."""

    detail: str


@dataclass(frozen=True)
class AuthRejected:
    """401/403: the credentials or their permissions are wrong — a problem with the whole Jenkins setup."""

    detail: str


@dataclass(frozen=True)
class JobForbidden:
    """403 on this job while whoAmI shows our credentials work: our user lacks ``permission`` on this job only.

    ``permission`` is named as Jenkins names it to people (``Job/Build``), so the fix can be read off it.
    """

    job_name: str
    user: str
    permission: str


@dataclass(frozen=True)
class Forbidden:
    """403 in which Jenkins's authorization names a permission on the job. Either our user lacks it on this job
    (a job problem) or Jenkins did not take our credentials at all (a Jenkins-wide problem): the answer alone
    cannot tell. The client asks ``whoAmI`` and turns this into JobForbidden or AuthRejected (see
    ``resolve_forbidden``); ``trigger`` never returns it."""

    job_name: str
    permission: str


@dataclass(frozen=True)
class CrumbRequired:
    """403 ``No valid crumb``. The client handles this itself; ``trigger`` never returns it."""

    detail: str


@dataclass(frozen=True)
class Refused:
    """302 to the job page: the queue vetoed the task (QueueDecisionHandler); nothing was queued."""

    detail: str


@dataclass(frozen=True)
class Unavailable:
    """Jenkins as a whole cannot take requests now — unreachable, starting, restarting, or a proxy in front of it
    busy or rate limiting; the request was NOT acted upon."""

    reason: str


@dataclass(frozen=True)
class ServerError:
    """Jenkins failed on this request (500: an exception while handling it; a 503 that is not its restart page);
    the request was NOT acted upon. Whether Jenkins as a whole is failing takes more than one such answer."""

    status: int
    reason: str


@dataclass(frozen=True)
class OutcomeUnknown:
    """The request may have reached Jenkins but no usable answer came back: never retry blindly."""

    reason: str


TriggerOutcome = (
    Accepted
    | Merged
    | JobNotFound
    | NotParameterized
    | Disabled
    | BadRequest
    | AuthRejected
    | JobForbidden
    | Forbidden
    | CrumbRequired
    | Refused
    | Unavailable
    | ServerError
    | OutcomeUnknown
)


def credentials_rejected_detail(user: str) -> str:
    """The message for credentials Jenkins rejected (names the user, never the token)."""
    return f"Jenkins rejected the credentials of user {user}: check JENKINS_USER / JENKINS_API_TOKEN"


def answer_text(body: str, limit: int = 200) -> str:
    """A one-line, tag-free excerpt of an answer body (Jenkins error pages are HTML)."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S | re.I)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header_value(headers: Mapping[str, Any], name: str) -> str | None:
    """A header's value whatever the case of its name (Jenkins's answers, and Jenkins's notifications: API
    Gateway lowercases them, `serve` may not); a name or value that is not text counts as absent."""
    lowered = name.lower()
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == lowered and isinstance(value, str):
            return value
    return None


def classify_trigger_answer(
    status: int, headers: Mapping[str, str], body: str, *, job_name: str, user: str
) -> TriggerOutcome:
    """Map the answer to ``POST job/…/buildWithParameters`` (redirects not followed) to an outcome."""
    location = header_value(headers, "Location")
    if status in (201, 303):
        return _queued_answer(status, location, job_name)
    if status in (301, 302, 307, 308):
        if location and "login" in location.lower():
            return AuthRejected(credentials_rejected_detail(user))
        return Refused(f"Jenkins refused to queue {job_name} (HTTP {status} to {location!r}): a queue plugin vetoed it")
    if 400 <= status < 500:
        return _client_error_answer(status, headers, body, job_name=job_name, user=user)
    if status >= 500:
        return _server_error_answer(status, body, job_name)
    return OutcomeUnknown(f"Jenkins answered the trigger of {job_name} with an unexpected HTTP {status}")


def _queued_answer(status: int, location: str | None, job_name: str) -> Accepted | Merged | OutcomeUnknown:
    """201 (a new queue item) or 303 (merged into one already queued): which item, from the Location."""
    queue_id = queue_id_from_location(location)
    if status == 201:
        if queue_id is None:
            # Accepted, but we cannot tell which item: the reconciler will find it by DISPATCH_ID.
            return OutcomeUnknown(f"Jenkins accepted the trigger of {job_name} without a queue item Location ({location!r})")
        return Accepted(queue_id)
    if queue_id is None:
        return OutcomeUnknown(f"Jenkins answered 303 for {job_name} without a queue item Location ({location!r})")
    return Merged(queue_id)


def _client_error_answer(status: int, headers: Mapping[str, str], body: str, *, job_name: str,
                         user: str) -> TriggerOutcome:
    """A 4xx: about this job (not found, not parameterized, disabled, refused), our credentials, or a proxy."""
    if status == 400:
        if "is not parameterized" in body:
            return NotParameterized(job_name)
        return BadRequest(f"Jenkins refused the parameters for {job_name}: HTTP 400 {answer_text(body)}".rstrip())
    if status == 401:
        return AuthRejected(credentials_rejected_detail(user))
    if status == 403:
        return classify_forbidden(headers, body, job_name=job_name, user=user)
    if status == 404:
        return JobNotFound(job_name)
    if status == 409:
        return Disabled(job_name)
    if status in (408, 429):
        # Jenkins core sends neither: a proxy refused the request before Jenkins saw it.
        return Unavailable(f"a proxy in front of Jenkins answered HTTP {status} (busy or rate limited)")
    return BadRequest(f"Jenkins refused the trigger of {job_name}: HTTP {status} {answer_text(body)}".rstrip())


def _server_error_answer(status: int, body: str, job_name: str) -> TriggerOutcome:
    """A 5xx: Jenkins's own 500 (an old Jenkins's way to refuse a job, or a failure) or 503 (restarting, starting,
    or failing), else whatever stands in front of it, which may have forwarded the request."""
    excerpt = answer_text(body)
    if status == 500:
        # Jenkins before 2.524 (not parameterized) and before 2.14 (disabled) answered these with a 500.
        if "is not parameterized" in body:
            return NotParameterized(job_name)
        if "is not buildable" in body:
            return Disabled(job_name)
        if "Illegal number of parameter values" in body:
            return BadRequest(f"Jenkins refused the parameters for {job_name}: {excerpt}")
        return ServerError(500, f"Jenkins failed with HTTP 500 while triggering {job_name}: {excerpt}".rstrip())
    if status == 503:
        if "restarting" in body:
            return Unavailable("Jenkins is restarting (HTTP 503)")
        if "getting ready" in body:
            return Unavailable("Jenkins is starting (HTTP 503)")
        return ServerError(503, f"Jenkins answered HTTP 503 while triggering {job_name}: {excerpt}".rstrip())
    if status in (502, 504):
        # A proxy answered: it may have forwarded the request before giving up on Jenkins.
        return OutcomeUnknown(f"a proxy in front of Jenkins answered HTTP {status} while triggering {job_name}")
    # Not Jenkins's own answer (it sends 500 and 503): a proxy or CDN, which may have forwarded the
    # request (Cloudflare's 524 says the origin got it and was slow): never assume it was not acted upon.
    return OutcomeUnknown(f"something in front of Jenkins answered HTTP {status} while triggering {job_name}")


# --------------------------------------------------------------------------------------------------------------
# 403: this job, or Jenkins as a whole?

# How Jenkins titles the permission groups of X-Required-Permission ids (``<owner class>.<name>``).
_PERMISSION_GROUPS = {
    "hudson.model.Item": "Job",
    "hudson.model.Run": "Run",
    "hudson.model.View": "View",
    "hudson.model.Computer": "Agent",
    "hudson.scm.SCM": "SCM",
    "hudson.model.Hudson": "Overall",
    "jenkins.model.Jenkins": "Overall",
}
# AccessDeniedException2.MissingPermission: "{0} is missing the {1} permission", {1} being "Group/Name".
_MISSING_PERMISSION = re.compile(r"is missing the (\S+/.+?) permission")
# Jenkins.getItem / AbstractFolder.getItem: Item/Discover without Item/Read.
_DISCOVER_ONLY = "Please login to access job"


def permission_title(permission_id: str) -> str:
    """``hudson.model.Item.Build`` → ``Job/Build``; an id of an unknown group stays as it is."""
    owner, _, name = permission_id.rpartition(".")
    group = _PERMISSION_GROUPS.get(owner)
    return f"{group}/{name}" if group and name else permission_id


def classify_forbidden(headers: Mapping[str, str], body: str, *, job_name: str, user: str) -> Forbidden | AuthRejected | CrumbRequired:
    """Sort a 403 about ``job_name`` into: a crumb to fetch, a permission Jenkins names on the job (to be checked
    against whoAmI), or a Jenkins-wide refusal.

    Only a 403 Jenkins's own authorization wrote can be about one job: it names the missing permission (header
    ``X-Required-Permission`` or body "<user> is missing the Job/Build permission") or says "Please login to
    access job X" (Discover without Read). Any other 403 — a proxy, a WAF — stays Jenkins-wide: failing jobs on
    it could fail every row of the queue. So does one where Jenkins saw us as anonymous, or one naming an Overall
    permission, which every request needs.
    """
    if "No valid crumb" in body:
        return CrumbRequired(f"Jenkins wants a CSRF crumb from user {user}")
    if (header_value(headers, "X-You-Are-Authenticated-As") or "").lower() == "anonymous":
        return AuthRejected(credentials_rejected_detail(user))
    text = answer_text(body, 4000)
    match = _MISSING_PERMISSION.search(text)
    required = header_value(headers, "X-Required-Permission")
    if match:
        permission = match.group(1)
    elif required:
        permission = permission_title(required.split(",")[0].strip())
    elif _DISCOVER_ONLY in text:
        permission = "Job/Read"
    else:
        return AuthRejected(credentials_rejected_detail(user))
    if permission.startswith("Overall/"):
        return AuthRejected(f"Jenkins user {user} lacks the {permission} permission, which every request needs: grant it")
    return Forbidden(job_name, permission)


@dataclass(frozen=True)
class Identity:
    """Who Jenkins takes our requests for, from ``whoAmI/api/json``."""

    name: str
    authenticated: bool
    anonymous: bool

    def is_user(self, user: str) -> bool:
        """Whether Jenkins authenticated our credentials as ``user``. An anonymous request is "authenticated" too
        (Spring's AnonymousAuthenticationToken), so the name and ``anonymous`` decide. User ids ignore case under
        Jenkins's default id strategy."""
        return self.authenticated and not self.anonymous and self.name.lower() == user.lower()


def parse_who_am_i(doc: Mapping[str, Any]) -> Identity:
    """Map ``whoAmI/api/json`` (``name``, ``authenticated``, ``anonymous``, ``authorities``) to an Identity.

    Missing or odd fields count against us: only a clear "this user, not anonymous" confirms the credentials.
    """
    name = doc.get("name")
    name = name if isinstance(name, str) else ""
    anonymous = doc.get("anonymous")
    return Identity(
        name=name,
        authenticated=doc.get("authenticated") is True,
        anonymous=anonymous if isinstance(anonymous, bool) else name in ("", "anonymous"),
    )


def resolve_forbidden(forbidden: Forbidden, credentials_work: bool | None, user: str) -> JobForbidden | AuthRejected | Unavailable:
    """What a job-level 403 means once whoAmI has answered: ``credentials_work`` is True when whoAmI shows our
    user, False when Jenkins does not take our credentials (401/403 on whoAmI, anonymous, someone else), None
    when whoAmI could not be read at all."""
    if credentials_work is True:
        return JobForbidden(forbidden.job_name, user, forbidden.permission)
    if credentials_work is False:
        return AuthRejected(credentials_rejected_detail(user))
    return Unavailable(
        f"Jenkins refused {forbidden.job_name} (403, {forbidden.permission}) and whoAmI could not be read to tell "
        f"whether the credentials of user {user} work"
    )


# --------------------------------------------------------------------------------------------------------------
# Queue items


@dataclass(frozen=True)
class StillQueued:
    """Base of the three in-queue states; ``case StillQueued()`` matches them all."""

    why: str | None


@dataclass(frozen=True)
class QueueWaiting(StillQueued):
    """Quiet period or ``delay`` not yet over."""


@dataclass(frozen=True)
class QueueBlocked(StillQueued):
    """E.g. a non-concurrent job whose previous build still runs."""


@dataclass(frozen=True)
class QueueBuildable(StillQueued):
    """Waiting for an executor."""


@dataclass(frozen=True)
class BuildStarted:
    """The item left the queue and became this build."""

    build_number: int
    build_url: str


@dataclass(frozen=True)
class NotStartedYet:
    """Left the queue but the build object does not exist yet (a short race in Jenkins): poll again."""


@dataclass(frozen=True)
class QueueCancelled:
    """Cancelled while queued: no build will run."""


@dataclass(frozen=True)
class QueueItemGone:
    """404: Jenkins forgot the item (left more than ~5 minutes ago, or Jenkins restarted)."""


QueueState = QueueWaiting | QueueBlocked | QueueBuildable | BuildStarted | NotStartedYet | QueueCancelled | QueueItemGone


def parse_queue_item(doc: Mapping[str, Any]) -> QueueState:
    """Map ``queue/item/N/api/json`` to a queue state."""
    kind = str(doc.get("_class", ""))
    why = doc.get("why")
    if kind.endswith("$LeftItem") or "executable" in doc or "cancelled" in doc:
        if doc.get("cancelled"):
            return QueueCancelled()
        executable = doc.get("executable")
        if isinstance(executable, Mapping) and executable.get("number") is not None:
            return BuildStarted(int(executable["number"]), str(executable.get("url") or ""))
        return NotStartedYet()
    if kind.endswith("$BlockedItem") or doc.get("blocked"):
        return QueueBlocked(why)
    if kind.endswith("$BuildableItem") or doc.get("buildable"):
        return QueueBuildable(why)
    return QueueWaiting(why)


# --------------------------------------------------------------------------------------------------------------
# Builds


@dataclass(frozen=True)
class Building:
    """A build that is still running."""
    number: int
    url: str


@dataclass(frozen=True)
class Finished:
    """The main build ended; ``result`` is SUCCESS, UNSTABLE, FAILURE, NOT_BUILT or ABORTED."""

    number: int
    result: str
    url: str


@dataclass(frozen=True)
class BuildGone:
    """404: the build was deleted (or never existed)."""


BuildState = Building | Finished | BuildGone


def parse_build(doc: Mapping[str, Any]) -> BuildState:
    """Map ``job/…/N/api/json`` to a build state. ``result`` is null while running; ``building`` turns false
    when the main build ends."""
    number = int(doc.get("number") or 0)
    url = str(doc.get("url") or "")
    result = doc.get("result")
    if doc.get("building") or result is None:
        return Building(number, url)
    return Finished(number, str(result), url)


# --------------------------------------------------------------------------------------------------------------
# Parameters and DISPATCH_ID


def parameters_from_actions(actions: Iterable[Any] | None) -> dict[str, Any]:
    """All ``actions[].parameters[]`` of a build or queue item as name → value (password values are absent)."""
    found: dict[str, Any] = {}
    for action in actions or ():
        if not isinstance(action, Mapping):
            continue
        for parameter in action.get("parameters") or ():
            if isinstance(parameter, Mapping) and "name" in parameter:
                found[str(parameter["name"])] = parameter.get("value")
    return found


def parameter_from_params_string(params: str | None, name: str) -> str | None:
    """A queue item's ``params`` string is ``"\\nNAME=value\\nOTHER=value"``."""
    prefix = name + "="
    for line in (params or "").split("\n"):
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None


def dispatch_id_of(doc: Mapping[str, Any], parameter: str = DISPATCH_ID_PARAMETER) -> str | None:
    """The DISPATCH_ID a build or queue item carries, from its actions or (queue items) its params string."""
    value = parameters_from_actions(doc.get("actions")).get(parameter)
    if value is None:
        value = parameter_from_params_string(doc.get("params"), parameter)
    return None if value is None else str(value)


# --------------------------------------------------------------------------------------------------------------
# Jobs


@dataclass(frozen=True)
class JobInfo:
    """What the dispatcher checks before sending. ``forbidden`` is set when Jenkins refused to show the job to our
    (working) credentials: the job exists, but our user may not read it."""

    exists: bool
    buildable: bool = False
    declares_dispatch_id: bool = False
    parameter_names: tuple[str, ...] = field(default_factory=tuple)
    forbidden: JobForbidden | None = None


def parse_job_info(doc: Mapping[str, Any]) -> JobInfo:
    """Map ``job/…/api/json?tree=buildable,property[parameterDefinitions[name]],actions[…]`` to a JobInfo.

    Parameter definitions live in the job's properties; old setups export them in ``actions`` instead.
    Folders have no ``buildable`` field and are reported as not buildable.
    """
    names: list[str] = []
    for holder in list(doc.get("property") or ()) + list(doc.get("actions") or ()):
        if not isinstance(holder, Mapping):
            continue
        for definition in holder.get("parameterDefinitions") or ():
            if isinstance(definition, Mapping) and definition.get("name") and definition["name"] not in names:
                names.append(str(definition["name"]))
    return JobInfo(
        exists=True,
        buildable=bool(doc.get("buildable", False)),
        declares_dispatch_id=DISPATCH_ID_PARAMETER in names,
        parameter_names=tuple(names),
    )


