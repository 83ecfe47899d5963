"""What a request asks for, read and checked: pure functions that raise InvalidInput (a 400 page naming the
field) and never touch the database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from .. import moments
from ..config import CONTROLLER_NAME
from ..errors import InvalidInput
from ..operating import bulk
from ..store.queue import MAX_PARAMETER_FILTERS, PARAMETER_KEY, STATUSES

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


def positive_id(text: str | None, name: str) -> int | None:
    """A job id (or ``before`` cursor): a whole number, 1 or more."""
    if text is None:
        return None
    if not text.isdigit() or int(text) < 1 or len(text) > 18:
        raise InvalidInput(f"{name}: expected a job id (a whole number, 1 or more), got {text!r}")
    return int(text)


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
    before: int | None = None
    limit: int = PAGE_SIZE

    def list_arguments(self) -> dict:
        """Keyword arguments of ``Queue.list_jobs`` / ``operator.list_jobs_waiting``."""
        return dict(status=self.status, job_name=self.job_name, since=self.since, error_like=self.error_like,
                    parameters=self.parameters or None, before_id=self.before, limit=self.limit)

    def bulk_filters(self) -> bulk.Filters:
        """The same selection for a bulk retry or cancel."""
        return bulk.Filters(status=self.status, job_name=self.job_name, since=self.since, error_like=self.error_like,
                            parameters=dict(self.parameters))

    def fields(self) -> list[tuple[str, str]]:
        """The filters as form fields (for links and hidden inputs), paging left out."""
        pairs = [("status", self.status), ("job", self.job_name), ("since", self.since_text),
                 ("error", self.error_like)]
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
        return any(v is not None for v in (self.status, self.job_name, self.since, self.error_like)) \
            or bool(self.parameters)


def job_filters(query: Query) -> JobFilters:
    """The job list's filters from a query string (or a posted form): status, job, since, error, param
    (repeatable KEY=VALUE), before (id) and limit."""
    status = one(query, "status")
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status: unknown status {status!r}; use one of {', '.join(STATUSES)}")
    since_text = one(query, "since")
    since = moments.since(since_text) if since_text is not None else None
    parameters = dict(parameter_pair(p) for p in query.get("param", []) if p.strip())
    if len(parameters) > MAX_PARAMETER_FILTERS:
        raise InvalidInput(f"param: at most {MAX_PARAMETER_FILTERS} parameter filters at once")
    limit_text = one(query, "limit")
    limit = PAGE_SIZE
    if limit_text is not None:
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE_SIZE:
            raise InvalidInput(f"limit: expected a whole number from 1 to {MAX_PAGE_SIZE}, got {limit_text!r}")
        limit = int(limit_text)
    return JobFilters(status=status, job_name=one(query, "job"), since_text=since_text, since=since,
                      error_like=one(query, "error"), parameters=parameters,
                      before=positive_id(one(query, "before"), "before"), limit=limit)


def cap(text: str | None) -> int | None:
    """A job's cap from the form: a whole number, 0 or more; blank means no cap (remove it)."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if not text.isdigit() or len(text) > 9:
        raise InvalidInput(f"cap: expected a whole number, 0 or more (blank removes the cap), got {text!r}")
    return int(text)


def rate(text: str | None) -> int | None:
    """A job's rate from the form: starts per minute, a whole number, 1 or more (a cap of 0 is what holds a job
    back); blank means no rate (remove it)."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise InvalidInput(f"per_minute: expected a whole number, 1 or more (blank removes the rate), got {text!r}")
    return int(text)


def bulk_action(text: str | None) -> str:
    """``retry`` or ``cancel``."""
    if text not in (bulk.RETRY, bulk.CANCEL):
        raise InvalidInput(f"action: expected retry or cancel, got {text!r}")
    return text


def job_name(text: str | None, name: str = "job") -> str:
    """A job name a lever names (required)."""
    if text is None:
        raise InvalidInput(f"{name}: a job name is required")
    return text


def schedule_name(text: str | None) -> str:
    """The schedule a lever names (required)."""
    if not text:
        raise InvalidInput("schedule: a schedule name is required")
    return text


def controller_name(text: str | None) -> str:
    """The controller a lever names (required), by the rule of JENKINS_CONTROLLERS' names."""
    if not text:
        raise InvalidInput("controller: a controller name is required")
    if not CONTROLLER_NAME.match(text):
        raise InvalidInput(f"controller: bad controller name {text!r}: lower-case letters, digits, '_' and '-', "
                           "starting with a letter or digit (at most 64 characters)")
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
