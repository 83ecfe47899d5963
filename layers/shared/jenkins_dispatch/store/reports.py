"""The reports' store: what people read of the queue. Listings of rows and a row's history, counts and
gauges at a glance, per job and per controller, the limits and pauses in force, the dispatchers' heartbeats, why
pending rows wait, and the time page's aggregates (``reports.sql``, ``heartbeats.sql``). Reads only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from ..errors import InvalidInput
from .db import Row
from .filters import like_contains, parameter_slots, time_filter
from .queue import STATUSES, KeyHold, Pause, RateWindow, WaitingContext
from .rows import (
    Dispatcher,
    HourCounts,
    JenkinsOutage,
    Job,
    JobEvent,
    JobStats,
    KeyLimit,
    KeyRule,
    Limit,
    LimitChange,
    OldestPending,
    Stats,
)
from .runner import Store, moment_of, parameters_of


def _check_buckets(window_seconds: int, bucket_seconds: int) -> None:
    # The aggregate's buckets are five minutes: a chart's bucket is a whole number of them.
    if bucket_seconds < 300 or bucket_seconds % 300 or window_seconds < bucket_seconds:
        raise InvalidInput("a bucket must be a multiple of 300 s and the window at least one bucket")


def _waiting_context_of(row: Row) -> WaitingContext:
    """The ``waiting_context`` statement's one row as a WaitingContext."""
    jenkins = row["jenkins"] or {}
    everywhere, on_one_controller = _pauses_apart(row["pauses"] or [])
    return WaitingContext(
        **_job_fields(row["jobs"] or []),
        pauses=everywhere,
        controller_pauses=on_one_controller,
        controllers_in_flight={name: int(n) for name, n in (row["controllers_in_flight"] or {}).items()},
        total_in_flight=row["total_in_flight"],
        live_dispatchers=int(row["live_dispatchers"]),
        dispatchers=_recorded_dispatchers(row.get("dispatchers") or []),
        jenkins_unavailable_since=moment_of(jenkins.get("since")),
        jenkins_reason=jenkins.get("reason"),
    )


def _job_fields(jobs: list[Row]) -> dict[str, Any]:
    """The per-job fields of a WaitingContext, from one entry per (controller, job_name) asked about."""
    return {
        "caps": {_key(j): j["cap"] for j in jobs if j["cap"] is not None},
        "in_flight": {_key(j): int(j["in_flight"]) for j in jobs},
        "rates": {_key(j): _rate_window(j) for j in jobs if j.get("rate") is not None},
        "paused_as": _pause_names(jobs, "paused_as"),
        "paused_on": _pause_names(jobs, "paused_on"),
    }


def _key(job: Row) -> tuple[str, str]:
    return job["controller"], job["job_name"]


def _rate_window(job: Row) -> RateWindow:
    next_start = job.get("next_start_seconds")
    return RateWindow(per_minute=job["rate"], started=int(job["started"]),
                      next_start_seconds=None if next_start is None else float(next_start))


def _pause_names(jobs: list[Row], column: str) -> dict[str, Any]:
    """job_name → its ``column`` (``paused_as``: the name its pause was given; ``paused_on``: per controller), for
    the jobs that have one."""
    return {j["job_name"]: j[column] for j in jobs if j.get(column) is not None}


def _pauses_apart(rows: list[Row]) -> tuple[list[Pause], list[Pause]]:
    """The pauses in force: those of every controller, and those of one controller."""
    pauses = [Pause.from_row(row) for row in rows]
    return [p for p in pauses if p.controller is None], [p for p in pauses if p.controller is not None]


def _recorded_dispatchers(rows: list[Row]) -> list[dict[str, Any]]:
    """The live dispatchers' records, the most recent pass first, their controllers decoded (JSON text on MySQL)."""
    decoded = (dict(d, controllers=json.loads(d["controllers"]) if isinstance(d["controllers"], str) else d["controllers"])
               for d in rows)
    return sorted(decoded, key=lambda d: float(d["last_pass_seconds"]))


class Reports(Store):
    """Reads of the queue for people, on one database session."""

    def list_jobs(
        self, *, status: str | None = None, job_name: str | None = None, since: datetime | str | None = None,
        before_id: int | None = None, limit: int = 50, error_like: str | None = None,
        parameters: dict[str, str] | None = None, controller: str | None = None,
    ) -> list[Job]:
        """Rows newest first (every column ``get`` reads), filtered by status, job, time and id, at most ``limit``.
        ``error_like``: ``last_error`` contains this text, ignoring case; ``parameters``: each named parameter, as text,
        equals the value given (at most ``MAX_PARAMETER_FILTERS``, keys of letters, digits, ``_``, ``-``, ``.``)."""
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
        filters = dict(status=status, job_name=job_name, since=time_filter(since), before_id=before_id, limit=limit,
                       controller=controller)
        rows = cast(list[Job], self._run("list_jobs", **filters, **parameter_slots(parameters),
                                         error_pattern=like_contains(error_like) if error_like is not None else None))
        for row in rows:
            row["parameters"] = parameters_of(row["parameters"])
        return rows

    def events(self, job_id: int) -> list[JobEvent]:
        """A row's history, oldest first."""
        return cast(list[JobEvent], self._run("job_events", id=job_id))

    def oldest_pending(self) -> OldestPending | None:
        """The pending row scheduled earliest (paused or not), or None when nothing is pending."""
        rows = cast(list[OldestPending], self._run("oldest_pending_job"))
        return rows[0] if rows else None

    def finished_per_hour(self, hours: int) -> list[HourCounts]:
        """Rows finished per hour (``hour``: its start, UTC), completed / failed / cancelled, over the current
        hour and the ``hours - 1`` before it; hours with none are absent."""
        if hours < 1:
            raise InvalidInput("hours must be 1 or more")
        return cast(list[HourCounts], self._run("finished_per_hour", hours=hours))

    def stats_per_bucket(self, window_seconds: int, bucket_seconds: int) -> list[Row]:
        """Builds started, completed, failed and cancelled per bucket of ``bucket_seconds`` (a multiple of 300) over
        the last ``window_seconds``, from the five-minute aggregate the write path keeps (``bucket_epoch``: the
        bucket's start in seconds since 1970); buckets with none are absent."""
        _check_buckets(window_seconds, bucket_seconds)
        return self._run("stats_per_bucket", window=window_seconds, bucket=bucket_seconds)

    def depth_per_bucket(self, window_seconds: int, bucket_seconds: int) -> list[Row]:
        """The most pending and processing rows the dispatchers' gauges saw per bucket (as ``stats_per_bucket``)."""
        _check_buckets(window_seconds, bucket_seconds)
        return self._run("depth_per_bucket", window=window_seconds, bucket=bucket_seconds)

    def timing_bins(self, window_seconds: int) -> dict[str, dict[int, int]]:
        """Queue wait and build duration of the rows finished in the last ``window_seconds`` (whole hours, the
        current one included) as histogram counts: metric ('wait', 'build') → bin → rows (bins: timeline.bin_of)."""
        found: dict[str, dict[int, int]] = {"wait": {}, "build": {}}
        for r in self._run("timing_bins", window=window_seconds):
            found[r["metric"]][int(r["bin"])] = int(r["n"])
        return found

    def recent_timings(self, limit: int) -> list[Row]:
        """The latest ``limit`` finished rows, one row per job (spelled exactly): job_name, finished (how many),
        waits and builds (their queue waits and build durations in seconds, None where the build never started)."""
        return self._run("recent_timings", limit=limit)

    def limits(self) -> list[Limit]:
        """Every job's limits (with its controller): its cap with its rows in flight, its rate with its starts of the
        last minute (either None when it has none)."""
        return cast(list[Limit], self._run("list_limits"))

    def key_holds(self, keys: Sequence[str]) -> dict[str, KeyHold]:
        """The caps of the concurrency keys ``keys`` (only those that have one), as "why waiting" reads them: one
        statement for a whole page of rows."""
        rows = self._run("key_holds", keys=json.dumps(sorted(set(keys))))
        return {r["concurrency_key"]: KeyHold(cap=r["max_in_flight"], in_flight=r["in_flight"],
                                              holders=tuple(int(i) for i in (r["holders"] or "").split(",") if i),
                                              newest=r["newest"])
                for r in rows}

    def key_limits(self) -> list[KeyLimit]:
        """Every concurrency key's cap, with its rows in flight (on every controller) and its rows waiting."""
        return cast(list[KeyLimit], self._run("list_key_limits"))

    def key_rules(self) -> list[KeyRule]:
        """Every job's rule for the keys its rows get from their parameters when their INSERT leaves them out."""
        return cast(list[KeyRule], self._run("list_key_rules"))

    def limit_history(self, limit: int = 20) -> list[LimitChange]:
        """The latest cap and rate changes, newest first: controller, job_name, kind ('cap' or 'rate'), previous
        and new cap (previous, max_in_flight) or rate (previous_per_minute, per_minute; None: none), changed_by,
        at."""
        return cast(list[LimitChange], self._run("limit_history", limit=limit))

    def stats_per_controller(self) -> list[Row]:
        """Per controller with unfinished rows: pending, due and in_flight."""
        return self._run("stats_per_controller")

    def pauses(self) -> list[Pause]:
        """Every pause in force, the pause of everything first."""
        return [Pause.from_row(r) for r in self._run("list_pauses")]

    def waiting_context(self, rows: Sequence[tuple[str, str]]) -> WaitingContext:
        """Caps, rates and in-flight counts of the (controller, job_name) pairs of ``rows``, the rows in flight on
        their controllers, every pause, and the total in flight: one statement for a whole page of rows (see
        ``waiting.why_waiting``)."""
        wanted = [{"controller": controller, "job_name": job_name} for controller, job_name in sorted(set(rows))]
        return _waiting_context_of(self._run("waiting_context", wanted=json.dumps(wanted))[0])

    def stats(self) -> Stats:
        """The queue at a glance: rows pending, due and processing, expired leases, the last hour's outcomes, ages."""
        return cast(Stats, self._run("stats")[0])

    def stats_per_job(self) -> list[JobStats]:
        """Per job: pending and in-flight rows, the oldest due row's age and the last hour's outcomes."""
        rows = self._run("stats_per_job")
        for row in rows:  # a JSON array, aggregated in no order on MySQL
            row["paused_on"] = sorted(row["paused_on"] or [])
        return cast(list[JobStats], rows)

    def in_flight_counts(self) -> dict[str, int]:
        """Processing rows per job, every spelling of its name together under one of them (the demo's summary; the
        tests' cap samplers)."""
        return {r["job_name"]: r["n"] for r in self._run("in_flight_counts")}

    def dispatchers(self) -> list[Dispatcher]:
        """Dispatchers seen in the last day, the most recent pass first, each with ``live`` and the age of
        its last pass (``last_pass_seconds``)."""
        return cast(list[Dispatcher], self._run("dispatchers"))

    def jenkins_outage(self) -> JenkinsOutage | None:
        """Since when (``since``), why (``reason``) and by whom (``dispatcher_id``) Jenkins is seen failing as a
        whole, by the live dispatcher that asked it last; None while it answers, or no live one asked."""
        rows = cast(list[JenkinsOutage], self._run("jenkins_outage"))
        return rows[0] if rows and rows[0]["since"] is not None else None
