"""Bulk `retry` and `cancel`: the rows a set of filters selects (or the ids an operator names), each acted on
with the very functions the single-job commands use.

A selection is one statement; each row is then changed by its own fenced transition, so a row that moved
in between (it finished, someone else retried or cancelled it; a retry also skips a row retried and
finished again since) is skipped and counted rather than overwritten. A pending row a dispatcher claims
meanwhile is still cancelled, in Jenkins, as `cancel ID` would. Filters only show what they match until
the operator confirms with ``--yes``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import (
    ConfigError,
    Conflict,
    DatabaseBusy,
    DatabaseUnavailable,
    DispatchError,
    InvalidInput,
    JenkinsError,
    NotFound,
    SchemaMissing,
)
from ..inputs import parameter_name_error
from ..jenkins.controllers import controller_name, controllers_told_apart
from ..store.levers import Levers
from .transitions import CANCEL, ELIGIBLE_STATUSES, RETRY

DEFAULT_LIMIT = 1000
IDS_SHOWN = 10  # a dry run names this many of the ids it matched
PAST_TENSE = {RETRY: "retried", CANCEL: "cancelled"}
FILTER_OPTIONS = "--status, --job, --controller, --since, --error-like or --param"


@dataclass(frozen=True)
class Filters:
    """What selects rows for a bulk action; every filter given must hold."""

    status: str | None = None
    job_name: str | None = None
    since: datetime | None = None  # changed (updated_at) at or after
    error_like: str | None = None  # last_error contains this text, ignoring case; % and _ are literal
    parameters: dict[str, str] = field(default_factory=dict)  # each parameter, as text, equals its value
    controller: str | None = None  # rows of this Jenkins controller only

    def given(self) -> bool:
        """Whether any filter was given (bulk needs ids or at least one filter)."""
        return any(value is not None
                   for value in (self.status, self.job_name, self.since, self.error_like, self.controller)) \
            or bool(self.parameters)


@dataclass(frozen=True)
class Target:
    """A row to act on: ``updated_at`` as selected (None for an id the operator named: no fence), its controller
    (None: read when needed) and its job (None for an id the operator named: not read, it is not needed)."""

    id: int
    updated_at: datetime | None = None
    controller: str | None = None
    job_name: str | None = None


@dataclass(frozen=True)
class Selection:
    """The rows a bulk command selected, and how many matched in all."""
    rows: list[Target]
    total: int  # every row the filters match; more than len(rows) when the limit cut them


@dataclass(frozen=True)
class Outcome:
    """What a bulk command did to one row."""
    id: int
    outcome: str  # done · skipped (not in a state to act on, e.g. it changed meanwhile) · failed · not_attempted
    status: str | None  # the row's status afterwards, when done
    message: str


# --------------------------------------------------------------------------- pure decisions


def parse_key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a (key, value) pair: the one reading of enqueue's ``-p``, the filters' ``--param`` and the
    web page's parameter filter (the queue checks the key a filter names). The key is stripped, the value kept
    as written."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InvalidInput(f"bad parameter {text!r}: expected KEY=VALUE")
    if error := parameter_name_error(key.strip()):
        raise InvalidInput(error)
    return key.strip(), value


def _join(words: Sequence[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)


def check_request(action: str, ids: Sequence[int], filters: Filters) -> None:
    """Refuse (InvalidInput) a request that names nothing, mixes ids with filters, or asks for a status the
    action cannot apply to."""
    if ids and filters.given():
        raise InvalidInput(f"{action}: give job ids or filters, not both")
    if not ids and not filters.given():
        raise InvalidInput(f"{action}: name job ids or select jobs with {FILTER_OPTIONS}")
    if filters.error_like is not None and not filters.error_like.strip():
        raise InvalidInput("--error-like needs some text")
    eligible = ELIGIBLE_STATUSES[action]
    if filters.status is not None and filters.status not in eligible:
        why = (f"{filters.status} jobs are final and cannot be cancelled" if action == CANCEL
               else f"{filters.status} jobs have not finished")
        raise InvalidInput(f"{why}: --status takes {_join(eligible)}")


# How far a failure on one row reaches (``error_outcome``): that row only, the rows of its controller (its Jenkins
# failed as a whole: another controller's rows are cancelled as before), or every row after it (the database).
ROW, CONTROLLER, EVERY_ROW = "row", "controller", "every row"


def error_outcome(error: DispatchError) -> tuple[str, str]:
    """How an error on one row counts, and which of the rows after it it stops: a row not (or no longer) in a
    state to act on is skipped; a failure of Jenkins as a whole would fail the rest of that controller's rows, one
    of the database (or of the settings) every row after it."""
    if isinstance(error, Conflict | NotFound):
        return "skipped", ROW
    if isinstance(error, JenkinsError):
        return "failed", CONTROLLER
    if isinstance(error, DatabaseUnavailable | DatabaseBusy | SchemaMissing | ConfigError):
        return "failed", EVERY_ROW
    return "failed", ROW


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:IDS_SHOWN])
    more = f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else ""
    return f"{'id' if len(ids) == 1 else 'ids'} {shown}{more}"


def match_line(action: str, ids: Sequence[int], total: int, limit: int) -> str:
    """What a dry run says: how many jobs match, which, and how to act on them."""
    if total == 0:
        return "no jobs match"
    if total > len(ids):
        return (f"{total} jobs match; --limit {limit} keeps the first {len(ids)} ({_ids(ids)}); "
                f"run again with --yes to {action} those")
    matches = "1 job matches" if total == 1 else f"{total} jobs match"
    return f"{matches} ({_ids(ids)}); run again with --yes to {action} {'it' if total == 1 else 'them'}"


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    return {kind: sum(o.outcome == kind for o in outcomes) for kind in ("done", "skipped", "failed", "not_attempted")}


def report(action: str, outcomes: Sequence[Outcome], total: int) -> dict:
    """A confirmed run for scripts (`--json`): the counts and every row's outcome."""
    return {"action": action, "dry_run": False, "matched": total, **_counts(outcomes),
            "jobs": [asdict(o) for o in outcomes]}


def summary_line(action: str, outcomes: Sequence[Outcome], total: int) -> str:
    """What a confirmed run says at the end: done of attempted, then what was skipped, failed, left."""
    count = _counts(outcomes)
    parts = [f"{PAST_TENSE[action]} {count['done']} of {_jobs(len(outcomes))}"]
    if count["skipped"]:
        parts.append(f"{count['skipped']} skipped (it changed meanwhile or could not be {PAST_TENSE[action]})")
    if count["failed"]:
        parts.append(f"{count['failed']} failed")
    if count["not_attempted"]:
        parts.append(f"stopped after a failure: {count['not_attempted']} not attempted")
    if total > len(outcomes):
        parts.append(f"{total - len(outcomes)} more match: run again for them")
    return "; ".join(parts)


def progress_line(outcome: Outcome) -> str | None:
    """The line a row's outcome prints as it happens; rows never attempted are only counted at the end."""
    if outcome.outcome == "done":
        return outcome.message
    if outcome.outcome == "not_attempted":
        return None
    return f"{outcome.outcome}: {outcome.message}"


def failure_line(action: str, outcomes: Sequence[Outcome]) -> str | None:
    """The error a run with failed rows ends on (None when none failed): how many, and the first reason."""
    failed = [o for o in outcomes if o.outcome == "failed"]
    if not failed:
        return None
    return f"{len(failed)} of {_jobs(len(outcomes))} could not be {PAST_TENSE[action]}; first: {failed[0].message}"


# --------------------------------------------------------------------------- I/O


def select_targets(queue: Levers, action: str, filters: Filters, limit: int) -> Selection:
    """One statement: the rows ``filters`` select for ``action``, by id, at most ``limit``."""
    rows, total = queue.jobs_matching(final=action == RETRY, status=filters.status, job_name=filters.job_name,
                                      since=filters.since, error_like=filters.error_like,
                                      parameters=filters.parameters, limit=limit, controller=filters.controller)
    return Selection([Target(r["id"], r["updated_at"], r["controller"], r["job_name"]) for r in rows], total)


def breakdown(targets: Sequence[Target]) -> list[tuple[str, str, int]]:
    """Pure: the selected rows as (job, controller, how many), most first, then by job and controller; the ids an
    operator named (no job read) are left out."""
    counted = Counter((t.job_name, t.controller or DEFAULT_CONTROLLER) for t in targets if t.job_name is not None)
    return sorted(((job, controller, n) for (job, controller), n in counted.items()),
                  key=lambda group: (-group[2], group[0], group[1]))


def controllers_named(groups: Sequence[tuple[str, str, int]], configured: Collection[str]) -> bool:
    """Whether a breakdown names each group's controller: by the rule every list of rows follows
    (``controllers_told_apart``)."""
    return controllers_told_apart(configured, [{"controller": controller} for _, controller, _ in groups])


def breakdown_line(groups: Sequence[tuple[str, str, int]], name_controllers: bool) -> str | None:
    """What a dry run adds to its count: how many of each job (on each controller, when several may be selected)."""
    if not groups:
        return None
    if name_controllers:
        return "by job and controller: " + ", ".join(f"{job} on {controller} ×{n}" for job, controller, n in groups)
    return "by job: " + ", ".join(f"{job} ×{n}" for job, _, n in groups)


def _act_on_one(queue: Levers, settings: Settings, action: str, target: Target, reason: str, actor: str) -> dict:
    from .operator import cancel_job, retry_job

    if action == RETRY:
        return retry_job(queue, target.id, actor=actor, unchanged_since=target.updated_at)
    return cancel_job(queue, target.id, settings, reason=reason, actor=actor)


def act(queue: Levers, settings: Settings, action: str, targets: Sequence[Target], *,
        reason: str = "cancelled by operator", progress: Callable[[Outcome], None] | None = None,
        actor: str = "operator") -> list[Outcome]:
    """Act on each target in turn through the single-job path. After a failure of the database every row left is
    left (not_attempted); after one of a controller's Jenkins as a whole, that controller's rows (the others' are
    cancelled as before). ``reason``: a cancel's last_error. ``progress`` hears of each row as it is done.
    ``actor``: who each job's history names (``operator``: the CLI; ``ui``: the web page)."""
    outcomes: list[Outcome] = []
    stopped_all = False
    stopped_on: set[str] = set()  # controllers whose Jenkins failed as a whole in this run
    for target in targets:
        controller = target.controller
        if stopped_on and not stopped_all and controller is None:
            controller = _controller_of(queue, target.id)
        if stopped_all or controller in stopped_on:
            result = Outcome(target.id, "not_attempted", None, f"job {target.id} not attempted: stopped after a failure")
        else:
            try:
                outcome = _act_on_one(queue, settings, action, target, reason, actor)
                # A job already where it was asked to go is left as it was: skipped, not done.
                result = Outcome(target.id, "done" if outcome["changed"] else "skipped",
                                 outcome["status"] if outcome["changed"] else None, outcome["message"])
            except DispatchError as error:
                kind, reach = error_outcome(error)
                if reach == EVERY_ROW:
                    stopped_all = True
                elif reach == CONTROLLER:
                    stopped_on.add(controller or _controller_of(queue, target.id) or "")
                result = Outcome(target.id, kind, None, str(error))
        outcomes.append(result)
        if progress is not None:
            progress(result)
    return outcomes


def _controller_of(queue: Levers, job_id: int) -> str | None:
    """The controller a row names (None: no such row, or it cannot be read now)."""
    try:
        return controller_name(queue.get(job_id))
    except DispatchError:
        return None
