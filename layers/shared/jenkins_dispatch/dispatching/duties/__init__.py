"""Duties: what a dispatcher's pass does besides claiming and triggering, one file each behind one interface.

A ``Duty`` has a ``name``, says how long until it is due (``seconds_until_due``, answered from memory: a duty that is
not due costs no statement) and does its work on the pass (``run``), returning counts that the pass adds to its
summary. ``needs_jenkins`` sorts them: the others run first, whatever Jenkins's state; those that ask Jenkins run once
the breaker lets the pass go on.

- ``schedule_ticks.py``: the schedules' due ticks become rows (every pass; each tick taken by one dispatcher).
- ``unknown_controllers.py``: pending rows naming no configured controller fail (the first lane's passes).
- ``pruner.py``: final rows past PRUNE_FINISHED_AFTER go, a batch a pass, one dispatcher at a time.
- ``reconcile.py``: expired leases (``reconciler.py``), once Jenkins may be asked.

The heartbeat (``../heartbeat.py``) is not a step of the pass: it records how the pass ended, so the lane writes it
after each pass. Same imports as ``dispatching/``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...config import Settings
    from ...store.db import Session
    from ...store.dispatcher import DispatcherStore


class PassContext(Protocol):
    """What a duty is given: the pass (``Dispatcher``) with its settings (its controller's), database session and
    queue; and the two steps that write their counts into the pass summary as they go (a pass that ends part-way
    keeps them): the schedules' ticks, and the reconciler (which needs the pass's Jenkins client, breaker and
    re-send path)."""

    settings: Settings
    db: Session
    queue: DispatcherStore

    def enqueue_due_ticks(self) -> None:
        """Enqueue the schedules' due ticks (``../ticking.py``)."""

    def reconcile(self) -> None:
        """Run the reconciler over the pass's controller's expired leases."""


class Duty(Protocol):
    """One duty of a pass."""

    name: str
    needs_jenkins: bool

    def seconds_until_due(self) -> float:
        """How long until it is due (0 or less: now), from memory: never a statement."""

    def run(self, context: PassContext) -> dict[str, int]:
        """Do it on the pass's session; return what it did, as counts named like the pass summary's fields."""


def due(duties: Iterable[Duty], *, needs_jenkins: bool) -> list[Duty]:
    """The duties of one kind (asking Jenkins or not) that are due now, in their order."""
    return [duty for duty in duties if duty.needs_jenkins is needs_jenkins and duty.seconds_until_due() <= 0]


def seconds_until_any_due(duties: Iterable[Duty]) -> float | None:
    """How long until the first of ``duties`` is due (None: none of them ever is)."""
    waits = [duty.seconds_until_due() for duty in duties]
    finite = [wait for wait in waits if wait != float("inf")]
    return min(finite) if finite else None
