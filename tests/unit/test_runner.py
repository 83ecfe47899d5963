"""The store runner's one decision that needs no database: how long a deadlock victim waits before its block runs
again (the retry itself is proven against both servers in tests/integration/test_queue_locks.py)."""

from __future__ import annotations

import pytest

from jenkins_dispatch.store.runner import VICTIM_ATTEMPTS, pause_before_rerun


@pytest.mark.parametrize(("victims", "seconds"), [
    (1, 0.05),  # the first rerun: long enough for the woken session to lock what it waited for
    (2, 0.10),  # picked again: wait longer
])
def test_a_victim_waits_longer_each_time_it_is_picked(victims, seconds):
    assert pause_before_rerun(victims) == pytest.approx(seconds)


def test_the_pauses_before_giving_up_stay_well_under_a_lock_timeout():
    # Every rerun a block may get, waited in full, is a small part of the 5 s a session waits for a lock.
    assert sum(pause_before_rerun(n) for n in range(1, VICTIM_ATTEMPTS)) <= 0.5
