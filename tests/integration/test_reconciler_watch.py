"""A settled row leaves nothing behind in Jenkins (issue 33, item 5): once a row is final, a queue item still
carrying its DISPATCH_ID — a re-send Jenkins acted on late above all — is cancelled in the row's own controller's
Jenkins and written into the row's history.

The chaos run that built a job twice: the original trigger's answer was lost, the reconciler found nothing and sent
it again (held 9 s in Jenkins's queue); Jenkins then acted on the original, which built and settled the row; the
re-send's answer was lost too, and Jenkins acted on it 10 s after it was sent — the original long gone from the
queue, so nothing merged — and nobody cancelled it while it waited: a second build. Here each request lands when
the test releases it (a `hold` fault), so the moment is built on purpose. Real database (each engine), the emulator
over real HTTP, the webhook over real HTTP.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch import runtime
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.serve import WebhookServer

from ..dispatch_helpers import WEBHOOK_SECRET, dispatch_settings, expire_leases, wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..stores import Queue

pytestmark = pytest.mark.both_engines


@pytest.fixture
def webhook(database_url):  # dispatch_settings reads the DATABASE_URL this exports
    runtime.install(dispatch_settings("http://unused/"))
    server = WebhookServer(runtime.settings()).start()
    try:
        yield server
    finally:
        server.stop()
        runtime.reset()


def _queued_with(jenkins, dispatch_id: str) -> list[int]:
    """The emulator's items still queued with this DISPATCH_ID."""
    with jenkins.jenkins.lock:
        return sorted(item.id for item in jenkins.jenkins.items.values()
                      if item.state != "left" and dict(item.parameter_key()).get("DISPATCH_ID") == dispatch_id)


def _builds_with(jenkins, job: str, dispatch_id: str) -> list[int]:
    return [b.number for b in jenkins.builds(job) if dict((d.name, v) for d, v in b.parameters)["DISPATCH_ID"] == dispatch_id]


def _settled_while_its_re_send_was_on_its_way(jenkins, queue, db, settings, *, by_webhook: bool,
                                              controller: str = "default") -> tuple[int, str]:
    """A row of ``deploy`` whose trigger's answer was lost, sent again after its lease (that answer lost too), built
    by its late original and settled — the re-send still held, unhandled, in Jenkins. Returns (row id, DISPATCH_ID).

    Each step is a pass, taken again until it has done its part: with several controllers a pass runs each in a lane
    of its own, and on MySQL a lane can lose a deadlock to another's statement and leave its work to the next pass.
    """
    original = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    re_send = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    job_id = queue.enqueue("deploy", {"ENV": "leftovers"}, controller=controller).id

    def passes_until(done) -> bool:
        return wait_for(lambda: done() or (expire_leases(db), run_pass(settings), done())[-1], timeout=20, interval=0)

    # The trigger gets no answer within the timeout: the lease is kept. After it, nothing of it in Jenkins, twice:
    # sent again (the same DISPATCH_ID), held RESEND_QUIET_SECONDS — and that answer is lost too.
    assert passes_until(lambda: original.waiting == 1)
    assert passes_until(lambda: queue.get(job_id)["resends"] == 1), queue.events(job_id)
    row = queue.get(job_id)
    assert (re_send.waiting, row["jenkins_queue_id"]) == (1, None), row

    original.release()  # Jenkins acts on the original now: queued, built at once
    if by_webhook:
        assert wait_for(lambda: queue.get(job_id)["status"] == "completed", timeout=10), queue.events(job_id)
    else:
        assert wait_for(lambda: [b.result for b in jenkins.builds("deploy")] == ["SUCCESS"], timeout=10)
        # The re-sent row is followed once its lease is over: its original's build settles it.
        assert passes_until(lambda: queue.get(job_id)["status"] == "completed"), queue.events(job_id)

    dispatch_id = row["dispatch_id"]
    re_send.release()  # then on the re-send: the original left the queue long ago, so a second item, held 9 s
    assert wait_for(lambda: re_send.waiting == 0 and len(_queued_with(jenkins, dispatch_id)) == 1, timeout=10)
    return job_id, dispatch_id


def _settled_ago(db, job_id: int, seconds: float) -> None:
    """The row settled ``seconds`` ago by the database's clock (the time passed is all the watch reads)."""
    db.run("UPDATE jenkins_jobs_queue SET finished_at = :at WHERE id = :id",
           at=datetime.now(UTC) - timedelta(seconds=seconds), id=job_id)


@pytest.mark.parametrize("by_webhook", [True, False], ids=["settled-by-webhook", "settled-by-reconciler"])
def test_a_re_send_jenkins_acts_on_after_its_row_settled_is_cancelled_while_it_waits(make_jenkins, queue, db,
                                                                                      webhook, by_webhook):
    """Jenkins may act on the re-send as late as on the original: up to one lease plus RESEND_QUIET_SECONDS after it
    was sent (the README's guarantee covers that much), and it then waits RESEND_QUIET_SECONDS more. With the row
    settled as the re-send went out, it may wait until one lease plus twice RESEND_QUIET_SECONDS after that (3 + 18 s
    here). The dispatchers' first look after it landed may come late in that time (a loaded machine: three dispatchers
    on two cores in the chaos run): here 18 s after the row settled. It must still be cancelled, never built."""
    jenkins = make_jenkins(notification={"url": f"{webhook.url}jenkins/notify?token={WEBHOOK_SECRET}"} if by_webhook else None)
    settings = dispatch_settings(jenkins.base_url)  # lease 3 s, timeout 1 s, re-sends held 9 s
    job_id, dispatch_id = _settled_while_its_re_send_was_on_its_way(jenkins, queue, db, settings, by_webhook=by_webhook)
    [re_sent_item] = _queued_with(jenkins, dispatch_id)

    _settled_ago(db, job_id, settings.lease_seconds + 2 * settings.resend_quiet_seconds - 3)
    run_pass(settings)

    assert _queued_with(jenkins, dispatch_id) == []
    cancelled = [e["detail"] for e in queue.events(job_id) if e["event"] == "duplicate_cancelled"]
    assert [f"queue item {re_sent_item}," in detail for detail in cancelled] == [True], queue.events(job_id)
    assert jenkins.wait_idle(timeout=10), jenkins.counters()
    assert len(_builds_with(jenkins, "deploy", dispatch_id)) == 1
    row = queue.get(job_id)
    assert (row["status"], row["build_number"]) == ("completed", 1), row


def test_a_settled_rows_leftover_is_looked_for_and_cancelled_on_its_own_controller_only(make_jenkins, queue, db):
    """Each controller's pass watches its own rows' dispatches, in its own Jenkins: the other asks nothing."""
    a, b = make_jenkins(notification=None), make_jenkins(notification=None)
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}}
    settings = dispatch_settings(a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers))
    job_id, dispatch_id = _settled_while_its_re_send_was_on_its_way(b, queue, db, settings, by_webhook=False,
                                                                    controller="b")
    [re_sent_item] = _queued_with(b, dispatch_id)
    queue_reads_at_a = a.add_fault(path="^queue/", method="GET")  # changes nothing: counts a's queue reads
    summaries: list[dict] = []

    def cancelled_at_b() -> bool:  # a pass, again if b's lane lost a deadlock on MySQL (see above)
        summaries.append(run_pass(settings))
        return _queued_with(b, dispatch_id) == []

    assert wait_for(cancelled_at_b, timeout=20, interval=0), summaries
    assert queue_reads_at_a.hits == 0, summaries
    assert [s["controllers"]["default"]["reconciled"]["watching"] for s in summaries] == [0] * len(summaries)
    assert summaries[-1]["controllers"]["b"]["reconciled"]["watching"] == 1, summaries
    assert any(f"queue item {re_sent_item}," in e["detail"] for e in queue.events(job_id)
               if e["event"] == "duplicate_cancelled"), queue.events(job_id)
    assert b.wait_idle(timeout=10) and len(_builds_with(b, "deploy", dispatch_id)) == 1
    assert a.counters()["items_created"] == 0
    assert Queue(db).get(job_id)["controller"] == "b"


def test_an_original_jenkins_acts_on_between_the_search_and_the_re_send_is_followed_and_the_re_send_withdrawn(
        make_jenkins, queue, db):
    """A chaos run's second build (Python 3.13, a loaded machine): the original's answer was lost, the search after
    the lease found nothing, and Jenkins acted on the original just before the re-send arrived — the original
    started at once, so the re-send, held RESEND_QUIET_SECONDS, had nothing to merge with and built again. Here the
    re-send is held until the original has started (a `hold` fault each), so the moment is built on purpose."""
    jenkins = make_jenkins()
    settings = dispatch_settings(jenkins.base_url, JENKINS_TIMEOUT_SECONDS="4", LEASE_SECONDS="10")
    original = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    job_id = queue.enqueue("deploy", {"ENV": "between"}).id
    run_pass(settings)  # the trigger gets no answer within the timeout: the lease is kept
    assert original.waiting == 1
    re_send = jenkins.add_fault(path="buildWithParameters$", method="POST", hold=True, times=1)
    dispatch_id = queue.get(job_id)["dispatch_id"]
    acted: list[bool] = []

    def jenkins_acts_on_the_original_first() -> None:
        acted.append(wait_for(lambda: re_send.waiting == 1, timeout=30, interval=0.01))
        original.release()
        acted.append(wait_for(lambda: _builds_with(jenkins, "deploy", dispatch_id) != [], timeout=10, interval=0.01))
        re_send.release()

    releaser = threading.Thread(target=jenkins_acts_on_the_original_first)
    releaser.start()
    expire_leases(db)
    run_pass(settings)  # nothing of it in Jenkins (searched twice): sent again, and the original lands meanwhile
    releaser.join(30)
    assert acted == [True, True]

    assert jenkins.wait_idle(timeout=30), jenkins.counters()
    assert len(_builds_with(jenkins, "deploy", dispatch_id)) == 1, queue.events(job_id)
    assert _queued_with(jenkins, dispatch_id) == []
    events = [e["event"] for e in queue.events(job_id)]
    assert "resent" in events and "duplicate_cancelled" in events, queue.events(job_id)
    assert queue.get(job_id)["build_number"] == _builds_with(jenkins, "deploy", dispatch_id)[0]
