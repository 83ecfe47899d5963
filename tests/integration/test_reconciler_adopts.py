"""The reconciler adopting what it finds in Jenkins, with a Jenkins client that answers as told: a build found
by its DISPATCH_ID whose JSON names no queue item (``queueId`` absent) must neither write "queue item None" in
the history nor forget the queue item the row already had."""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.breaker import breaker_for
from jenkins_dispatch.dispatching.dispatcher import PassSummary
from jenkins_dispatch.dispatching.reconciler import Reconciler
from jenkins_dispatch.jenkins.answers import QueueItemGone
from jenkins_dispatch.jenkins.client import Found

from ..dispatch_helpers import dispatch_settings, expire_leases
from ..stores import Queue

pytestmark = pytest.mark.both_engines


class _Jenkins:
    """Only what the reconciler asks on this path: the queue item is gone; the search finds a running build."""

    timeout_seconds = 1.0

    def __init__(self, found: Found):
        self.found = found

    def queue_item(self, queue_id: int) -> QueueItemGone:
        return QueueItemGone()

    def find_by_dispatch_id(self, job_name: str, dispatch_id: str, since_ms: int | None = None) -> Found:
        return self.found


def _expired_row(db, queue: Queue, queue_id: int | None):
    job_id = queue.enqueue("deploy", {"ENV": "x"}).id
    [claimed] = queue.claim_batch(1)
    if queue_id is not None:
        assert queue.mark_triggered(claimed, queue_id)
    expire_leases(db)
    [row] = [r for r in queue.take_expired_leases() if r.id == job_id]
    return row


def _reconcile(queue: Queue, row, found: Found) -> None:
    settings = dispatch_settings("http://jenkins.invalid/")
    reconciler = Reconciler(settings, queue, _Jenkins(found), PassSummary(), resend=lambda job, delay: None,
                            log=lambda *a, **k: None, breaker=breaker_for(settings))
    reconciler.reconcile([row])


@pytest.mark.parametrize("known_queue_id", [None, 42])
def test_a_running_build_found_without_its_queue_id_is_adopted_keeping_what_the_row_knew(db, known_queue_id):
    queue = Queue(db)
    row = _expired_row(db, queue, known_queue_id)
    _reconcile(queue, row, Found(queue_id=None, build_number=7, build_url="http://jenkins.invalid/job/deploy/7/",
                                 building=True))
    job = queue.get(row.id)
    assert job["status"] == "processing"
    assert job["build_number"] == 7
    assert job["jenkins_queue_id"] == known_queue_id  # not overwritten with nothing
    [adopted] = [e for e in queue.events(row.id) if e["event"] == "adopted"]
    assert "None" not in (adopted["detail"] or "")
    assert adopted["detail"] == "found in Jenkins: " + (f"queue item {known_queue_id}, " if known_queue_id else "") + "build #7"


def test_a_running_build_found_with_its_queue_id_is_adopted_under_it(db):
    queue = Queue(db)
    row = _expired_row(db, queue, None)
    _reconcile(queue, row, Found(queue_id=99, build_number=7, building=True))
    assert queue.get(row.id)["jenkins_queue_id"] == 99
    [adopted] = [e for e in queue.events(row.id) if e["event"] == "adopted"]
    assert adopted["detail"] == "found in Jenkins: queue item 99, build #7"
