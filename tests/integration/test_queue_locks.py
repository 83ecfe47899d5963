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
from jenkins_dispatch.store.queue import Queue

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
