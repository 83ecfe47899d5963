"""The seed's "requeue a stuck job" by plain SQL (issue 33, item 3) against `jenkins-dispatch serve` as users run it
(a subprocess, Jenkins's callbacks to its webhook): `UPDATE jenkins_jobs_queue SET status = 'pending' WHERE id = …` on
a job whose build is queued and on one whose build is running. Before, serve claimed both again under new dispatch
ids and Jenkins built each twice. Each engine; the emulator counts the builds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.jenkins.client import JenkinsClient, StopResult

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..integration.test_plain_sql import builds_with, requeue
from ..serve_helpers import serve_env, start_serve

pytestmark = pytest.mark.both_engines

LEASE_SECONDS = 30
FINAL = ("completed", "failed", "cancelled")


def test_a_plain_sql_requeue_under_serve_builds_every_job_once(make_jenkins, db, queue, database_url, tmp_path):
    jenkins = make_jenkins()
    # A periodic pass only every 60 s: serve must be woken by the requeue itself to look at the rows at once.
    served = start_serve(serve_env(database_url, jenkins.base_url, LEASE_SECONDS=str(LEASE_SECONDS)),
                         tmp_path / "serve.log", "--interval", "60")
    jenkins.configure(notification={"url": served.notify_url})
    try:
        # Building until a person stops it: however slow this machine, the requeue finds its build running.
        building = queue.enqueue("deploy", {"ENV": "building", "EMULATOR_DURATION": "600"}).id
        others = [queue.enqueue("deploy", {"ENV": f"other-{n}"}).id for n in range(4)]
        assert wait_for(lambda: queue.get(building)["build_number"] is not None, timeout=15), queue.get(building)
        # Queued: Jenkins is quieting down, so its queue item waits there.
        jenkins.configure(quieting_down=True)
        queued = queue.enqueue("deploy", {"ENV": "queued"}).id
        assert wait_for(lambda: queue.get(queued)["jenkins_queue_id"] is not None, timeout=15), queue.get(queued)
        before = {i: queue.get(i) for i in (queued, building)}
        items = jenkins.counters()["items_created"]

        requeue(database_url, queued, building)

        for i, was in before.items():
            row, event = queue.get(i), queue.events(i)[-1]
            assert (row["status"], row["dispatch_id"]) == ("processing", was["dispatch_id"]), row
            assert (event["event"], event["actor"]) == ("requeue_kept", "plain_sql"), event
            assert "Jenkins has it" in event["detail"], event
        # serve looks at both now (their leases were set to end), finds them in Jenkins and renews their leases.
        looked_at = datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS / 2)
        assert wait_for(lambda: all(queue.get(i)["lease_expires_at"] > looked_at for i in before), timeout=15), (
            [queue.get(i) for i in before], served.log()[-3000:])
        assert jenkins.counters()["items_created"] == items  # nothing sent again

        jenkins.configure(quieting_down=False)
        with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, 5) as person:
            assert person.stop_build("deploy", before[building]["build_number"]) is StopResult.STOP_REQUESTED
        ids = [queued, building, *others]
        assert wait_for(lambda: all(queue.get(i)["status"] in FINAL for i in ids), timeout=30), (
            [queue.get(i) for i in ids], served.log()[-3000:])
    finally:
        assert served.stop() == 0, served.log()[-3000:]
    rows = {i: queue.get(i) for i in ids}
    assert (rows[queued]["status"], rows[building]["status"], rows[building]["jenkins_result"]) == (
        "completed", "failed", "ABORTED"), rows
    assert all(rows[i]["status"] == "completed" for i in others), rows
    for i, row in rows.items():
        assert jenkins.triggers_for(row["dispatch_id"]) == 1, row  # one queue item per job
        assert builds_with(jenkins, "deploy", row["dispatch_id"]) == 1, row  # one build per job
        history = queue.events(i)
        assert sum(e["event"] == "settled" for e in history) == 1, history  # final once
        assert sum(e["event"] == "claimed" for e in history) == 1, history  # never claimed again
    assert len(jenkins.builds("deploy")) == len(ids)
