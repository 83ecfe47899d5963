"""The first step of every dispatcher pass: enqueue the schedules' due ticks, each exactly once.

Every pass of every dispatcher (`serve`, the Lambda function, `jenkins-dispatch dispatch`) asks which schedules
have a tick due, computes each one's tick and the tick after it (``cron.py``, from the database's clock), and
takes the tick with ONE statement (``Schedules.take_tick``): a compare-and-set on the schedule's next tick under
a row lock. Whichever pass takes it enqueues its row; the others enqueue nothing. No extra function, timer or
rule: a dispatcher that runs passes runs the schedules.

Ticks missed while no dispatcher ran (all stopped, a long outage) are not replayed one by one: the latest of them
is enqueued (its scheduled_at in the past, so it is due at once) and the others are counted as skipped.

A no-overlap schedule (``schedule add … --no-overlap``) whose previous run is still pending or processing takes
its tick without a row: the same statement decides it under the schedule's row lock, so the tick is consumed
once, skipped, however many passes race for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInput
from ..observability import MetricUnit, logger, metrics
from ..store.schedules import Schedules
from .cron import latest_tick, next_tick, ticks_between

DUE_BATCH = 500  # due schedules read at once; a pass reads again while a batch was full and it took some


@dataclass
class Ticked:
    """What one pass did with the due ticks."""

    enqueued: int = 0  # ticks this pass enqueued (a row each)
    skipped: int = 0  # ticks not enqueued: missed while nothing ran, or skipped_in_flight
    skipped_in_flight: int = 0  # ticks of no-overlap schedules skipped: the previous run was still in flight
    taken_elsewhere: int = 0  # due ticks another dispatcher took first (or a pause or rm came first)


def enqueue_due_ticks(schedules: Schedules, batch: int = DUE_BATCH) -> Ticked:
    """Enqueue every due tick this pass can take: one read per ``batch`` due schedules, one statement per tick."""
    done = Ticked()
    while True:
        due = schedules.due(batch)
        taken = 0
        for seen in due:
            try:
                tick = latest_tick(seen.cron, seen.timezone, seen.now)
                following = next_tick(seen.cron, seen.timezone, tick)
                missed = ticks_between(seen.cron, seen.timezone, seen.seen, tick)
            except InvalidInput as exc:  # written by hand into the table: say so, and leave it alone
                logger.error("schedule skipped: its cron expression or time zone is not valid",
                             extra={"schedule": seen.name, "reason": str(exc)})
                continue
            taken_tick = schedules.take_tick(seen, max(tick, seen.seen), following)
            if taken_tick is None:
                done.taken_elsewhere += 1
                continue
            taken += 1
            done.skipped += missed
            if taken_tick.job_id is None:
                done.skipped += 1
                done.skipped_in_flight += 1
                logger.info("schedule tick skipped: its previous run is still in flight (no overlap)",
                            extra={"schedule": seen.name, "tick": tick.isoformat(),
                                   "running_job_id": taken_tick.running_job_id, "ticks_skipped": missed})
                continue
            done.enqueued += 1
            logger.info("schedule tick enqueued", extra={"schedule": seen.name, "tick": tick.isoformat(),
                                                         "job_id": taken_tick.job_id, "ticks_skipped": missed})
        if len(due) < batch or not taken:
            break
    if done.enqueued:
        metrics.add_metric(name="TicksEnqueued", unit=MetricUnit.Count, value=done.enqueued)
    if done.skipped:
        metrics.add_metric(name="TicksSkipped", unit=MetricUnit.Count, value=done.skipped)
    return done
