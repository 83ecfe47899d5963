"""What a pass did is counted even when the pass ends early.

A pass that triggered (and recorded) a job, then met a database error before its end, used to publish
none of its counts: `serve`'s jenkins_dispatch_triggered_total stayed at 0 for a job that Jenkins had, for good
(the next pass does not count it again). Found by CI on MariaDB (test_controllers_metrics: a row with its queue
item recorded, its controller's Triggered counter 0).
"""

from __future__ import annotations

import json
import threading

import pytest

from jenkins_dispatch.dispatching import dispatcher as dispatcher_module
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.errors import DatabaseBusy, DispatchError
from jenkins_dispatch.observability import MetricsFacade
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import dispatch_settings, wait_for

pytestmark = pytest.mark.both_engines


def _emitted(text: str, name: str) -> float:
    """The sum of every value of ``name`` in the EMF lines printed (a line holds a list when added twice)."""
    total = 0.0
    for line in (json.loads(s) for s in text.splitlines() if s.startswith("{")):
        value = line.get(name, 0)
        total += sum(value) if isinstance(value, list) else value
    return total


def test_a_pass_that_ends_early_still_counts_what_it_triggered(jenkins, queue, db, monkeypatch, capsys):
    facade = MetricsFacade()
    facade.configure(emf=True)
    monkeypatch.setattr(dispatcher_module, "metrics", facade)
    # One trigger at a time, each answered 1.5 s after Jenkins queued it: the first is recorded well before
    # the second can be, and the second's record then waits on a row another session holds, until the
    # session's lock timeout (5 s) ends the pass.
    jenkins.add_fault(path="buildWithParameters$", slow_seconds=1.5)
    settings = dispatch_settings(jenkins.base_url, BATCH_SIZE="1", MAX_PARALLEL_TRIGGERS="1",
                                 JENKINS_TIMEOUT_SECONDS="10", LEASE_SECONDS="60")
    first, second = queue.enqueue("deploy").id, queue.enqueue("deploy").id
    ended: list[BaseException | dict] = []

    def one_pass() -> None:
        try:
            ended.append(run_pass(settings))
        except DispatchError as exc:
            ended.append(exc)

    worker = threading.Thread(target=one_pass)
    worker.start()
    with Database(settings.database, application_name="jd-tests-holder") as holder:
        try:
            assert wait_for(lambda: queue.get(first)["jenkins_queue_id"] is not None, timeout=20)
            with holder.transaction():
                holder.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=second)
                worker.join(30)
        finally:
            worker.join(30)
    assert isinstance(ended[0], DatabaseBusy), ended  # the pass ended on the lock timeout
    assert queue.get(second)["jenkins_queue_id"] is None
    facade.flush_if_any()
    out = capsys.readouterr().out
    assert _emitted(out, "Claimed") == 2, out
    assert _emitted(out, "Triggered") == 1, out  # the recorded one; the other's answer was never recorded
    assert _emitted(out, "PassesCompleted") == 0, out  # it did not run to its end: the alarm must still see that
