"""What a request asks for, read and checked: pure functions that raise InvalidInput (a 400 page naming the
field) and never touch the database."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from .. import inputs, moments
from ..errors import InvalidInput
from ..jenkins.jobs import job_name_error
from ..operating import bulk
from ..store.filters import MAX_PARAMETER_FILTERS, PARAMETER_KEY
from ..store.queue import STATUSES

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
TIME_CHOICES = (("", "any time"), ("15m", "last 15 minutes"), ("1h", "last hour"), ("6h", "last 6 hours"),
                ("1d", "last day"), ("7d", "last week"))
MAX_FIELD = 1024  # longer text in a filter is refused: no job name, error or parameter needs more here

Query = Mapping[str, Sequence[str]]


def one(query: Query, name: str) -> str | None:
    """The single value of field ``name``, stripped; None when absent or blank; several values are refused."""
    values = [v for v in query.get(name, []) if v.strip()]
    if len(values) > 1:
        raise InvalidInput(f"{name}: give one value, not {len(values)}")
    if not values:
        return None
    value = values[0].strip()
    if len(value) > MAX_FIELD:
        raise InvalidInput(f"{name}: at most {MAX_FIELD} characters")
    return value


def whole(text: str, name: str, allowed: inputs.Range, hint: str = "") -> int:
    """Field ``name`` as a whole number in ``allowed`` (the rule the command line's options follow), its refusal
    naming the field, then ``hint``."""
    try:
        return inputs.whole_number(text, allowed)
    except InvalidInput as exc:
        raise InvalidInput(f"{name}: {exc}{hint}") from None


def positive_id(text: str | None, name: str) -> int | None:
    """A job id (or ``before`` cursor): a whole number, 1 or more (an id's column holds it)."""
    if text is None:
        return None
    try:
        return inputs.whole_number(text, inputs.ID)
    except InvalidInput:
        raise InvalidInput(f"{name}: expected a job id ({inputs.ID.expected()}), got {text!r}") from None


def parameter_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair; the key as the queue accepts it in a filter."""
    try:
        key, value = bulk.parse_key_value(text)
    except InvalidInput:
        key, value = "", ""
    if not PARAMETER_KEY.match(key):
        raise InvalidInput(f"param: expected KEY=VALUE with a key of letters, digits, '_', '-' or '.', got {text!r}")
    return key, value


@dataclass(frozen=True)
class JobFilters:
    """The job list's filters as given (``since_text``) and as read (``since``)."""

    status: str | None = None
    job_name: str | None = None
    since_text: str | None = None
    since: datetime | None = None
    error_like: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    controller: str | None = None
    before: int | None = None
    limit: int = PAGE_SIZE

    def list_arguments(self) -> dict:
        """Keyword arguments of ``Reports.list_jobs`` / ``operator.list_jobs_waiting``."""
        return dict(status=self.status, job_name=self.job_name, since=self.since, error_like=self.error_like,
                    parameters=self.parameters or None, controller=self.controller, before_id=self.before,
                    limit=self.limit)

    def bulk_filters(self) -> bulk.Filters:
        """The same selection for a bulk retry or cancel."""
        return bulk.Filters(status=self.status, job_name=self.job_name, since=self.since, error_like=self.error_like,
                            parameters=dict(self.parameters), controller=self.controller)

    def fields(self) -> list[tuple[str, str]]:
        """The filters as form fields (for links and hidden inputs), paging left out."""
        pairs = [("status", self.status), ("job", self.job_name), ("controller", self.controller),
                 ("since", self.since_text), ("error", self.error_like)]
        found = [(k, v) for k, v in pairs if v is not None]
        found += [("param", f"{k}={v}") for k, v in self.parameters.items()]
        if self.limit != PAGE_SIZE:
            found.append(("limit", str(self.limit)))
        return found

    def query(self, **extra: object) -> str:
        """The filters (and ``extra`` fields such as ``before``) as a query string, without the '?'."""
        return urlencode(self.fields() + [(k, str(v)) for k, v in extra.items() if v is not None])

    def any(self) -> bool:
        """Whether any filter is set."""
        return any(v is not None for v in (self.status, self.job_name, self.controller, self.since, self.error_like)) \
            or bool(self.parameters)


def job_filters(query: Query) -> JobFilters:
    """The job list's filters from a query string (or a posted form): status, job, controller, since, error, param
    (repeatable KEY=VALUE), before (id) and limit. A controller need not be configured here: a removed one's rows
    are listed too (as `ls --controller`)."""
    status = one(query, "status")
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status: unknown status {status!r}; use one of {', '.join(STATUSES)}")
    since_text = one(query, "since")
    since = moments.since(since_text) if since_text is not None else None
    parameters = dict(parameter_pair(p) for p in query.get("param", []) if p.strip())
    if len(parameters) > MAX_PARAMETER_FILTERS:
        raise InvalidInput(f"param: at most {MAX_PARAMETER_FILTERS} parameter filters at once")
    limit_text = one(query, "limit")
    limit = PAGE_SIZE if limit_text is None else whole(limit_text, "limit", inputs.Range(1, MAX_PAGE_SIZE))
    controller = one(query, "controller")
    return JobFilters(status=status, job_name=one(query, "job"), since_text=since_text, since=since,
                      error_like=one(query, "error"), parameters=parameters,
                      controller=None if controller is None else controller_name(controller),
                      before=positive_id(one(query, "before"), "before"), limit=limit)


def cap(text: str | None) -> int | None:
    """A job's cap from the form: a whole number, 0 or more (as `limits set JOB N`); blank means no cap (remove
    it)."""
    if text is None or not text.strip():
        return None
    return whole(text.strip(), "cap", inputs.CAP, " (blank removes the cap)")


def rate(text: str | None) -> int | None:
    """A job's rate from the form: starts per minute, a whole number, 1 or more (a cap of 0 is what holds a job
    back); blank means no rate (remove it)."""
    if text is None or not text.strip():
        return None
    return whole(text.strip(), "per_minute", inputs.RATE, " (blank removes the rate)")


def bulk_action(text: str | None) -> str:
    """``retry`` or ``cancel``."""
    if text not in (bulk.RETRY, bulk.CANCEL):
        raise InvalidInput(f"action: expected retry or cancel, got {text!r}")
    return text


def job_name(text: str | None, name: str = "job", *, to_store: bool = True) -> str:
    """A job name a lever names (required). One it stores something for (a cap, a rate, a pause) must be a name
    the queue takes (``to_store``); one whose cap or rate it removes may be any, as stored before."""
    if text is None:
        raise InvalidInput(f"{name}: a job name is required")
    if to_store and (error := job_name_error(text)):
        raise InvalidInput(f"{name}: {error}")
    return text


def schedule_name(text: str | None) -> str:
    """The schedule a lever names (required)."""
    if not text:
        raise InvalidInput("schedule: a schedule name is required")
    return text


def controller_name(text: str | None, configured: Collection[str] | None = None) -> str:
    """The controller a lever names (required), by the rule of JENKINS_CONTROLLERS' names; one it stores something
    for (a pause) must be among the ``configured`` ones."""
    if not text:
        raise InvalidInput("controller: a controller name is required")
    error = inputs.controller_name_error(text) if configured is None else inputs.controller_error(text, configured)
    if error:
        raise InvalidInput(f"controller: {error}")
    return text


MAX_PICKED = bulk.DEFAULT_LIMIT


def job_ids(query: Query) -> list[int]:
    """The jobs ticked in the list (``id``, repeated), each once, in the order given."""
    picked: list[int] = []
    for text in query.get("id", []):
        job_id = positive_id(text.strip(), "id")
        if job_id is not None and job_id not in picked:
            picked.append(job_id)
    if len(picked) > MAX_PICKED:
        raise InvalidInput(f"id: at most {MAX_PICKED} jobs at once")
    return picked
