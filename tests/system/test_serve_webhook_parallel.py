"""`serve`'s webhook answers callbacks in parallel, on each engine: a callback that waits on a row another
session holds locked delays no other request — callbacks for other rows, wrong tokens, malformed bodies — and
is answered itself once the lock goes (issue 21)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import wait_for
from ..engines import row_lock_waiters
from ..serve_helpers import completed_notification, serve_env, start_serve

pytestmark = pytest.mark.both_engines

OTHER_ROWS = 20
WRONG_TOKENS = 10
MALFORMED = 10


def post(url: str, body: bytes) -> tuple[int, dict]:
    """(status, JSON answer) of one POST on a connection of its own."""
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def notification(row: dict, phase: str) -> bytes:
    payload = completed_notification(row)
    payload["build"]["phase"] = phase
    if phase == "STARTED":
        del payload["build"]["status"]
    return json.dumps(payload).encode()


def burst(served, rows: list[dict], phase: str) -> list[tuple[int, dict]]:
    """The 40 requests at once: callbacks for ``rows``, wrong tokens, malformed bodies; checks their answers."""
    notify, wrong = served.notify_url, f"{served.base}/jenkins/notify?token=wrong"
    calls = ([(notify, notification(row, phase), 200) for row in rows]
             + [(wrong, notification(rows[0], phase), 401)] * WRONG_TOKENS
             + [(notify, b'{"build": ', 400)] * MALFORMED)
    together = threading.Barrier(len(calls))

    def call(spec):
        url, body, _expected = spec
        together.wait(timeout=30)
        return post(url, body)

    with ThreadPoolExecutor(len(calls)) as pool:
        answers = list(pool.map(call, calls))
    assert [status for status, _ in answers] == [expected for _, _, expected in calls], answers
    return answers


def test_a_callback_waiting_on_a_locked_row_delays_no_other_request(jenkins, database_url, queue, db, tmp_path):
    for _ in range(OTHER_ROWS + 1):
        queue.enqueue("deploy")
    for job in queue.claim_batch(OTHER_ROWS + 1):
        queue.mark_triggered(job, 1000 + job.id)
    locked, *others = [queue.get(job_id) for job_id in range(1, OTHER_ROWS + 2)]
    served = start_serve(serve_env(database_url, jenkins.base_url), tmp_path / "serve.log")
    try:
        burst(served, others, "STARTED")  # the same burst with nothing locked
        with Database(parse_database_url(database_url), application_name="jd-tests-locker") as locker, \
                ThreadPoolExecutor(1) as first:
            with locker.transaction():
                locker.run("SELECT id FROM jenkins_jobs_queue WHERE id = :id FOR UPDATE", id=locked["id"])
                waiting = first.submit(post, served.notify_url, notification(locked, "COMPLETED"))
                assert wait_for(lambda: row_lock_waiters(db) == 1 or waiting.done(), timeout=10)
                assert not waiting.done(), f"the first callback did not wait for the lock: {waiting.result()}"

                burst(served, others, "COMPLETED")
                # All answered while the lock is still held: none of them waited for the locked row's callback.
                assert not waiting.done(), f"the locked row's callback ended first: {waiting.result()}"
                assert all(queue.get(row["id"])["status"] == "completed" for row in others)
                assert queue.get(locked["id"])["status"] == "processing"
            # The lock is gone (committed): the waiting callback goes through.
            status, answer = waiting.result(timeout=30)
        assert (status, answer["outcome"]) == (200, "applied"), answer
        assert queue.get(locked["id"])["status"] == "completed"
    finally:
        assert served.stop() == 0, served.log()[-3000:]
