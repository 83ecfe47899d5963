"""What a claim in progress locks, on both engines: only the rows it takes.

On MySQL the claim's session runs READ COMMITTED, so InnoDB takes no gap locks: the application's INSERTs land
wherever they sort in the claim index without waiting, and a second claimer skips the locked rows and takes
the rest. (Under InnoDB's default REPEATABLE READ the high-priority INSERT below sorts into a locked gap and
waits until the lock wait times out: DatabaseBusy.)
"""

from __future__ import annotations

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database

from ..engines import row_lock_waiters
from ..stores import Queue

pytestmark = pytest.mark.both_engines


def test_a_claim_in_progress_blocks_neither_the_applications_inserts_nor_other_claimers(db, database_url):
    queue = Queue(db)
    ids = [queue.enqueue("deploy", {"n": n}).id for n in range(20)]
    with Database(parse_database_url(database_url), application_name="jd-tests-claimer") as claimer, \
            Database(parse_database_url(database_url), application_name="their-app") as app:
        with claimer.transaction():  # the claim's locks stay held until this block ends
            held = Queue(claimer).claim_batch(5)
            assert [job.id for job in held] == ids[:5]
            # The application's plain SQL, in its own session: one row sorting before the locked ones in the
            # claim order (a higher priority), one after them.
            app.run("INSERT INTO jenkins_jobs_queue (job_name, priority) VALUES ('urgent', 5)")
            app.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('later')")
            taken = Queue(app).claim_batch(100)
        assert {job.job_name for job in taken} == {"urgent", "deploy", "later"}
        assert {job.id for job in taken}.isdisjoint(job.id for job in held)
        assert len(taken) == 20 - 5 + 2
    assert queue.stats()["processing"] == 22


def test_a_settle_picked_as_a_deadlock_victim_is_run_again_and_settles_every_row(db, database_url, engine):
    """A deadlock victim outside a transaction of ours was rolled back whole at once: the statement runs again
    (a fenced transition run again after a rollback is its first run), instead of failing its whole batch and
    leaving the rows processing until their leases run out. The deadlock is real: another session holds row B
    and then asks for row A, which the settle holds while it waits for B. The server picks the victim; a round
    where it picked the other session proves nothing and is played again with new rows."""
    queue = Queue(db)
    for n in range(40):
        queue.enqueue("deploy", {"n": n})
    for _ in range(5):
        a, b = queue.claim_batch(2)
        settled, other_was_victim = _settle_in_a_deadlock(db, database_url, engine, a, b)
        if not other_was_victim:
            break
    assert not other_was_victim, "the server never picked the settle as the victim in 5 rounds"
    assert settled == [{a.id, b.id}], settled
    assert [queue.get(job.id)["status"] for job in (a, b)] == ["failed", "failed"]


def _settle_in_a_deadlock(db, database_url, engine, a, b) -> tuple[list, bool]:
    """settle_many([a, b]) on a session of its own, in a deadlock with another session (which holds b, then asks for
    a): what it returned (or raised), and whether the server chose the other session as the victim instead."""
    import threading
    import time

    from jenkins_dispatch.errors import DatabaseBusy
    from jenkins_dispatch.store.queue import Settlement

    url = parse_database_url(database_url)
    settled: list = []
    other_was_victim = False
    with Database(url, application_name="jd-tests-settler") as settler_db, \
            Database(url, application_name="jd-tests-other") as other:

        def settle() -> None:
            try:
                settled.append(Queue(settler_db).settle_many(
                    [Settlement(job.id, job.dispatch_id, "failed", None, "refused") for job in (a, b)]))
            except Exception as exc:  # noqa: BLE001 (the test reports it)
                settled.append(exc)

        settler = threading.Thread(target=settle)
        try:
            with other.transaction():
                # Heavier than the settle (InnoDB rolls back the transaction that changed least); on PostgreSQL
                # the settle, waiting first, looks for a cycle first (deadlock_timeout after its wait began).
                other.run("UPDATE jenkins_jobs_queue SET priority = priority + 1 WHERE status = 'pending'")
                other.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=b.id)
                settler.start()
                deadline = time.monotonic() + 30
                while row_lock_waiters(db, application_name="jd-tests-settler") < 1:
                    assert time.monotonic() < deadline and settler.is_alive(), settled
                    time.sleep(0.02)
                # The cycle: A is the settle's. Granted once the settle, the victim, has rolled back.
                other.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=a.id)
        except DatabaseBusy as exc:
            assert exc.victim, exc
            other_was_victim = True
        settler.join(timeout=30)
    return settled, other_was_victim
