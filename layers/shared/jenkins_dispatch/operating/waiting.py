"""Why a pending job is not in Jenkins yet, in one line: a pure decision (no I/O), shared by `show`, `ls` and
the web UI. The caller reads what it needs once (``Reports.waiting_context`` for a whole page of rows).

When several reasons hold, the one a person must act on or know about first wins: superseded by a newer row of
its concurrency key (the next claim cancels it, whatever else holds it), paused (someone chose this), not due yet,
backing off after an error, the job's cap, its key's cap, the job's rate, the global cap, the row's controller's
cap, Jenkins unavailable. Caps and rates are the row's controller's, as the capped claim keeps them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..config import DEFAULT_CONTROLLER
from ..moments import from_iso
from ..store.queue import KeyHold, Pause, RateWindow
from .display import duration, when


@dataclass(frozen=True)
class JenkinsOutage:
    """Jenkins as a whole failing, as the dispatchers last saw it (``controller``: that controller's Jenkins,
    when the row's own controller is known to be down)."""

    since: datetime
    reason: str
    controller: str | None = None


@dataclass(frozen=True)
class Waiting:
    """Why a pending row waits. ``code``: superseded · paused · not_due · backing_off · controller_not_configured ·
    job_cap · key_cap · rate_limit · global_cap · controller_cap · jenkins_unavailable · no_dispatcher (due, but no
    dispatcher is live to take it) · due (nothing holds it back: the next pass takes it)."""

    code: str
    text: str
    until: datetime | None = None  # when it becomes due (not_due, backing_off)

    def as_dict(self) -> dict[str, Any]:
        """The reason as a plain dict, for ``--json``."""
        return {"code": self.code, "text": self.text, "until": self.until}


UNKNOWN_CONTROLLER_STATE: Mapping[str, Any] = {"status": "unknown", "since": None, "reason": None, "seen_by": None}


def controller_health(dispatchers: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pure: each controller's breaker (``status`` ok · unavailable, ``since``, ``reason``, ``seen_by``) as the live
    dispatcher that passed last recorded it, among those that know it (a recorded "unknown" is no word on it).
    ``dispatchers``: the most recent pass first, as ``Reports.dispatchers`` gives them."""
    found: dict[str, dict[str, Any]] = {}
    for dispatcher in dispatchers:
        if not dispatcher["live"]:
            continue
        for name, state in (dispatcher.get("controllers") or {}).items():
            if name not in found and state.get("status") in ("ok", "unavailable"):
                found[name] = {"status": state["status"], "since": state.get("since"), "reason": state.get("reason"),
                               "seen_by": dispatcher["id"]}
    return found


def jenkins_outage_for(controller: str, health: Mapping[str, Mapping[str, Any]],
                       whole: JenkinsOutage | None) -> JenkinsOutage | None:
    """Pure: the outage a row of ``controller`` waits for. Its own controller's word when a live dispatcher
    recorded one (``health``, ``controller_health``): down, or up (then nothing, whatever another controller's
    lane said of "Jenkins as a whole" last); else ``whole``, as with one controller. The controller is named
    when there are several, or it is not the default one."""
    state = health.get(controller)
    if state is None:
        return whole
    if state["status"] != "unavailable":
        return None
    since = state.get("since")
    try:
        moment = from_iso(since) if isinstance(since, str) else since
    except ValueError:
        moment = None
    if not isinstance(moment, datetime):
        return whole
    named = controller if len(health) > 1 or controller != DEFAULT_CONTROLLER else None
    return JenkinsOutage(moment, state.get("reason") or "no reason recorded", named)


def cap_full(cap: int | None, in_flight: int) -> bool:
    """Whether a cap (None: none) holds rows back while ``in_flight`` of its rows are in Jenkins (0: always)."""
    return cap is not None and in_flight >= cap


def held_back(*, paused: bool, cap: int | None, in_flight: int, pending: int,
              paused_on: Sequence[str] = ()) -> str:
    """What keeps a job's pending rows out of Jenkins, in a word (`stats`'s table): paused (on every controller or
    the default one), cap 0 or cap full (the default controller's cap), paused on other controllers
    (``paused_on``: their rows only); '-' when nothing of the kind does. The per-job side of ``why_waiting``: the
    same order, the same cap rule."""
    if paused:
        return "paused"
    if cap == 0:
        return "cap 0"
    if pending and cap_full(cap, in_flight):
        return "cap full"
    if paused_on:
        return "paused on " + ", ".join(paused_on)
    return "-"


def _rate_limited(rate: RateWindow) -> Waiting:
    """The rate's line: how many started in the minute, and when the next may start (the dispatcher's next pass
    after that takes it)."""
    text = f"rate limit {rate.per_minute}/min: {rate.started} started in the last minute"
    if rate.next_start_seconds is not None:
        text += f"; next start in ~{max(1, math.ceil(rate.next_start_seconds))}s"
    return Waiting("rate_limit", text)


def not_configured_text(controller: str, *, in_flight: int = 0, pending: int = 0) -> str:
    """What a controller missing from the configuration means for its rows, in one line (`show`, `stats`, `doctor`,
    the page): its rows in flight are stranded — counted against no cap, never settled as if their end were known,
    until an operator cancels them or the controller is configured again — and its pending rows fail at the next
    pass with nothing sent."""
    parts = []
    if in_flight:
        parts.append(f"{in_flight} in flight, stranded until it is configured again (then the reconciler settles "
                     "them from its Jenkins) or they are cancelled (`jenkins-dispatch cancel ID`); they count against "
                     "no cap")
    if pending:
        parts.append(f"{pending} pending, failed at the next dispatcher pass with nothing sent")
    return f"controller {controller} is not configured" + (f": {'; '.join(parts)}" if parts else "")


def stranded_text(controller: str, job_id: int) -> str:
    """Why a processing row of a controller missing from the configuration goes nowhere, and the ways out."""
    return (f"controller {controller} is not configured: this row is stranded — it counts against no cap and is never "
            f"settled as if its end were known; `jenkins-dispatch cancel {job_id}` settles it cancelled, or configure "
            f"{controller} again and the reconciler settles it from its Jenkins")


def _superseded(row: Mapping[str, Any], key: KeyHold | None) -> Waiting | None:
    """Newest wins on the row's key, and a newer row of it waits: the next claim cancels this one."""
    if key is None or key.newest is None or row.get("id") is None or row["id"] >= key.newest:
        return None
    return Waiting("superseded", f"superseded by #{key.newest}: the next dispatcher claim cancels it (newest wins on "
                                 f"key {row['concurrency_key']})")


def _key_capped(row: Mapping[str, Any], key: KeyHold | None) -> Waiting | None:
    """The row's key at its cap: how many of its rows are in flight, and which (the first three)."""
    if key is None or not cap_full(key.cap, key.in_flight):
        return None
    name = row["concurrency_key"]
    if key.cap == 0:
        return Waiting("key_cap", f"key {name} has a cap of 0: its rows are held back (`jenkins-dispatch limits rm "
                                  f"--key {name}` lifts it)")
    held = ", ".join(f"#{i}" for i in key.holders)
    more = key.in_flight - len(key.holders)
    held += f" and {more} more" if more > 0 and held else ""
    return Waiting("key_cap", f"key {name} at its cap ({key.in_flight}/{key.cap} in flight"
                              + (f", held by {held})" if held else ")"))


def _paused(pause: Pause) -> Waiting:
    who = f" by {pause.paused_by}" if pause.paused_by else ""
    why = f": {pause.reason}" if pause.reason else ""
    since = f"since {when(pause.paused_at)}{who}{why}"
    on = f" --controller {pause.controller}" if pause.controller else ""
    if pause.job_name is None and pause.controller is None:
        return Waiting("paused", f"everything is paused {since} (`jenkins-dispatch resume` lifts it)")
    if pause.job_name is None:
        return Waiting("paused", f"controller {pause.controller} is paused {since} "
                                 f"(`jenkins-dispatch resume{on}` lifts it)")
    where = f" on {pause.controller}" if pause.controller else ""
    return Waiting("paused", f"paused{where} {since} (`jenkins-dispatch resume {pause.job_name}{on}` lifts it)")


def why_waiting(
    row: Mapping[str, Any],
    now: datetime,
    *,
    job_cap: int | None,
    job_in_flight: int,
    global_cap: int | None,
    total_in_flight: int,
    pause: Pause | None,
    jenkins_unavailable: JenkinsOutage | None = None,
    rate: RateWindow | None = None,
    controller_cap: int | None = None,
    controller_in_flight: int = 0,
    controller_configured: bool = True,
    dispatchers_live: int | None = None,
    key: KeyHold | None = None,
) -> Waiting | None:
    """Why ``row`` (status, scheduled_at, attempts, max_attempts, last_error) is not in Jenkins yet; None
    unless it is pending.

    ``job_cap`` / ``job_in_flight``: the row's job's cap on its controller (None: none) and its rows in flight
    there; ``global_cap`` / ``total_in_flight``: MAX_IN_FLIGHT (None: none) and every row in flight;
    ``controller_cap`` / ``controller_in_flight``: the row's controller's own max_in_flight (None: none) and its
    rows in flight; ``pause``: the
    pause holding the row back (everything's, its controller's, its job's on every controller or on the row's
    controller: ``WaitingContext.pause_of``), if any; ``jenkins_unavailable``: how the
    dispatchers last found Jenkins, if it was failing; ``rate``: the job's rate and its last minute, if it has
    one; ``controller_configured``: whether the row's controller is in the configuration (not: the next pass fails
    the row); ``dispatchers_live``: how many dispatchers are live (None: unknown) — with none, a due row waits for
    one to start; ``key``: the cap of the row's concurrency key (``concurrency_key``; None: no key, or no cap).
    """
    if row["status"] != "pending":
        return None
    if (superseded := _superseded(row, key)) is not None:
        return superseded
    if pause is not None:
        return _paused(pause)
    if (not_yet := _not_due_yet(row, now)) is not None:
        return not_yet
    controller = row.get("controller") or DEFAULT_CONTROLLER
    if not controller_configured:
        return Waiting("controller_not_configured",
                       f"controller {controller} is not configured: the next dispatcher pass fails it, nothing sent "
                       "(configure it in JENKINS_CONTROLLERS first to have it run)")
    if cap_full(job_cap, job_in_flight):
        if job_cap == 0:
            return Waiting("job_cap", "job cap full (0/0): a cap of 0 holds this job back")
        return Waiting("job_cap", f"job cap full ({job_in_flight}/{job_cap} in flight)")
    if (key_capped := _key_capped(row, key)) is not None:
        return key_capped
    if rate is not None and rate.full:
        return _rate_limited(rate)
    if cap_full(global_cap, total_in_flight):
        return Waiting("global_cap", f"global cap full ({total_in_flight}/{global_cap} in flight, MAX_IN_FLIGHT)")
    if cap_full(controller_cap, controller_in_flight):
        return Waiting("controller_cap", f"controller {controller}'s cap full ({controller_in_flight}/{controller_cap} "
                                         "in flight, max_in_flight in JENKINS_CONTROLLERS)")
    if jenkins_unavailable is not None:
        return _jenkins_down(jenkins_unavailable)
    return _due(row["scheduled_at"], now, dispatchers_live)


def _not_due_yet(row: Mapping[str, Any], now: datetime) -> Waiting | None:
    """Not due yet: scheduled later (a first attempt) or backing off after a failed one; or scheduled past any
    time this tool can show (never taken). None when it is due."""
    scheduled_at = row["scheduled_at"]
    if not isinstance(scheduled_at, datetime):
        if getattr(scheduled_at, "later", False):  # an OddTime past the year 9999
            return Waiting("not_due", f"not due until {when(scheduled_at)}, later than any time this tool can show: "
                                      "never taken (give it a scheduled_at up to 9999-12-31, or cancel it)")
        return None
    if scheduled_at <= now:
        return None
    left = duration((scheduled_at - now).total_seconds())
    if row["attempts"] > 0:
        error = f": {row['last_error']}" if row.get("last_error") else ""
        return Waiting("backing_off", f"backing off until {when(scheduled_at)} (in {left}) after attempt "
                                      f"{row['attempts']} of {row['max_attempts']}{error}", scheduled_at)
    return Waiting("not_due", f"not due until {when(scheduled_at)} (in {left})", scheduled_at)


def _jenkins_down(outage: JenkinsOutage) -> Waiting:
    which = f" (controller {outage.controller})" if outage.controller else ""
    return Waiting("jenkins_unavailable", f"Jenkins unavailable{which} since {when(outage.since)}: {outage.reason}")


def _due(scheduled_at: Any, now: datetime, dispatchers_live: int | None) -> Waiting:
    """Nothing holds it back: the next pass takes it, if a dispatcher is live to run one."""
    since = (f"for {duration((now - scheduled_at).total_seconds())}" if isinstance(scheduled_at, datetime)
             else f"since {when(scheduled_at)}")
    if dispatchers_live == 0:
        return Waiting("no_dispatcher", f"due {since}, but no dispatcher is running (none has recorded a pass "
                                        "lately): start `jenkins-dispatch serve`, or check the dispatcher function's "
                                        "schedule (`jenkins-dispatch stats` lists the dispatchers)")
    return Waiting("due", f"due {since}: the next dispatcher pass takes it")
