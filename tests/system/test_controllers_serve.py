"""Several controllers under `serve`, run as users run it (a subprocess), against two emulators: a controller that
answers too slowly (its triggers go unanswered) or not at all holds back only its own rows — the other's rows are
each triggered after their INSERT while the first is still slow or down (issue 23)."""

from __future__ import annotations

import json
import statistics
import time

import pytest

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..serve_helpers import serve_env, start_serve

pytestmark = pytest.mark.both_engines

# How long a row of b may take, at most, from its INSERT to its trigger: far less than serve's periodic pass
# (--interval) and than one of a's trigger timeouts while a is slow, so that only b's own lane, woken by the INSERT
# (MySQL: its next poll), can explain it. How soon is bench_controllers' figure (tens of milliseconds). Before the
# controllers had a thread each, a row of b waited for a's whole trigger wave of timeouts.
WAIT_SECONDS = 20
INTERVAL_SECONDS = 300


def _triggered_after_insert(db, queue, rows: int, still_bad, every: float = 0.0) -> list[float]:
    """INSERT ``rows`` rows for controller b, one every ``every`` seconds at the earliest; seconds from each INSERT
    until it is triggered (reported, not checked). Each must be so while ``still_bad()`` (controller a is still slow
    or down). Triggered: Jenkins answered with its queue item (a claimed row is processing already, before its
    trigger is sent)."""
    waited = []
    for n in range(rows):
        if n and every:
            time.sleep(max(0.0, every - waited[-1]))
        inserted = time.monotonic()
        job_id = queue.enqueue("deploy", {"N": str(n)}, controller="b").id
        assert wait_for(lambda job_id=job_id: queue.get(job_id)["jenkins_queue_id"] is not None,
                        timeout=WAIT_SECONDS, interval=0.02), queue.get(job_id)
        waited.append(time.monotonic() - inserted)
        assert still_bad(), "controller a recovered before the test ended: it proves nothing"
    return waited


def _serve(database_url, a, b, tmp_path, **env: str):
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}}
    return start_serve(serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers), **env),
                       tmp_path / "serve.log", "--interval", str(INTERVAL_SECONDS))


def _report(label: str, waited: list[float]) -> None:
    print(f"{label}: INSERT -> triggered for b, {len(waited)} rows: p50 {statistics.median(waited) * 1000:.0f} ms, "
          f"max {max(waited) * 1000:.0f} ms")


def test_a_slow_controller_does_not_delay_the_others_rows(make_jenkins, db, queue, database_url, tmp_path):
    a, b = make_jenkins(), make_jenkins()
    # Every trigger sent to a goes unanswered until the test releases them, and a's timeout is longer than b's rows
    # may wait: a's pass is stuck in its first wave for the whole test (its other requests answer, so that a looks
    # slow rather than down).
    held = a.add_fault(path="buildWithParameters$", hold=True)
    served = _serve(database_url, a, b, tmp_path, JENKINS_TIMEOUT_SECONDS=str(3 * WAIT_SECONDS),
                    LEASE_SECONDS=str(INTERVAL_SECONDS), MAX_PARALLEL_TRIGGERS="2")
    try:
        # In one transaction: a's lane, woken by the first of 40 separate INSERTs, claimed that row alone and
        # then waited on its one held trigger for the whole test (seen once in a run on six workers).
        with db.transaction():
            for n in range(40):
                queue.enqueue("deploy", {"N": str(n)})
        assert wait_for(lambda: held.waiting == 2, timeout=WAIT_SECONDS), (held.waiting, served.log()[-3000:])
        waited = _triggered_after_insert(db, queue, 8, lambda: served.alive() and held.waiting == 2)
        _report("a slow (its triggers unanswered)", waited)
        assert b.counters()["items_created"] == 8 and a.counters()["items_created"] == 0
    finally:
        a.release_held()
        assert served.stop() == 0, served.log()[-3000:]


def test_a_controller_down_does_not_delay_the_others_rows(make_jenkins, db, queue, database_url, tmp_path):
    a, b = make_jenkins(), make_jenkins()
    for n in range(8):
        queue.enqueue("deploy", {"N": str(n)})
    down = a.add_fault(path="", status=503)  # the restart page for every request, until the test clears it
    served = _serve(database_url, a, b, tmp_path, JENKINS_RETRY_BASE_SECONDS="0.5", JENKINS_RETRY_MAX_SECONDS="2")
    try:
        # Spread over the outage (one a second), not only at its start: a keeps being tried meanwhile.
        assert wait_for(lambda: down.hits >= 1, timeout=WAIT_SECONDS)
        tried = down.hits
        waited = _triggered_after_insert(db, queue, 8, lambda: a.counters()["items_created"] == 0, every=1.0)
        _report("a down (503)", waited)
        assert down.hits > tried, "a was not tried again while b's rows went out"
        assert wait_for(lambda: served.health()[1]["controllers"]["default"]["status"] == "unavailable",
                        timeout=WAIT_SECONDS)
        status, doc = served.health()
        # One controller down: the service is degraded, not unavailable; the other controller is fine.
        assert status == 200 and doc["status"] == "degraded", doc
        assert doc["controllers"]["b"]["status"] == "ok" and doc["controllers"]["b"]["url"] == b.base_url, doc
        assert a.counters()["items_created"] == 0
        # Once a is back, its rows go out too, each once.
        a.clear_faults()
        assert wait_for(lambda: a.counters()["items_created"] == 8, timeout=30, interval=0.2)
        assert all(n == 1 for n in a.counters()["triggers_by_dispatch_id"].values())
    finally:
        assert served.stop() == 0, served.log()[-3000:]
