"""Expired leases: rows a crashed worker left, lost answers, lost callbacks (``../reconciler.py``), before the pass
claims anything new. It asks Jenkins, so it runs once the controller's breaker lets the pass go on."""

from __future__ import annotations

from . import PassContext


class Reconcile:
    """Every pass: the leases that expired since the last one."""

    name = "reconcile"
    needs_jenkins = True

    def seconds_until_due(self) -> float:
        """Always due: a lease may have expired since the last pass."""
        return 0.0

    def run(self, context: PassContext) -> dict[str, int]:
        """No counts of its own: the reconciler writes them into the pass summary as it goes (``reconciled``), so a
        pass that ends part-way keeps them."""
        context.reconcile()
        return {}
