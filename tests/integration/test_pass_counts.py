"""What a pass did is counted even when the pass ends early.

A pass that triggered (and recorded) a job, then met a database error before its end, used to publish none of
its counts: `serve`'s jenkins_dispatch_triggered_total stayed at 0 for a job that Jenkins had, for good (the next
pass does not count it again), and the loop's summary (the Lambda's result) left it out too. Found by CI on
MariaDB (test_controllers_metrics: a row with its queue item recorded, its controller's Triggered counter 0).

The error is real: the second row's record waits on a row lock another session holds until the session's lock
timeout (5 s) ends the pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from jenkins_dispatch.dispatching import dispatcher as dispatcher_module
from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.wakeup import work_signal
from jenkins_dispatch.errors import DatabaseBusy, DispatchError
from jenkins_dispatch.observability import MetricsFacade
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import dispatch_settings, wait_for
from ..engines import row_lock_waiters
from ..unit.test_observability import _emf_lines

pytestmark = pytest.mark.both_engines


def _emitted(text: str, name: str) -> float:
    """The sum of every value of ``name`` in the EMF lines printed (a line holds a list when added twice)."""
    values = [line.get(name, 0) for line in _emf_lines(text)]
    return sum(sum(v) if isinstance(v, list) else v for v in values)


def _through_a_lock_timeout(jenkins, queue, db, run: Callable[[Any], None], stop: threading.Event) -> None:
    """Two rows; ``run(settings)`` dispatches them on a thread of its own. Once the first is recorded, another
    session locks the second until its record has waited out the lock timeout; then ``stop`` is set."""
    # One trigger at a time, each answered 1.5 s after Jenkins queued it: the first is recorded well before the
    # second can be.
    jenkins.add_fault(path="buildWithParameters$", slow_seconds=1.5)
    settings = dispatch_settings(jenkins.base_url, BATCH_SIZE="1", MAX_PARALLEL_TRIGGERS="1",
                                 JENKINS_TIMEOUT_SECONDS="10", LEASE_SECONDS="60")
    first, second = queue.enqueue("deploy").id, queue.enqueue("deploy").id
    worker = threading.Thread(target=run, args=(settings,))
    worker.start()
    try:
        with Database(settings.database, application_name="jd-tests-holder") as holder:
            assert wait_for(lambda: queue.get(first)["jenkins_queue_id"] is not None, timeout=20)
            with holder.transaction():
                holder.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=second)
                assert wait_for(lambda: row_lock_waiters(db) == 1, timeout=20), "the second record never waited"
                assert wait_for(lambda: row_lock_waiters(db) == 0, timeout=20), "it waited past the lock timeout"
    finally:
        stop.set()
        worker.join(30)
    assert queue.get(second)["jenkins_queue_id"] is None


def test_a_pass_that_ends_early_still_counts_what_it_triggered(jenkins, queue, db, monkeypatch, capsys):
    facade = MetricsFacade()
    facade.configure(emf=True)
    monkeypatch.setattr(dispatcher_module, "metrics", facade)
    ended: list[BaseException | dict] = []

    def one_pass(settings) -> None:
        try:
            ended.append(run_pass(settings))
        except DispatchError as exc:
            ended.append(exc)

    _through_a_lock_timeout(jenkins, queue, db, one_pass, threading.Event())
    assert isinstance(ended[0], DatabaseBusy), ended  # the pass ended on the lock timeout
    facade.flush_if_any()
    out = capsys.readouterr().out
    assert _emitted(out, "Claimed") == 2, out
    assert _emitted(out, "Triggered") == 1, out  # the recorded one; the other's answer was never recorded
    assert _emitted(out, "PassesCompleted") == 0, out  # it did not run to its end: the alarm must still see that


def test_the_loops_summary_keeps_what_a_pass_that_ended_early_did(jenkins, queue, db):
    stop = threading.Event()
    summaries: list[dict] = []

    def loop(settings) -> None:
        with Database(settings.database, application_name="jd-tests-loop") as session:
            summaries.append(DispatchLoop(settings, session, work_signal(session, stop, 0.2), interval=0.2,
                                          shutdown=stop).run())

    _through_a_lock_timeout(jenkins, queue, db, loop, stop)
    [summary] = summaries
    assert (summary["claimed"], summary["triggered"]) == (2, 1), summary
