"""The pruner duty (issue 34): the dispatchers delete final rows older than PRUNE_FINISHED_AFTER, with their history,
one batch a pass, one dispatcher at a time — on the real database, both engines.

10,000 final rows finished two days ago (each with a history row) and 100 finished an hour ago; PRUNE_FINISHED_AFTER
is one day. Three pruners, each on its own thread and session as three dispatchers' passes would run them, race for
the turn; meanwhile another session claims and a webhook-style settle runs, and each is timed.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.duties.pruner import BATCH_ROWS, NAME, Pruner
from jenkins_dispatch.dispatching.wakeup import work_signal
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import dispatch_settings, wait_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

OLD, NEW = 10_000, 100
DAY = 86_400.0
# 10,000 numbers from four cross-joined digit tables: the same SQL on both engines.
DIGITS = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL " \
         "SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
NUMBERS = f"SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d AS n FROM {DIGITS} a, {DIGITS} b, {DIGITS} c, {DIGITS} e"


def _seed(db, count: int, finished_at: datetime, prefix: str) -> None:
    """``count`` completed rows finished at ``finished_at``, each with one history row."""
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, parameters, status, attempts, dispatch_id, created_at, "
           f"updated_at, finished_at) SELECT 'old-job', '{{}}', 'completed', 1, concat('{prefix}-', n), :at, :at, :at "
           f"FROM ({NUMBERS}) numbers WHERE n < :count", at=finished_at, count=count)
    db.run("INSERT INTO jenkins_job_events (job_id, at, event, from_status, to_status, dispatch_id, actor) "
           "SELECT id, :at, 'completed', 'processing', 'completed', dispatch_id, 'webhook' FROM jenkins_jobs_queue "
           "WHERE dispatch_id LIKE :prefix", at=finished_at, prefix=f"{prefix}-%")


def _counts(db) -> tuple[int, int]:
    row = db.run("SELECT (SELECT count(*) FROM jenkins_jobs_queue WHERE status = 'completed') AS jobs, "
                 "(SELECT count(*) FROM jenkins_job_events) AS events")[0]
    return int(row["jobs"]), int(row["events"])


class _Pass:
    """What a duty is given by a pass: settings, session, queue (the pruner uses the queue only)."""

    def __init__(self, db) -> None:
        self.settings = None
        self.db = db
        self.queue = Queue(db)

    def enqueue_due_ticks(self) -> None:
        raise AssertionError("not a pass's duty here")

    def reconcile(self) -> None:
        raise AssertionError("not a pass's duty here")


@pytest.fixture
def aged(db):
    now = datetime.now(UTC)
    _seed(db, OLD, now - timedelta(days=2), "old")
    _seed(db, NEW, now - timedelta(hours=1), "new")
    db.run("UPDATE jenkins_dispatch_duties SET due_at = :now, holder = NULL WHERE name = 'pruner'",
           now=now - timedelta(seconds=1))
    assert _counts(db) == (OLD + NEW, OLD + NEW)
    return db


def test_three_racing_dispatchers_prune_old_rows_in_batches_one_at_a_time_while_claims_and_settles_go_on(
        aged, queue, database_url, engine):
    settings = dispatch_settings("http://127.0.0.1:9/")
    batches: list[tuple[int, str, float, float, int]] = []  # (pruner, holder, start, end, deleted)
    stalled: list[int] = []  # batches after which no claim got through
    stop = threading.Event()

    def dispatcher(n: int) -> None:
        pruner = Pruner(DAY, holder=f"dispatcher-{n}")
        with Database(settings.database, application_name=f"jd-pruner-{n}") as session:
            context = _Pass(session)
            while not stop.is_set():
                if pruner.seconds_until_due() > 0:
                    return  # another holds the turn, or it is done: nothing is asked before it is due
                started = time.monotonic()
                counts = pruner.run(context)
                if counts.get("prune_batches"):
                    batches.append((n, pruner.holder, started, time.monotonic(), counts["pruned"]))
                    # Before the next batch, one claim and settle of the traffic must get through: they would
                    # hang here if a batch held what a claim needs past its end (not how fast the machine is).
                    seen = len(claimed_at)
                    if not wait_for(lambda seen=seen: len(claimed_at) > seen or stop.is_set(), timeout=30):
                        stalled.append(len(batches))

    # Beside the pruners: a claim and a settle, again and again, each timed (the webhook's settle of a processing row).
    claims: list[float] = []
    claimed_at: list[float] = []
    missed: list[float] = []  # when a claim came back empty
    settles: list[float] = []

    def traffic() -> None:
        with Database(settings.database, application_name="jd-pruner-traffic") as session:
            other = Queue(session, lease_seconds=60)
            while not stop.is_set():
                job = other.enqueue("deploy")
                started = time.monotonic()
                # On MySQL a claim during a batch may come back empty (the row skipped, SKIP LOCKED, while the batch
                # holds it): as a pass would, it claims again; the wait until the row is claimed is what counts.
                while not (found := other.claim_batch(1)):
                    missed.append(time.monotonic())
                [claimed] = found
                claims.append(time.monotonic() - started)
                claimed_at.append(time.monotonic())
                started = time.monotonic()
                other.mark_triggered(claimed, 1)
                other.settle(claimed.id, claimed.dispatch_id, "completed", result="SUCCESS", actor="webhook")
                settles.append(time.monotonic() - started)
                assert job.id == claimed.id

    threads = [threading.Thread(target=dispatcher, args=(n,)) for n in range(3)]
    side = threading.Thread(target=traffic)
    side.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    stop.set()
    side.join(30)

    assert _counts(aged)[0] - len(claims) == NEW  # the old rows gone, the newer kept (plus the traffic's own)
    old_left = aged.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE dispatch_id LIKE 'old-%'")[0]["n"]
    history_left = aged.run("SELECT count(*) AS n FROM jenkins_job_events e JOIN jenkins_jobs_queue q "
                            "ON q.id = e.job_id WHERE q.dispatch_id LIKE 'new-%'")[0]["n"]
    orphans = aged.run("SELECT count(*) AS n FROM jenkins_job_events e WHERE NOT EXISTS "
                       "(SELECT 1 FROM jenkins_jobs_queue q WHERE q.id = e.job_id)")[0]["n"]
    assert (old_left, history_left, orphans) == (0, NEW, 0)
    # Bounded batches, by one dispatcher only (the turn is one holder's until it hands it back), never overlapping.
    assert sum(deleted for *_, deleted in batches) == OLD
    assert all(deleted <= BATCH_ROWS for *_, deleted in batches) and len(batches) >= OLD // BATCH_ROWS
    assert len({holder for _, holder, *_ in batches}) == 1, {holder for _, holder, *_ in batches}
    spans = sorted((start, end) for _, _, start, end, _ in batches)
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:], strict=False))
    turn = aged.run("SELECT holder, due_at > :now AS later FROM jenkins_dispatch_duties WHERE name = :name",
                    now=datetime.now(UTC), name=NAME)[0]
    assert turn["holder"] is None and turn["later"]  # handed back, due again later
    # The claims and settles went on throughout; no one waited for more than a batch (printed for the record).
    longest_batch = max(end - start for _, _, start, end, _ in batches)
    assert claims and settles
    # They went on while the batches ran: none waited for the whole backlog.
    first, last = spans[0][0], spans[-1][1]
    assert stalled == [] and any(first < at < last for at in claimed_at), (stalled, first, last, claimed_at[:3])
    print(f"\n[{engine}] batches {len(batches)}, longest {longest_batch * 1000:.0f} ms; "
          f"claims {len(claims)}: max {max(claims) * 1000:.1f} ms, settles {len(settles)}: max "
          f"{max(settles) * 1000:.1f} ms; claims that came back empty: {len(missed)}")


def test_off_deletes_nothing_and_asks_nothing(aged):
    pruner = Pruner(None)
    assert pruner.seconds_until_due() == float("inf")
    before = aged.statements
    settings = dispatch_settings("http://127.0.0.1:9/", PRUNE_FINISHED_AFTER="off")
    assert settings.prune_finished_after_seconds is None
    assert aged.statements == before and _counts(aged) == (OLD + NEW, OLD + NEW)


def test_three_dispatcher_loops_prune_by_themselves_one_of_them_a_batch_a_pass(jenkins, aged):
    settings = dispatch_settings(jenkins.base_url, PRUNE_FINISHED_AFTER="1d")
    stop = threading.Event()
    results: list[dict] = []
    loops: list[DispatchLoop] = []

    def dispatcher(n: int) -> None:
        with Database(settings.database, application_name=f"jd-pruner-loop-{n}") as session:
            loop = DispatchLoop(settings, session, work_signal(session, stop, 0.2), interval=0.2, shutdown=stop)
            loops.append(loop)
            results.append(loop.run())

    threads = [threading.Thread(target=dispatcher, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert wait_for(lambda: _counts(aged)[0] == NEW, timeout=60)
        # Then each loop passes on without asking again: the next pass's summary prunes nothing.
        passes = [loop.health.passes for loop in loops]
        assert wait_for(lambda: all(loop.health.passes >= p + 2 for loop, p in zip(loops, passes, strict=True)),
                        timeout=20)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert _counts(aged) == (NEW, NEW)
    pruned = sorted((r.get("pruned", 0), r.get("prune_batches", 0), r["passes"]) for r in results)
    # One dispatcher pruned everything, a batch a pass (its claims waited for one batch at most), the others nothing.
    assert [p[0] for p in pruned] == [0, 0, OLD], pruned
    assert pruned[-1][1] == OLD // BATCH_ROWS + 1 and pruned[-1][1] <= pruned[-1][2]
