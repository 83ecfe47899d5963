"""What an operator does with schedules (`jenkins-dispatch schedule …` and the web page): add, list, remove,
pause, resume, and turn no-overlap on or off. Every input is checked before anything is stored; ticks are computed from the database's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import inputs
from ..dispatching.cron import DEFAULT_TIMEZONE, check_expression, next_tick, zone
from ..errors import Conflict, InvalidInput, NotFound
from ..jenkins.jobs import job_name_error
from ..store.db import Row
from ..store.schedules import DEFAULT_CONTROLLER, Schedules, check_name


@dataclass(frozen=True)
class ScheduleChange:
    """What an add, pause or resume did."""

    name: str
    changed: bool  # False: it was already so (pause of a paused schedule, resume of an enabled one)
    next_tick: datetime | None = None  # the next tick it will enqueue (None while paused)


def add_schedule(schedules: Schedules, name: str, job_name: str, parameters: dict | None = None, *, cron: str,
                 timezone: str = DEFAULT_TIMEZONE, priority: int = 0,
                 controller: str = DEFAULT_CONTROLLER, no_overlap: bool = False, concurrency_key: str | None = None,
                 fairness_key: str | None = None) -> ScheduleChange:
    """Store a schedule whose first tick is the first after now. Conflict when the name is taken; InvalidInput
    (nothing stored) for a bad name, job, parameter name, priority, cron expression, time zone or controller name
    (whether the controller is configured is the caller's to check: it holds the configuration). ``no_overlap``: a
    tick that comes while the previous run is still pending or processing is skipped. The keys are its rows'
    (``Producers.enqueue``'s)."""
    check_name(name)
    parameters = {} if parameters is None else parameters
    if error := (job_name_error(job_name) or inputs.parameters_error(parameters) or _priority_error(priority)
                 or inputs.controller_name_error(controller)
                 or (concurrency_key is not None and inputs.row_key_error("concurrency", concurrency_key))
                 or (fairness_key is not None and inputs.row_key_error("fairness", fairness_key))):
        raise InvalidInput(error)
    cron = check_expression(cron)
    zone(timezone)
    first = next_tick(cron, timezone, schedules.now())  # also refuses an expression that never matches
    if not schedules.add(name, job_name, parameters, cron=cron, timezone=timezone, priority=priority,
                         controller=controller, next_tick=first, no_overlap=no_overlap,
                         concurrency_key=concurrency_key, fairness_key=fairness_key):
        raise Conflict(f"a schedule named {name!r} exists already: `jenkins-dispatch schedule rm {name}` first")
    return ScheduleChange(name=name, changed=True, next_tick=first)


def _priority_error(priority: int) -> str | None:
    """The rows' priority, held to the column's range (the schedule's and its rows')."""
    return None if (error := inputs.PRIORITY.error(priority)) is None else f"priority: {error}"


def remove_schedule(schedules: Schedules, name: str) -> None:
    """Delete a schedule (the rows it enqueued stay); NotFound when there is none."""
    if not schedules.remove(name):
        raise NotFound(f"no schedule named {name!r}")


def pause_schedule(schedules: Schedules, name: str, paused_by: str | None = None) -> ScheduleChange:
    """Stop enqueuing its ticks (its rows already enqueued stay); pausing a paused one changes nothing."""
    changed = schedules.pause(name, paused_by)
    if not changed and schedules.get(name) is None:
        raise NotFound(f"no schedule named {name!r}")
    return ScheduleChange(name=name, changed=changed)


def change_schedule(schedules: Schedules, name: str, *, cron: str | None = None, timezone: str | None = None,
                    priority: int | None = None, no_overlap: bool | None = None) -> ScheduleChange:
    """Change a schedule in place (its ticks, skips and last row stay), from its next tick on: the fields given
    (None: as it is); a new cron or zone moves its next tick to the first after now. Naming what it is already
    changes nothing. NotFound when there is no such schedule; InvalidInput (nothing changed) for a bad cron
    expression, zone or priority, or when nothing is given."""
    if cron is None and timezone is None and priority is None and no_overlap is None:
        raise InvalidInput("nothing to change: give --cron, --timezone, --priority, --no-overlap or --overlap")
    if priority is not None and (error := _priority_error(priority)):
        raise InvalidInput(error)
    if cron is not None:
        cron = check_expression(cron)
    if timezone is not None:
        zone(timezone)
    found = schedules.get(name)
    if found is None:
        raise NotFound(f"no schedule named {name!r}")

    def new(value: Any, key: str) -> Any:
        """The value given when it differs from the schedule's, else None (as it is)."""
        return None if value is None or value == found[key] else value

    cron, timezone, priority, no_overlap = (new(cron, "cron"), new(timezone, "timezone"), new(priority, "priority"),
                                            new(no_overlap, "no_overlap"))
    if cron is None and timezone is None and priority is None and no_overlap is None:
        return ScheduleChange(name=found["name"], changed=False, next_tick=found["next_tick"])
    following = None
    if cron is not None or timezone is not None:  # also refuses an expression that never matches
        following = next_tick(cron or found["cron"], timezone or found["timezone"], schedules.now())
    if not schedules.change(found["name"], cron=cron, timezone=timezone, priority=priority, no_overlap=no_overlap,
                            next_tick=following):
        raise NotFound(f"no schedule named {name!r}")  # removed meanwhile
    return ScheduleChange(name=found["name"], changed=True, next_tick=following or found["next_tick"])


def resume_schedule(schedules: Schedules, name: str) -> ScheduleChange:
    """Enqueue its ticks again from the first after now (the ones missed while paused are not); resuming an
    enabled one changes nothing."""
    found = schedules.get(name)
    if found is None:
        raise NotFound(f"no schedule named {name!r}")
    if found["enabled"]:
        return ScheduleChange(name=found["name"], changed=False, next_tick=found["next_tick"])
    following = next_tick(found["cron"], found["timezone"], schedules.now())
    changed = schedules.resume(found["name"], following)
    return ScheduleChange(name=found["name"], changed=changed, next_tick=following if changed else None)


def list_schedules(schedules: Schedules) -> list[Row]:
    """Every schedule with its state, next tick, last tick and its row's status."""
    return schedules.listed()
