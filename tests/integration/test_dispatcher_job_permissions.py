"""Per-job permissions (issue #10): a job our Jenkins user may not build or read fails that row only; wrong
credentials still stop the pass. The real database and the emulator over real HTTP."""

import pytest
import requests

from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import dispatch_settings
from ..emulator_fixtures import ADMIN_TOKEN

USERS = {
    "admin": {"api_token": ADMIN_TOKEN},
    "dispatch": {"api_token": "dispatch-token", "permissions": {"deny_build": ["team/app/deploy"], "deny_read": ["hidden"]}},
}
JOBS = [{"path": "hidden", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1}]
GRANT_AND_RETRY = "(grant it, then `jenkins-dispatch retry ID`)"


@pytest.fixture
def restricted(make_jenkins):
    emulator = make_jenkins(users=USERS, jobs=JOBS)
    emulator.who_am_i = emulator.add_fault(path="^whoAmI/")  # a fault without effects counts requests
    return emulator


def as_dispatch(jenkins_url: str, token: str = "dispatch-token"):
    return dispatch_settings(jenkins_url, JENKINS_USER="dispatch", JENKINS_API_TOKEN=token)


def test_a_job_the_user_may_not_build_fails_and_the_rest_is_triggered(restricted, queue):
    forbidden = queue.enqueue("team/app/deploy", {"VERSION": "1"}).id
    allowed = [queue.enqueue("deploy", {"ENV": env}).id for env in ("a", "b")]
    summary = run_pass(as_dispatch(restricted.base_url))

    assert (summary["claimed"], summary["triggered"], summary["failed"], summary["released"]) == (3, 2, 1, 0)
    assert summary["stopped_because"] == "queue empty"  # not stopped by a Jenkins-wide failure
    row = queue.get(forbidden)
    assert row["status"] == "failed" and row["finished_at"] is not None
    assert row["last_error"] == ("Jenkins user dispatch may not build team/app/deploy: missing the Job/Build permission "
                                 + GRANT_AND_RETRY)
    for job_id in allowed:
        row = queue.get(job_id)
        assert row["status"] == "processing" and row["jenkins_queue_id"] is not None
        assert restricted.triggers_for(row["dispatch_id"]) == 1
    assert restricted.who_am_i.hits == 1

    # What the message says to do: grant the permission (here through the emulator's control API), retry.
    granted = requests.post(restricted.base_url + "_emulator/users", json={"name": "dispatch", "permissions": "all"}, timeout=5)
    assert granted.status_code == 200
    queue.retry_final(forbidden)
    summary = run_pass(as_dispatch(restricted.base_url))
    assert (summary["triggered"], summary["failed"]) == (1, 0)
    assert queue.get(forbidden)["status"] == "processing"


def test_a_job_the_user_may_not_read_fails_without_being_triggered(restricted, queue):
    hidden = queue.enqueue("hidden").id
    allowed = queue.enqueue("deploy").id
    summary = run_pass(as_dispatch(restricted.base_url))

    assert (summary["triggered"], summary["failed"], summary["released"]) == (1, 1, 0)
    assert summary["stopped_because"] == "queue empty"
    row = queue.get(hidden)
    assert row["status"] == "failed"
    assert row["last_error"] == "Jenkins user dispatch may not read hidden: missing the Job/Read permission " + GRANT_AND_RETRY
    assert restricted.triggers_for(row["dispatch_id"]) == 0
    assert queue.get(allowed)["status"] == "processing"


@pytest.mark.parametrize(
    "jenkins_config",
    [
        {},  # 401
        {"bad_credentials": "anonymous"},  # 403 everywhere, the job check already
        {"bad_credentials": "anonymous", "anonymous_read": True},  # anonymous may read: the trigger is the 403
    ],
    ids=["401", "403-everywhere", "403-on-trigger"],
)
def test_wrong_credentials_still_stop_the_pass_without_spending_attempts(make_jenkins, queue, jenkins_config):
    emulator = make_jenkins(users=USERS, jobs=JOBS, **jenkins_config)
    for job in ("team/app/deploy", "deploy", "deploy"):
        queue.enqueue(job)
    summary = run_pass(as_dispatch(emulator.base_url, token="wrong-token"))

    assert (summary["triggered"], summary["failed"], summary["released"]) == (0, 0, 3)
    assert "JENKINS_API_TOKEN" in summary["stopped_because"] and "user dispatch" in summary["stopped_because"]
    assert all(r["status"] == "pending" and r["attempts"] == 0 for r in queue.list_jobs())
    assert emulator.counters()["trigger_requests"] == 0
