"""What an operator's request for one job (retry it, cancel it) comes to, by the job's status: the rule every
command follows (docs/operating.md). Pure."""

from __future__ import annotations

from ..store.queue import FINAL_STATUSES

RETRY, CANCEL = "retry", "cancel"
UNFINISHED_STATUSES = ("pending", "processing")
ELIGIBLE_STATUSES = {RETRY: FINAL_STATUSES, CANCEL: UNFINISHED_STATUSES}

ACT = "act"  # the job can go where it is asked to: do it, exit 0
ALREADY = "already"  # it is already in the state asked for: change nothing, say so, exit 0
IMPOSSIBLE = "impossible"  # no such transition from its status: change nothing, exit 2
ALREADY_STATUS = {RETRY: "pending", CANCEL: "cancelled"}  # where each action leads


def verdict(action: str, status: str) -> str:
    """``ACT``, ``ALREADY`` or ``IMPOSSIBLE``: what ``action`` on a job in ``status`` comes to. Cancelling a
    cancelled job, or retrying a pending one, asks for what already holds; cancelling a finished job, or retrying
    one in Jenkins, asks for a transition there is not."""
    if status in ELIGIBLE_STATUSES[action]:
        return ACT
    return ALREADY if status == ALREADY_STATUS[action] else IMPOSSIBLE
