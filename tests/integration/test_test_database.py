"""The tests' own promise (tests/conftest.py): each test's `db` starts with every table empty and ids at 1,
though the worker's migrated database is reused from test to test and only the touched tables are emptied."""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.heartbeat import Heartbeat
from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.schedules import Schedules

from ..conftest import TABLES, TRUNCATE_FROM_ROWS, empty_tables
from ..engines import numbers
from ..stores import Queue

pytestmark = pytest.mark.both_engines


def _counts(db) -> dict[str, int]:
    return {t: db.run(f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in TABLES}


@pytest.mark.parametrize("rows", [3, TRUNCATE_FROM_ROWS + 1], ids=["deleted", "truncated"])
def test_every_table_a_test_filled_is_empty_again_and_ids_restart(db, rows):
    queue = Queue(db)
    # A rated job's row, claimed (its start recorded), started and settled (the time page's aggregates), first.
    queue.set_rate("rated", 5)
    rated = queue.enqueue("rated", {}, priority=100).id
    [claimed] = queue.claim_batch(1, capped=True)
    assert claimed.id == rated
    queue.record_progress(claimed.id, claimed.dispatch_id, build_number=1, started=True)
    assert queue.settle(claimed.id, claimed.dispatch_id, "completed")
    queue.gauges()  # the queue's depth
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name) SELECT 'bulk' FROM {numbers(db, rows)}")
    queue.enqueue("deploy")  # and its event
    queue.set_limit("deploy", 2)
    queue.set_key_limit("deploy:prod", 1)
    queue.set_key_rule("deploy", concurrency_template="deploy:{ENV}")
    queue.pause("deploy")
    assert Heartbeat("cli").record(queue, "ok", None)
    add_schedule(Schedules(db), "nightly", "deploy", cron="0 3 * * *")
    assert all(_counts(db).values()), _counts(db)

    empty_tables(db)

    assert _counts(db) == dict.fromkeys(TABLES, 0)
    job = queue.enqueue("deploy")
    assert job.id == 1 and [e["id"] for e in queue.events(job.id)] == [1]


def test_an_id_used_by_a_rolled_back_insert_restarts_too(db):
    queue = Queue(db)
    with pytest.raises(RuntimeError), db.transaction():
        queue.enqueue("deploy")
        raise RuntimeError("roll back")
    assert _counts(db)["jenkins_jobs_queue"] == 0

    empty_tables(db)

    assert queue.enqueue("deploy").id == 1
