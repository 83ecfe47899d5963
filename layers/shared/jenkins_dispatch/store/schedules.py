"""Schedules as data: the reads and writes of ``jenkins_job_schedules``, each a method named for what it does.

A store (``runner.py``) of the statements of ``dialects/<engine>/queries/schedules.sql``; it never computes a tick:
the times it stores come from ``dispatching/cron.py`` through its callers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import InvalidInput
from .db import DatabaseError, Row
from .runner import Store, moment_of, parameters_of

SCHEDULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")  # the table's check, said before it is met
DEFAULT_CONTROLLER = "default"


@dataclass(frozen=True)
class DueTick:
    """A schedule whose stored next tick has come, as a pass read it (``seen`` is the compare-and-set's token)."""

    name: str
    cron: str
    timezone: str
    seen: datetime  # its next_tick when read
    now: datetime  # the database's clock at the read


@dataclass(frozen=True)
class TakenTick:
    """A tick this caller took: the row it enqueued, or (``job_id`` None) the run in flight that made a no-overlap
    schedule skip it."""

    job_id: int | None
    running_job_id: int | None = None


def check_name(name: str) -> str:
    """A schedule's name as it may be stored, or InvalidInput."""
    if not isinstance(name, str) or not SCHEDULE_NAME.match(name):
        raise InvalidInput(f"bad schedule name {name!r}: 1 to 200 letters, digits, '_', '-' or '.', starting "
                           "with a letter or digit")
    return name


def _schedule(row: Row) -> Row:
    row = dict(row)
    row["parameters"] = parameters_of(row["parameters"])
    for key in ("next_tick", "last_tick", "paused_at", "created_at", "last_skipped_tick"):
        row[key] = moment_of(row[key])
    row["enabled"] = bool(row["enabled"])
    row["no_overlap"] = bool(row["no_overlap"])
    row["skipped_ticks"] = int(row["skipped_ticks"])
    row["state"] = "enabled" if row["enabled"] else "paused"
    return row


class Schedules(Store):
    """Schedule operations on one database session. Every method is one round trip."""

    def _refusal(self, exc: DatabaseError) -> str:
        return f"the schedule was refused: {exc}"

    def now(self) -> datetime:
        """The database's clock (every tick is computed from it, never from a host's)."""
        return _stamp(self._run("database_now")[0]["now"])

    def add(self, name: str, job_name: str, parameters: dict, *, cron: str, timezone: str, priority: int,
            controller: str, next_tick: datetime, no_overlap: bool = False, concurrency_key: str | None = None,
            fairness_key: str | None = None) -> bool:
        """Store a new schedule; False when one of that name (any case) exists already (nothing changed).
        ``no_overlap``: skip a tick while the previous run is still pending or processing. The keys: its rows'."""
        rows = self._run("add_schedule", name=check_name(name), job_name=job_name, parameters=json.dumps(parameters),
                         cron=cron, timezone=timezone, priority=priority, controller=controller, next_tick=next_tick,
                         no_overlap=bool(no_overlap), concurrency_key=concurrency_key, fairness_key=fairness_key)
        return bool(rows)

    def remove(self, name: str) -> bool:
        """Delete a schedule (the rows it enqueued stay); False when there is none of that name."""
        return bool(self._run("remove_schedule", name=name))

    def pause(self, name: str, paused_by: str | None = None) -> bool:
        """Stop enqueuing its ticks; False when it is not enabled (or does not exist)."""
        return bool(self._run("pause_schedule", name=name, paused_by=paused_by))

    def change(self, name: str, *, cron: str | None = None, timezone: str | None = None, priority: int | None = None,
               no_overlap: bool | None = None, next_tick: datetime | None = None) -> bool:
        """Change the fields given (None: as it is) in place, with ``next_tick`` for a new cron or zone; False
        when there is no such schedule."""
        return bool(self._run("change_schedule", name=name, cron=cron, timezone=timezone, priority=priority,
                              no_overlap=no_overlap, next_tick=next_tick))

    def resume(self, name: str, next_tick: datetime) -> bool:
        """Enqueue its ticks again from ``next_tick`` on; False when it is not paused (or does not exist)."""
        return bool(self._run("resume_schedule", name=name, next_tick=next_tick))

    def listed(self, name: str | None = None) -> list[Row]:
        """Every schedule (or the one named), by name, with its state and its last tick's row's status."""
        return [_schedule(r) for r in self._run("list_schedules", name=name)]

    def get(self, name: str) -> Row | None:
        """One schedule by name (any case), or None."""
        rows = self.listed(name)
        return rows[0] if rows else None

    def due(self, limit: int) -> list[DueTick]:
        """Up to ``limit`` enabled schedules whose next tick has come, the oldest tick first."""
        return [DueTick(name=r["name"], cron=r["cron"], timezone=r["timezone"], seen=_stamp(r["next_tick"]),
                        now=_stamp(r["now"]))
                for r in self._run("due_schedules", limit=limit)]

    def take_tick(self, due: DueTick, tick: datetime, next_tick: datetime) -> TakenTick | None:
        """Enqueue ``tick`` of the schedule (its row's scheduled_at) and move its next tick to ``next_tick``, if
        the schedule is still enabled and still at ``due.seen``: the row enqueued, else None (another dispatcher
        took the tick, or the schedule was paused or removed meanwhile). A no-overlap schedule whose previous run
        is still pending or processing takes the tick without a row (``job_id`` None, ``running_job_id`` that
        run). One statement."""
        rows = self._run("take_tick", name=due.name, seen=due.seen, tick=tick, next_tick=next_tick)
        if not rows:
            return None
        return TakenTick(job_id=rows[0]["job_id"], running_job_id=rows[0]["running_job_id"])

    def scheduled_job_names(self) -> list[Row]:
        """Each job some schedule enqueues (job_name), with the names of those schedules (``schedules``)."""
        return self._run("scheduled_job_names")


def _stamp(value: Any) -> datetime:
    """A moment the statement always returns (the clock, a due schedule's NOT NULL next tick), in UTC."""
    stamp = moment_of(value)
    assert stamp is not None, "a NOT NULL moment came back empty"
    return stamp
