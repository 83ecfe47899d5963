"""Pauses per controller (issue 23): the same job name on two controllers is two jobs, a whole controller may be
paused for maintenance, and a pause given without a controller (every pause written before pauses were per
controller) holds its job back on every controller, as it always did. The real database, on each engine."""

from __future__ import annotations

from collections import Counter

import pytest

from jenkins_dispatch.errors import InvalidInput

pytestmark = pytest.mark.both_engines


def claimed(queue, controller: str, capped: bool) -> Counter:
    jobs = queue.claim_batch(10, capped=capped, max_in_flight=100 if capped else None, controller=controller)
    return Counter(j.job_name for j in jobs)


def enqueue_on_both(queue, *names: str) -> None:
    for controller in ("default", "b"):
        for name in names:
            queue.enqueue(name, controller=controller)


@pytest.mark.parametrize("capped", [False, True])
def test_a_job_paused_on_one_controller_is_still_claimed_on_the_other(queue, capped):
    enqueue_on_both(queue, "deploy", "build")
    paused = queue.pause("deploy", controller="b", reason="b's freeze")
    assert (paused.job_name, paused.controller, paused.created, paused.pending) == ("deploy", "b", True, 1)
    assert claimed(queue, "default", capped) == {"deploy": 1, "build": 1}
    assert claimed(queue, "b", capped) == {"build": 1}
    lifted = queue.resume("deploy", controller="b")
    assert lifted.resumed and lifted.pending == 1 and lifted.still_paused == []
    assert claimed(queue, "b", capped) == {"deploy": 1}


@pytest.mark.parametrize("capped", [False, True])
def test_a_whole_controller_paused_for_maintenance_holds_only_its_rows(queue, capped):
    enqueue_on_both(queue, "deploy", "build")
    paused = queue.pause(None, controller="b", reason="Jenkins upgrade")
    assert (paused.job_name, paused.controller, paused.pending) == (None, "b", 2)
    assert claimed(queue, "b", capped) == {}
    assert claimed(queue, "default", capped) == {"deploy": 1, "build": 1}
    assert not queue.resume(None).resumed  # the pause of everything is another pause: b stays paused
    assert claimed(queue, "b", capped) == {}
    assert queue.resume(None, controller="b").resumed
    assert claimed(queue, "b", capped) == {"deploy": 1, "build": 1}


@pytest.mark.parametrize("capped", [False, True])
def test_a_pause_without_a_controller_holds_the_job_on_every_controller(queue, db, capped):
    enqueue_on_both(queue, "deploy", "build")
    # As a pause written before pauses were per controller is now: its controller NULL (the migration's meaning).
    db.run("INSERT INTO jenkins_job_pauses (job_name) VALUES ('deploy')")
    assert [(p.job_name, p.controller) for p in queue.pauses()] == [("deploy", None)]
    assert claimed(queue, "default", capped) == {"build": 1}
    assert claimed(queue, "b", capped) == {"build": 1}
    # Lifting b's own pause (there is none) leaves the pause of every controller in force.
    assert not queue.resume("deploy", controller="b").resumed
    assert claimed(queue, "b", capped) == {}
    assert queue.resume("deploy").resumed
    assert claimed(queue, "b", capped) == {"deploy": 1}


def test_pauses_on_every_controller_and_on_one_are_two_pauses_each_listed(queue):
    everywhere = queue.pause("Deploy")
    on_b = queue.pause("deploy", controller="b")
    again = queue.pause("DEPLOY", controller="b")
    assert everywhere.created and on_b.created and not again.created
    assert [(p.job_name, p.controller) for p in queue.pauses()] == [("Deploy", None), ("deploy", "b")]
    assert queue.resume("deploy").resumed
    assert [(p.job_name, p.controller) for p in queue.pauses()] == [("deploy", "b")]


def test_a_bad_controller_name_is_refused(queue):
    with pytest.raises(InvalidInput, match="controller name"):
        queue.pause("deploy", controller="Not A Name")


def test_gauges_leave_out_rows_paused_on_their_own_controller_only(queue):
    queue.enqueue("deploy", controller="b")
    queue.pause(None, controller="b")
    gauges = queue.gauges()
    assert gauges["oldest_pending_seconds"] is None
    assert not gauges["everything_paused"]
    queue.enqueue("deploy")
    assert queue.gauges()["oldest_pending_seconds"] is not None
