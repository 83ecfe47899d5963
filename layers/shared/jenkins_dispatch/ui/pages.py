"""Each page and each lever of the web page: reads and changes go through the operator functions the command
line uses (``operating.operator``, ``operating.bulk``, ``operating.overview``, ``store.queue``), with actor
``ui`` in every job's history. A page is a template name and its data; a lever answers with where to go next
and what to tell the operator there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..errors import InvalidInput
from ..operating import bulk
from ..operating.operator import cancel_job, job_details, list_jobs_waiting
from ..operating.overview import queue_overview
from ..operating.scheduling import list_schedules, pause_schedule, resume_schedule
from ..store.db import SessionPool
from ..store.queue import FINAL_STATUSES, STATUSES, Queue
from ..store.schedules import Schedules
from . import forms

ACTOR = "ui"
FIELD_ORDER = ("id", "job_name", "status", "priority", "scheduled_at", "attempts", "max_attempts", "dispatch_id",
               "jenkins_queue_id", "build_number", "build_url", "jenkins_result", "last_error", "dedupe_key",
               "created_at", "updated_at", "finished_at", "lease_expires_at")


@dataclass(frozen=True)
class Page:
    """A page to render: its template, its data, its HTTP status."""

    template: str
    data: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    refresh: bool = True  # reloads itself while open (never a confirmation or a POST's answer)


@dataclass(frozen=True)
class Done:
    """A lever pulled: where the browser goes next (303) and the message it shows there."""

    location: str
    message: str


class Pages:
    """The page's reads and levers on a bounded pool of database sessions."""

    def __init__(self, settings: Settings, pool: SessionPool):
        self.settings = settings
        self.pool = pool

    @contextmanager
    def queue(self) -> Iterator[Queue]:
        """The queue on a borrowed session."""
        with self.pool.session() as db:
            yield Queue(db, lease_seconds=self.settings.lease_seconds)

    # ------------------------------------------------------------------ reads

    def overview(self, query: forms.Query) -> Page:
        """``/``: counts, caps, pauses, the oldest pending job, dispatchers, Jenkins, recent hours."""
        with self.queue() as queue:
            context = queue_overview(queue, self.settings)
            context["schedules"] = list_schedules(Schedules(queue.db))
            return Page("overview.html", context)

    def jobs(self, query: forms.Query) -> Page:
        """``/jobs``: the filtered list, newest first, a page at a time (by id)."""
        filters = forms.job_filters(query)
        with self.queue() as queue:
            rows = list_jobs_waiting(queue, self.settings.max_in_flight, **filters.list_arguments())
        older = filters.query(before=rows[-1]["id"]) if len(rows) == filters.limit else None
        return Page("jobs.html", {"rows": rows, "filters": filters, "older": older, "statuses": STATUSES,
                                  "time_choices": forms.TIME_CHOICES, "bulk_allowed": self._bulk_allowed(filters)})

    def job(self, job_id: int) -> Page:
        """``/jobs/ID``: every field, parameters, Jenkins links, why it waits, its history."""
        with self.queue() as queue:
            details = job_details(queue, job_id, self.settings)
            row = details["job"]
            # Its job's pause, under whichever spelling of the name it was given (the case rule).
            context = queue.waiting_context([row["job_name"]])
        fields = [(k, row[k]) for k in FIELD_ORDER if k in row and k != "parameters"]
        fields += [(k, v) for k, v in row.items() if k not in FIELD_ORDER and k != "parameters"]
        return Page("job.html", dict(details, fields=fields, final=row["status"] in FINAL_STATUSES,
                                     job_paused=row["job_name"] in context.paused_as,
                                     everything_paused=any(p.job_name is None for p in context.pauses)))

    def bulk_preview(self, query: forms.Query) -> Page:
        """``/bulk``: what a bulk retry or cancel of the filters would act on, and the confirmation form."""
        action = forms.bulk_action(forms.one(query, "action"))
        filters = self._bulk_filters(query, action)
        with self.queue() as queue:
            selection = bulk.select_targets(queue, action, filters.bulk_filters(), bulk.DEFAULT_LIMIT)
        ids = [t.id for t in selection.rows]
        return Page("bulk.html", {"action": action, "filters": filters, "ids": ids, "total": selection.total,
                                  "shown": ids[:bulk.IDS_SHOWN], "limit": bulk.DEFAULT_LIMIT}, refresh=False)

    # ------------------------------------------------------------------ levers

    def retry(self, job_id: int) -> Done:
        """Send a final job back to pending (as `retry ID`)."""
        with self.queue() as queue:
            queue.retry_final(job_id, actor=ACTOR)
        return Done(f"/jobs/{job_id}", f"job {job_id} is pending again")

    def cancel(self, job_id: int) -> Done:
        """Cancel a pending or processing job, in Jenkins too (as `cancel ID`)."""
        with self.queue() as queue:
            outcome = cancel_job(queue, job_id, self.settings, reason="cancelled from the web page", actor=ACTOR)
        return Done(f"/jobs/{job_id}", outcome["message"])

    def pause(self, form: forms.Query) -> Done:
        """Pause one job (``job``) or, without one, everything (as `pause [JOB]`)."""
        job = forms.one(form, "job")
        with self.queue() as queue:
            result = queue.pause(job, reason=forms.one(form, "reason"), paused_by=ACTOR)
        target = job or "everything"
        message = (f"paused {target}: {result.pending} pending job(s) wait until resumed" if result.created
                   else f"{target} was already paused; nothing changed")
        return Done(self._back(form), message)

    def resume(self, form: forms.Query) -> Done:
        """Lift the pause of one job (``job``) or of everything (as `resume [JOB]`)."""
        job = forms.one(form, "job")
        with self.queue() as queue:
            result = queue.resume(job)
        target = job or "everything"
        message = (f"resumed {target}: {result.pending} pending job(s) may be dispatched again" if result.resumed
                   else f"{target} was not paused; nothing changed")
        return Done(self._back(form), message)

    def pause_schedule(self, form: forms.Query) -> Done:
        """Pause one schedule (as `schedule pause NAME`): no tick is enqueued until resumed."""
        name = forms.schedule_name(forms.one(form, "schedule"))
        with self.queue() as queue:
            result = pause_schedule(Schedules(queue.db), name, paused_by=ACTOR)
        message = (f"schedule {name} paused: no tick is enqueued until resumed" if result.changed
                   else f"schedule {name} was already paused; nothing changed")
        return Done(self._back(form), message)

    def resume_schedule(self, form: forms.Query) -> Done:
        """Resume one schedule (as `schedule resume NAME`), from its next tick."""
        name = forms.schedule_name(forms.one(form, "schedule"))
        with self.queue() as queue:
            result = resume_schedule(Schedules(queue.db), name)
        message = (f"schedule {name} resumed: next tick {result.next_tick:%Y-%m-%d %H:%M} UTC" if result.changed
                   else f"schedule {name} was not paused; nothing changed")
        return Done(self._back(form), message)

    def set_cap(self, form: forms.Query) -> Done:
        """Set a job's cap (as `limits set JOB N`), or remove it when the cap is blank (`limits rm JOB`)."""
        job = forms.job_name(forms.one(form, "job"))
        cap = forms.cap(forms.one(form, "cap"))
        with self.queue() as queue:
            if cap is None:
                if not queue.remove_limit(job):
                    raise InvalidInput(f"no cap is set for {job!r}")
                message = f"{job}: no cap"
            else:
                queue.set_limit(job, cap)
                message = f"{job}: at most {cap} in flight"
        return Done(self._back(form), message)

    def bulk_act(self, form: forms.Query) -> Page:
        """A confirmed bulk retry or cancel: selected again, each row through the single-job path."""
        action = forms.bulk_action(forms.one(form, "action"))
        filters = self._bulk_filters(form, action)
        with self.queue() as queue:
            selection = bulk.select_targets(queue, action, filters.bulk_filters(), bulk.DEFAULT_LIMIT)
            outcomes = bulk.act(queue, self.settings, action, selection.rows, actor=ACTOR,
                                reason="cancelled from the web page")  # a cancel's last_error; a retry has none
        return Page("bulk_done.html", {"action": action, "filters": filters, "outcomes": outcomes,
                                       "summary": bulk.summary_line(action, outcomes, selection.total),
                                       "failure": bulk.failure_line(action, outcomes)}, refresh=False)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _bulk_allowed(filters: forms.JobFilters) -> bool:
        return filters.any() and not filters.parameters

    @staticmethod
    def _bulk_filters(query: forms.Query, action: str) -> forms.JobFilters:
        filters = forms.job_filters(query)
        if filters.parameters:
            raise InvalidInput("bulk retry and cancel select by status, job, time and error text: remove the "
                               "parameter filter")
        bulk.check_request(action, [], filters.bulk_filters())
        return filters

    @staticmethod
    def _back(form: forms.Query) -> str:
        """Where a lever's form asked to go back to: a path of this page only, else the overview."""
        target = forms.one(form, "next") or "/"
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            return "/"
        return target


LEVERS: dict[str, Callable[[Pages, forms.Query], Done]] = {
    "/pause": Pages.pause,
    "/resume": Pages.resume,
    "/caps": Pages.set_cap,
    "/schedules/pause": Pages.pause_schedule,
    "/schedules/resume": Pages.resume_schedule,
}
