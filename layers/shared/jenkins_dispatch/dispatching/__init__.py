"""Getting queued jobs into Jenkins and keeping their rows true: one pass (``dispatcher.py``), expired leases
(``reconciler.py``), cancelling in Jenkins (``cancelling.py``), the pure decisions (``decisions.py``), pass
after pass (``dispatch_loop.py``, the supervisor; ``lanes.py``, one lane per controller), the duties of a pass
(``duties/``: schedule ticks, the unknown-controller sweep, the pruner, reconciling), waiting for work (``wakeup.py``)
and heartbeats (``heartbeat.py``); when a Jenkins is down (``breaker.py``), when a schedule ticks (``cron.py``,
pure) and its ticks enqueued exactly once (``ticking.py``).

Uses ``jenkins/`` and ``store/`` (never SQL or HTTP of its own). Knows nothing of Lambda (its entry, the
container's heartbeat and the invocation's time, is ``lambda_entry.py``). Must not import ``callbacks/``,
``operating/``, ``runtime`` or the entry points (``cli``, ``serve``, ``custom_resource``, ``lambda_entry``).
"""
