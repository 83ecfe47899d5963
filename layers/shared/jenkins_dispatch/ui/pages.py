"""Each page and each lever of the web page: reads and changes go through the operator functions the command
line uses (``operating.operator``, ``operating.bulk``, ``operating.overview``, ``store.queue``), with actor
``ui`` in every job's history. A page is a template name and its data; a lever answers with where to go next
and what to tell the operator there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..config import DEFAULT_CONTROLLER, Settings
from ..errors import Conflict
from ..jenkins.controllers import controllers_told_apart
from ..operating import bulk
from ..operating.operator import Caps, cancel_job, job_details, list_jobs_waiting, retry_job
from ..operating.overview import queue_overview
from ..operating.scheduling import list_schedules, pause_schedule, resume_schedule
from ..operating.timeline import time_on_the_page
from ..operating.transitions import ACT, CANCEL, IMPOSSIBLE, RETRY, verdict
from ..store.db import SessionPool
from ..store.levers import Levers
from ..store.queue import FINAL_STATUSES, STATUSES, RateWindow
from ..store.schedules import Schedules
from . import forms

CAP_CHANGES_SHOWN = 10
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
    def queue(self) -> Iterator[Levers]:
        """The levers and reports on a borrowed session."""
        with self.pool.session() as db:
            yield Levers(db)

    # ------------------------------------------------------------------ reads

    def overview(self, query: forms.Query) -> Page:
        """``/``: counts, caps (the jobs', the keys'), pauses, the oldest pending job, dispatchers, Jenkins, recent
        hours."""
        with self.queue() as queue:
            cap_changes = queue.limit_history(CAP_CHANGES_SHOWN)
            return Page("overview.html", dict(queue_overview(queue, self.settings),
                                              schedules=list_schedules(Schedules(queue.db)),
                                              cap_changes=cap_changes, key_caps=queue.key_limits(),
                                              cap_changes_name_controllers=controllers_told_apart(
                                                  self.settings.controllers_by_name(), cap_changes)))

    def time(self, query: forms.Query) -> Page:
        """``/time``: outcomes over the last hour, day and week; queue wait and build duration per job."""
        with self.queue() as queue:
            return Page("time.html", time_on_the_page(queue))

    def jobs(self, query: forms.Query) -> Page:
        """``/jobs``: the filtered list, newest first, a page at a time (by id)."""
        filters = forms.job_filters(query)
        with self.queue() as queue:
            rows = list_jobs_waiting(queue, Caps.of(self.settings), **filters.list_arguments())
        older = filters.query(before=rows[-1]["id"]) if len(rows) == filters.limit else None
        back = "/jobs" + (f"?{filters.query(before=filters.before)}" if filters.any() or filters.before else "")
        configured = self.settings.controllers_by_name()
        return Page("jobs.html", {"rows": rows, "filters": filters, "older": older, "statuses": STATUSES, "back": back,
                                  "time_choices": forms.TIME_CHOICES, "bulk_allowed": self._bulk_allowed(filters),
                                  "controllers": configured,
                                  "controller_column": controllers_told_apart(configured, rows)})

    def job(self, job_id: int) -> Page:
        """``/jobs/ID``: every field, parameters, Jenkins links, why it waits, its history."""
        with self.queue() as queue:
            details = job_details(queue, job_id, self.settings)
            row = details["job"]
            # Its job's pause, under whichever spelling of the name it was given (the case rule).
            context = queue.waiting_context([(row["controller"] or DEFAULT_CONTROLLER, row["job_name"])])
        fields = [(k, row[k]) for k in FIELD_ORDER if k in row and k != "parameters"]
        fields += [(k, v) for k, v in row.items() if k not in FIELD_ORDER and k != "parameters"]
        return Page("job.html", dict(details, fields=fields, final=row["status"] in FINAL_STATUSES,
                                     job_paused=row["job_name"] in context.paused_as,
                                     everything_paused=any(p.job_name is None for p in context.pauses)))

    def bulk_preview(self, query: forms.Query) -> Page:
        """``/bulk``: what a bulk retry or cancel of the filters (or of the ids ticked in the list) would act on,
        and the confirmation form."""
        action = forms.bulk_action(forms.one(query, "action"))
        filters, ids = self._bulk_request(query, action)
        with self.queue() as queue:
            selection = self._select(queue, action, filters, ids)
        chosen = [t.id for t in selection.rows]
        groups = bulk.breakdown(selection.rows)
        named = bulk.controllers_named(groups, self.settings.controllers_by_name())
        return Page("bulk.html", {"action": action, "filters": filters, "ids": chosen, "total": selection.total,
                                  "picked": ids, "shown": chosen[:bulk.IDS_SHOWN], "limit": bulk.DEFAULT_LIMIT,
                                  "breakdown": groups, "breakdown_names_controllers": named},
                    refresh=False)

    # ------------------------------------------------------------------ levers
    # Each lever asks first: without ``confirm=yes`` it answers a page naming what would change and changes
    # nothing; that page's form posts the same fields with ``confirm=yes``.

    def retry(self, job_id: int, form: forms.Query, actor: str) -> Done | Page:
        """Send a final job back to pending (as `retry ID`); a pending job is left as it is and says so."""
        with self.queue() as queue:
            row = queue.get(job_id)
            check = verdict(RETRY, row["status"])
            if check == IMPOSSIBLE:
                raise Conflict(f"job {job_id} is {row['status']}: only completed, failed or cancelled jobs can be "
                               "retried")
            if check == ACT and not confirmed(form):
                build = f" (build #{row['build_number']})" if row.get("build_number") is not None else ""
                return confirmation(
                    f"Retry job {job_id}?",
                    f"sends job {job_id} of {row['job_name']}, {row['status']}{build}, back to pending with fresh "
                    "attempts: Jenkins builds it again",
                    f"/jobs/{job_id}/retry", {"next": self._back(form, f"/jobs/{job_id}")}, "Retry it",
                    self._back(form, f"/jobs/{job_id}"))
            outcome = retry_job(queue, job_id, actor=actor)
        return Done(self._back(form, f"/jobs/{job_id}"), outcome["message"])

    def cancel(self, job_id: int, form: forms.Query, actor: str) -> Done | Page:
        """Cancel a pending or processing job, in Jenkins too (as `cancel ID`)."""
        with self.queue() as queue:
            if not confirmed(form):
                row = queue.get(job_id)
                check = verdict(CANCEL, row["status"])
                if check == ACT:
                    where = ("it has not reached Jenkins" if row["status"] == "pending"
                             else "it is in Jenkins: its queue item is cancelled or its build stopped")
                    return confirmation(f"Cancel job {job_id}?",
                                        f"cancels job {job_id} of {row['job_name']}, {row['status']}: {where}",
                                        f"/jobs/{job_id}/cancel", {"next": self._back(form, f"/jobs/{job_id}")},
                                        "Cancel it", self._back(form, f"/jobs/{job_id}"), danger=True)
            outcome = cancel_job(queue, job_id, self.settings, reason="cancelled from the web page", actor=actor)
        return Done(self._back(form, f"/jobs/{job_id}"), outcome["message"])

    def pause(self, form: forms.Query, actor: str) -> Done | Page:
        """Pause one job (``job``) or, without one, everything (as `pause [JOB]`)."""
        job = forms.one(form, "job")
        if job is not None:
            forms.job_name(job)
        with self.queue() as queue:
            if not confirmed(form):
                pending = queue.pending_count(job)
                rows = f"{pending} pending row{'s' if pending != 1 else ''}"
                what = (f"pauses all {rows} of {job}, and any enqueued later, until resumed; its rows already in "
                        "Jenkins carry on" if job else
                        f"pauses every job: all {rows} wait, and any enqueued later, until resumed; rows already "
                        "in Jenkins carry on")
                return confirmation(f"Pause {job or 'everything'}?", what, "/pause",
                                    {"job": job or "", "next": self._back(form)},
                                    f"Pause {job}" if job else "Pause everything", self._back(form), danger=True,
                                    reason=True)
            result = queue.pause(job, reason=forms.one(form, "reason"), paused_by=actor)
        target = job or "everything"
        message = (f"paused {target}: {result.pending} pending job(s) wait until resumed" if result.created
                   else f"{target} was already paused; nothing changed")
        return Done(self._back(form), message)

    def resume(self, form: forms.Query, actor: str) -> Done:
        """Lift the pause of one job (``job``) or of everything (as `resume [JOB]`): it only lets work go on,
        so it does not ask."""
        job = forms.one(form, "job")
        with self.queue() as queue:
            result = queue.resume(job)
        target = job or "everything"
        message = (f"resumed {target}: {result.pending} pending job(s) may be dispatched again" if result.resumed
                   else f"{target} was not paused; nothing changed")
        return Done(self._back(form), message)

    def pause_controller(self, form: forms.Query, actor: str) -> Done | Page:
        """Pause a whole controller for maintenance (as `pause --controller C`): none of its rows is claimed
        until resumed; its lane keeps reconciling, cancelling and settling the rows already in its Jenkins. Only a
        configured one (as the command): a controller no dispatcher serves fails its rows anyway."""
        controller = forms.controller_name(forms.one(form, "controller"), self.settings.controllers_by_name())
        with self.queue() as queue:
            if not confirmed(form):
                # Its backlog as `stats` counts it (the same statement): no other read needed.
                found = next((r for r in queue.stats_per_controller() if r["controller"] == controller), {})
                pending, due, in_flight = (int(found.get(k, 0)) for k in ("pending", "due", "in_flight"))
                what = (f"pauses every row of controller {controller}: {_rows(pending, 'pending row')} ({due} due) "
                        "wait, and any enqueued later, until resumed; what is already in its Jenkins "
                        f"({in_flight} in flight) carries on, reconciled and cancellable as usual")
                return confirmation(f"Pause controller {controller}?", what, "/controllers/pause",
                                    {"controller": controller, "next": self._back(form)},
                                    f"Pause controller {controller}", self._back(form), danger=True, reason=True)
            result = queue.pause(None, controller=controller, reason=forms.one(form, "reason"), paused_by=actor)
        message = (f"paused controller {controller}: {result.pending} pending job(s) wait until resumed"
                   if result.created else f"controller {controller} was already paused; nothing changed")
        return Done(self._back(form), message)

    def resume_controller(self, form: forms.Query, actor: str) -> Done:
        """Lift a whole controller's pause (as `resume --controller C`): like resuming everything, it only lets
        work go on, so it does not ask. The pauses of its jobs, and the pauses on every controller, stay."""
        controller = forms.controller_name(forms.one(form, "controller"))
        with self.queue() as queue:
            result = queue.resume(None, controller=controller)
        message = (f"resumed controller {controller}: {result.pending} pending job(s) may be dispatched again"
                   if result.resumed else f"controller {controller} was not paused; nothing changed")
        return Done(self._back(form), message)

    def pause_schedule(self, form: forms.Query, actor: str) -> Done:
        """Pause one schedule (as `schedule pause NAME`): no tick is enqueued until resumed."""
        name = forms.schedule_name(forms.one(form, "schedule"))
        with self.queue() as queue:
            result = pause_schedule(Schedules(queue.db), name, paused_by=actor)
        message = (f"schedule {name} paused: no tick is enqueued until resumed" if result.changed
                   else f"schedule {name} was already paused; nothing changed")
        return Done(self._back(form), message)

    def resume_schedule(self, form: forms.Query, actor: str) -> Done:
        """Resume one schedule (as `schedule resume NAME`), from its next tick."""
        name = forms.schedule_name(forms.one(form, "schedule"))
        with self.queue() as queue:
            result = resume_schedule(Schedules(queue.db), name)
        message = (f"schedule {name} resumed: next tick {result.next_tick:%Y-%m-%d %H:%M} UTC" if result.changed
                   else f"schedule {name} was not paused; nothing changed")
        return Done(self._back(form), message)

    def set_cap(self, form: forms.Query, actor: str) -> Done | Page:
        """Set a job's cap (as `limits set JOB N`, on the default controller, which must be configured), or remove
        it when the cap is blank (`limits rm JOB`)."""
        cap = forms.cap(forms.one(form, "cap"))
        job = forms.job_name(forms.one(form, "job"), to_store=cap is not None)
        if cap is not None:
            self._configured(DEFAULT_CONTROLLER)
        with self.queue() as queue:
            current = queue.limit_of(job)
            if cap == current:
                return Done(self._back(form), f"{job}: the cap is already {'none' if cap is None else cap}; "
                                              "nothing changed")
            if not confirmed(form):
                was = "no cap" if current is None else f"a cap of {current}"
                what = (f"removes the cap of {job} (now {current} in flight at most): as many as the global cap "
                        "allows" if cap is None else
                        f"sets the cap of {job} to {cap} in flight (it has {was})"
                        + ("; 0 holds every pending row of it back" if cap == 0 else ""))
                return confirmation(f"Change the cap of {job}?", what, "/caps",
                                    {"job": job, "cap": "" if cap is None else str(cap), "next": self._back(form)},
                                    "Remove the cap" if cap is None else f"Set the cap to {cap}", self._back(form))
            if cap is None:
                queue.remove_limit(job, changed_by=actor)
                message = f"{job}: no cap"
            elif queue.set_limit(job, cap, changed_by=actor).changed:
                message = f"{job}: at most {cap} in flight"
            else:  # another operator set it meanwhile
                message = f"{job}: the cap is already {cap}; nothing changed"
        return Done(self._back(form), message)

    def set_rate(self, form: forms.Query, actor: str) -> Done | Page:
        """Set a job's rate, starts per minute (as `limits set JOB --per-minute N`), or remove it when blank (`limits
        rm JOB --per-minute`); its cap stays either way. Asked first, naming the job's starts of the last minute.
        The default controller's, as the cap's lever."""
        per_minute = forms.rate(forms.one(form, "per_minute"))
        job = forms.job_name(forms.one(form, "job"), to_store=per_minute is not None)
        if per_minute is not None:
            self._configured(DEFAULT_CONTROLLER)
        with self.queue() as queue:
            # The rate and its last minute as the claim counts them (job names compare ignoring case).
            current = queue.waiting_context([(DEFAULT_CONTROLLER, job)]).rates.get((DEFAULT_CONTROLLER, job))
            was = None if current is None else current.per_minute
            if per_minute == was:
                return Done(self._back(form), f"{job}: the rate is already {per_minute} per minute; nothing changed"
                            if per_minute is not None else f"{job} had no rate; nothing changed")
            if not confirmed(form):
                return confirmation(f"Change the rate of {job}?", rate_change(job, per_minute, current), "/rates",
                                    {"job": job, "per_minute": "" if per_minute is None else str(per_minute),
                                     "next": self._back(form)},
                                    "Remove the rate" if per_minute is None else f"Set the rate to {per_minute} per minute",
                                    self._back(form))
            if per_minute is None:
                queue.remove_rate(job, changed_by=actor)
                message = f"{job}: no rate"
            elif queue.set_rate(job, per_minute, changed_by=actor).changed:
                message = f"{job}: at most {per_minute} started in any minute, by all dispatchers together"
            else:  # another operator set it meanwhile
                message = f"{job}: the rate is already {per_minute} per minute; nothing changed"
        return Done(self._back(form), message)

    def bulk_act(self, form: forms.Query, actor: str) -> Page:
        """A confirmed bulk retry or cancel (the /bulk page's form): selected again, each row through the
        single-job path."""
        action = forms.bulk_action(forms.one(form, "action"))
        filters, ids = self._bulk_request(form, action)
        with self.queue() as queue:
            selection = self._select(queue, action, filters, ids)
            outcomes = bulk.act(queue, self.settings, action, selection.rows, actor=actor,
                                reason="cancelled from the web page")  # a cancel's last_error; a retry has none
        return Page("bulk_done.html", {"action": action, "filters": filters, "outcomes": outcomes,
                                       "summary": bulk.summary_line(action, outcomes, selection.total),
                                       "failure": bulk.failure_line(action, outcomes)}, refresh=False)

    # ------------------------------------------------------------------ helpers

    def _configured(self, controller: str) -> None:
        """Refuse (400) a lever that would store something for a controller not configured here."""
        forms.controller_name(controller, self.settings.controllers_by_name())

    @staticmethod
    def _bulk_allowed(filters: forms.JobFilters) -> bool:
        return filters.any()

    @staticmethod
    def _bulk_request(query: forms.Query, action: str) -> tuple[forms.JobFilters, list[int]]:
        """The filters, or the ids ticked in the list (``id``, repeated), checked as the CLI checks them."""
        filters = forms.job_filters(query)
        ids = forms.job_ids(query)
        bulk.check_request(action, ids, filters.bulk_filters())
        return filters, ids

    @staticmethod
    def _select(queue: Levers, action: str, filters: forms.JobFilters, ids: list[int]) -> bulk.Selection:
        if ids:
            return bulk.Selection([bulk.Target(i) for i in ids], len(ids))
        return bulk.select_targets(queue, action, filters.bulk_filters(), bulk.DEFAULT_LIMIT)

    @staticmethod
    def _back(form: forms.Query, default: str = "/") -> str:
        """Where a lever's form asked to go back to: a path of this page only, else ``default``."""
        target = forms.one(form, "next") or default
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            return default
        return target


def _rows(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def rate_change(job: str, per_minute: int | None, current: RateWindow | None) -> str:
    """Pure: what a rate change does, with the job's starts of the last minute (counted only while it has a rate)."""
    if per_minute is None:
        assert current is not None, "removing no rate asks nothing"
        return (f"removes the rate of {job} ({current.per_minute} per minute: {current.started} started in the last "
                "minute): it starts as fast as its cap and the global cap allow")
    if current is None:
        return f"limits {job} to {per_minute} starts per minute (it has no rate: its starts are counted from now)"
    return (f"limits {job} to {per_minute} starts per minute: {current.started} started in the last minute (it has a "
            f"rate of {current.per_minute})")


def confirmed(form: forms.Query) -> bool:
    """Whether the form is the confirmation's (``confirm=yes``), not the first click."""
    return forms.one(form, "confirm") == "yes"


def confirmation(question: str, what: str, action: str, fields: dict[str, str], button: str, back: str, *,
                 danger: bool = False, reason: bool = False) -> Page:
    """The page a lever answers before acting: the question, what exactly changes, and the form that acts."""
    return Page("confirm.html", {"question": question, "what": what, "action": action,
                                 "fields": dict(fields, confirm="yes"), "button": button, "back": back,
                                 "danger": danger, "reason": reason}, refresh=False)


LEVERS: dict[str, Callable[[Pages, forms.Query, str], Done | Page]] = {
    "/pause": Pages.pause,
    "/resume": Pages.resume,
    "/caps": Pages.set_cap,
    "/rates": Pages.set_rate,
    "/schedules/pause": Pages.pause_schedule,
    "/schedules/resume": Pages.resume_schedule,
    "/controllers/pause": Pages.pause_controller,
    "/controllers/resume": Pages.resume_controller,
}
