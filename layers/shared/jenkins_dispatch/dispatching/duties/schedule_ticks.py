"""The schedules' due ticks become ordinary rows, each by one dispatcher (``../ticking.py``), every pass, Jenkins up
or not: a tick's row exists only once a pass enqueues it, so only a pass can tell it is due."""

from __future__ import annotations

from . import PassContext


class ScheduleTicks:
    """Enqueue every due tick this pass can take (one read, then one statement per tick)."""

    name = "schedule ticks"
    needs_jenkins = False

    def seconds_until_due(self) -> float:
        """Always due: the read of the due schedules is the only way to learn of a schedule added since."""
        return 0.0

    def run(self, context: PassContext) -> dict[str, int]:
        """No counts of its own: the pass counts ticks enqueued and skipped in its summary as they go."""
        context.enqueue_due_ticks()
        return {}
