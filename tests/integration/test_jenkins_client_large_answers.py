"""Issue #11, part 1: answers too large for the client's 4 MiB body limit.

Jenkins jobs whose builds carry large parameters (80 builds × 60 KB), or a queue holding other jobs' large items,
made every search for a DISPATCH_ID exceed the limit: the search failed as "Jenkins unavailable", the pass
stopped, and so did every later pass. Searches now ask only for the fields they need, a page at a time sized from
what the previous page weighed, and read the DISPATCH_ID of an entry too large even alone by its position among
the parameters. An answer still too large is that search's problem (SearchInconclusive), never Jenkins's.
Everything runs against the emulator over real HTTP and the real database.
"""

from __future__ import annotations

import time
import uuid

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.errors import DispatchError, JenkinsError, SearchInconclusive
from jenkins_dispatch.jenkins.answers import Accepted
from jenkins_dispatch.jenkins.client import JenkinsClient
from jenkins_dispatch.operating.operator import cancel_job

from ..dispatch_helpers import dispatch_settings, expire_leases
from ..emulator_fixtures import ADMIN_TOKEN

MiB = 1024 * 1024
BLOB_CHARS = 60_000
JOBS = [
    {"path": "big", "concurrent": True, "parameters": ["DISPATCH_ID", "BLOB"], "duration_seconds": 0.01},
    {"path": "big-queued", "parameters": ["DISPATCH_ID", "BLOB"], "quiet_period_seconds": 600},
    {"path": "blob-first", "parameters": ["BLOB", "DISPATCH_ID"], "quiet_period_seconds": 600},
]


def new_id() -> str:
    return str(uuid.uuid4())


def blob(i: int, chars: int = BLOB_CHARS) -> str:
    return f"{i:05d}" + "x" * (chars - 5)


@pytest.fixture
def jenkins(make_jenkins):
    return make_jenkins(executors=8, jobs=JOBS)


@pytest.fixture
def client(jenkins):
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=5, search_window=100) as client:
        yield client


@pytest.fixture
def answer_sizes(client) -> list[int]:
    """The size of every answer the client reads (Jenkins sends Content-Length)."""
    sizes: list[int] = []
    client._session.hooks["response"].append(lambda r, *a, **k: sizes.append(int(r.headers.get("Content-Length") or 0)))
    return sizes


def fill_builds(jenkins, client, count: int = 80, chars: int = BLOB_CHARS, job: str = "big") -> list[str]:
    ids = [new_id() for _ in range(count)]
    before = len(jenkins.builds(job))
    for i, dispatch_id in enumerate(ids):
        assert isinstance(client.trigger(job, {"BLOB": blob(i, chars)}, dispatch_id), Accepted)
    assert jenkins.wait_until(lambda: len(jenkins.builds(job)) == before + count and jenkins.jenkins.in_flight() == 0, timeout=30)
    return ids


def now_ms() -> int:
    return int(time.time() * 1000)


# --- the client --------------------------------------------------------------------------------------------


def test_a_search_through_builds_with_large_parameters_reads_pages_far_under_the_limit(jenkins, client, answer_sizes):
    since = now_ms()
    ids = fill_builds(jenkins, client)  # 80 × 60 KB: one page of them is 4.8 MB
    answer_sizes.clear()

    oldest = client.find_by_dispatch_id("big", ids[0], since_ms=since)
    assert oldest is not None and oldest.build_number == 1 and oldest.result == "SUCCESS"
    assert client.find_by_dispatch_id("big", ids[79]).build_number == 80  # no claim time: the newest search_window
    assert client.find_by_dispatch_id("big", new_id(), since_ms=since) is None
    assert answer_sizes and max(answer_sizes) <= MiB


def test_a_queue_full_of_other_jobs_large_items_does_not_hide_an_item(jenkins, client, answer_sizes):
    queued = [new_id() for _ in range(80)]  # 80 × 60 KB waiting in the queue of another job
    for i, dispatch_id in enumerate(queued):
        assert isinstance(client.trigger("big-queued", {"BLOB": blob(i)}, dispatch_id), Accepted)
    mine = client.trigger("waiting", {}, new_id_mine := new_id())
    answer_sizes.clear()

    assert client.find_by_dispatch_id("waiting", new_id_mine).queue_id == mine.queue_id
    deep = client.find_by_dispatch_id("big-queued", queued[61])
    assert deep is not None and deep.build_number is None and deep.queue_id is not None
    assert client.find_by_dispatch_id("waiting", new_id()) is None
    assert max(answer_sizes) <= MiB


def test_an_entry_too_large_even_alone_is_searched_by_its_dispatch_id_parameter(jenkins, client):
    """A build or queue item whose parameters alone exceed 4 MiB: its DISPATCH_ID is read by its position
    (``actions[parameters[name,value]{k}]``), so it neither hides our dispatch nor blocks the search."""
    since = now_ms()
    small = fill_builds(jenkins, client, count=3, chars=100)
    [giant] = fill_builds(jenkins, client, count=1, chars=5 * MiB)
    newer = fill_builds(jenkins, client, count=2, chars=100)
    assert client.find_by_dispatch_id("big", giant, since_ms=since).build_number == 4
    assert client.find_by_dispatch_id("big", small[0], since_ms=since).build_number == 1
    assert client.find_by_dispatch_id("big", newer[1]).build_number == 6
    assert client.find_by_dispatch_id("big", new_id(), since_ms=since) is None

    # The queue: a giant item of the job searched, and one of another job whose first parameter is the giant one.
    giant_item = client.trigger("big-queued", {"BLOB": blob(0, 5 * MiB)}, giant_queued := new_id())
    client.trigger("blob-first", {"BLOB": blob(0, 5 * MiB)}, new_id())
    mine = client.trigger("waiting", {}, waiting_id := new_id())
    assert client.find_by_dispatch_id("waiting", waiting_id).queue_id == mine.queue_id  # one item of "waiting"
    assert client.find_by_dispatch_id("big-queued", giant_queued).queue_id == giant_item.queue_id
    for i in range(3):  # several items of "big-queued": read from one listing of every item's first parameter
        client.trigger("big-queued", {"BLOB": blob(i + 1)}, new_id())
    assert client.find_by_dispatch_id("big-queued", giant_queued).queue_id == giant_item.queue_id
    assert client.find_by_dispatch_id("big-queued", new_id()) is None


def test_an_answer_still_too_large_makes_only_that_search_inconclusive(jenkins, client):
    since = now_ms()
    fill_builds(jenkins, client, count=2, chars=100)
    assert isinstance(client.trigger("big", {}, "D" * (5 * MiB)), Accepted)  # a DISPATCH_ID of 5 MiB
    assert jenkins.wait_until(lambda: len(jenkins.builds("big")) == 3 and jenkins.jenkins.in_flight() == 0)
    with pytest.raises(SearchInconclusive, match=r"DISPATCH_ID of build #3 of big .*4 MiB") as inconclusive:
        client.find_by_dispatch_id("big", new_id(), since_ms=since)
    assert "\n" not in str(inconclusive.value)
    assert client.job_info("big").declares_dispatch_id  # Jenkins itself is fine


# --- the reconciler and cancel -----------------------------------------------------------------------------


def lose_the_trigger(jenkins, queue, job: str, parameters: dict) -> int:
    """Enqueue a row whose trigger never reaches Jenkins, its outcome unknown: after the lease the reconciler must
    search Jenkins for its DISPATCH_ID."""
    job_id = queue.enqueue(job, parameters).id
    jenkins.add_fault(path="buildWithParameters$", reset=True, times=1)
    assert run_pass(dispatch_settings(jenkins.base_url))["outcome_unknown"] == 1
    return job_id


def test_the_reconciler_searches_past_large_builds_instead_of_stopping_every_pass(jenkins, client, queue, db):
    fill_builds(jenkins, client)
    job_id = lose_the_trigger(jenkins, queue, "big", {"BLOB": "small"})
    expire_leases(db)
    other = queue.enqueue("deploy").id

    # The search reads 80 builds of 60,000-character parameters: with the helpers' 1 s timeout, a full run beside another
    # suite saw that read time out (ReadTimeout: "a read about one job failed"), and nothing was re-sent.
    summary = run_pass(dispatch_settings(jenkins.base_url, JENKINS_TIMEOUT_SECONDS="10", LEASE_SECONDS="30"))

    assert summary["stopped_because"] == "queue empty"
    assert summary["reconciled"]["requeued"] == 1  # nothing found: sent again with the same DISPATCH_ID
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["jenkins_queue_id"] is not None
    assert jenkins.triggers_for(row["dispatch_id"]) == 1
    assert queue.get(other)["jenkins_queue_id"] is not None


def test_a_search_still_too_large_waits_for_the_next_lease_and_the_pass_goes_on(jenkins, client, queue, db):
    job_id = lose_the_trigger(jenkins, queue, "big", {"BLOB": "small"})
    assert isinstance(client.trigger("big", {}, "D" * (5 * MiB)), Accepted)
    assert jenkins.wait_until(lambda: jenkins.builds("big") and jenkins.jenkins.in_flight() == 0)
    expire_leases(db)
    other = queue.enqueue("deploy").id

    summary = run_pass(dispatch_settings(jenkins.base_url))

    assert summary["stopped_because"] == "queue empty"
    assert summary["reconciled"]["waiting"] == 1 and summary["reconciled"]["requeued"] == 0
    row = queue.get(job_id)
    assert row["status"] == "processing" and row["jenkins_queue_id"] is None
    assert jenkins.triggers_for(row["dispatch_id"]) == 0  # not sent again: we cannot tell it is absent
    assert queue.get(other)["jenkins_queue_id"] is not None
    # The operator is told, in the job's own history (`show`), not only in the logs.
    note = queue.events(job_id)[-1]
    assert note["event"] == "search_inconclusive" and "4 MiB" in note["detail"] and "not sent again" in note["detail"]


def started_row(jenkins, queue, parameters: dict) -> int:
    job_id = queue.enqueue("big", {"EMULATOR_DURATION": "30", **parameters}).id
    assert run_pass(dispatch_settings(jenkins.base_url))["triggered"] == 1
    assert jenkins.wait_until(lambda: any(b.building for b in jenkins.builds("big")))
    return job_id


def test_cancel_finds_its_build_among_large_builds(jenkins, client, queue, db):
    fill_builds(jenkins, client, count=79)
    job_id = started_row(jenkins, queue, {"BLOB": blob(0)})  # its build, #80, is the newest of 80 × 60 KB

    outcome = cancel_job(queue, job_id, dispatch_settings(jenkins.base_url))

    assert outcome["status"] == "cancelled" and outcome["jenkins"] == "asked Jenkins to stop build #80"
    assert jenkins.wait_until(lambda: jenkins.builds("big")[-1].result == "ABORTED")


def test_cancel_says_in_one_line_which_answer_was_too_large(jenkins, client, queue, db, capsys, monkeypatch):
    job_id = started_row(jenkins, queue, {})
    assert isinstance(client.trigger("big", {}, "D" * (5 * MiB)), Accepted)  # newer than ours: searched first
    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": ADMIN_TOKEN}.items():
        monkeypatch.setenv(key, value)

    with pytest.raises(DispatchError) as refused:
        cancel_job(queue, job_id, dispatch_settings(jenkins.base_url))
    assert not isinstance(refused.value, JenkinsError)  # not "Jenkins unavailable": Jenkins is fine
    assert f"cannot cancel job {job_id} in Jenkins" in str(refused.value) and "4 MiB" in str(refused.value)

    capsys.readouterr()
    assert main(["cancel", str(job_id)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot cancel job {job_id} in Jenkins" in err
    assert queue.get(job_id)["status"] == "processing"
