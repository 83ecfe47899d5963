"""The Jenkins client against the emulator over real HTTP: every row of docs/jenkins.md's trigger-outcome table."""

from __future__ import annotations

import logging
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

import pytest
import requests

from jenkins_dispatch.dispatching.decisions import Act, check_job
from jenkins_dispatch.errors import InvalidJobPath, JenkinsAuthRejected, JenkinsUnavailable
from jenkins_dispatch.jenkins.answers import (
    Accepted,
    AuthRejected,
    BuildGone,
    Building,
    BuildStarted,
    Disabled,
    Finished,
    JobForbidden,
    JobInfo,
    JobNotFound,
    Merged,
    NotParameterized,
    OutcomeUnknown,
    QueueBlocked,
    QueueBuildable,
    QueueCancelled,
    QueueItemGone,
    QueueWaiting,
    Refused,
    ServerError,
    Unavailable,
)
from jenkins_dispatch.jenkins.client import (
    CancelResult,
    Found,
    JenkinsClient,
    StopResult,
)
from jenkins_dispatch.jenkins.jobs import job_path

from ..emulator_fixtures import ADMIN_TOKEN


def new_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def client(jenkins):
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        yield client


def wait_for(read, accept, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if accept(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- triggering ----------------------------------------------------------------------------------------------


def test_accepted_trigger_runs_one_build_with_the_dispatch_id(jenkins, client) -> None:
    dispatch_id = new_id()
    outcome = client.trigger("deploy", {"ENV": "prod"}, dispatch_id)
    assert isinstance(outcome, Accepted)
    state = wait_for(lambda: client.queue_item(outcome.queue_id), lambda s: isinstance(s, BuildStarted))
    assert state == BuildStarted(1, f"{jenkins.base_url}job/deploy/1/")
    finished = wait_for(lambda: client.build("deploy", 1), lambda s: isinstance(s, Finished))
    assert isinstance(finished, Finished) and finished.result == "SUCCESS"
    assert jenkins.triggers_for(dispatch_id) == 1


def test_parameter_values_are_sent_as_form_text(jenkins, client) -> None:
    outcome = client.trigger("deploy", {"ENV": "prod é", "FLAG": True, "COUNT": 3, "PAYLOAD": {"a": [1, None]}}, "d-1")
    assert isinstance(outcome, Accepted)
    counters = jenkins.counters()["triggers_by_parameter"]
    assert counters["ENV"] == {"prod é": 1}
    assert counters["FLAG"] == {"true": 1}
    assert counters["COUNT"] == {"3": 1}
    assert counters["PAYLOAD"] == {'{"a":[1,null]}': 1}


def test_identical_trigger_while_queued_is_merged(jenkins, client) -> None:
    dispatch_id = new_id()
    first = client.trigger("waiting", {}, dispatch_id)
    second = client.trigger("waiting", {}, dispatch_id)
    assert isinstance(first, Accepted)
    assert second == Merged(first.queue_id)
    assert jenkins.triggers_for(dispatch_id) == 1


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ("no-such-job", JobNotFound("no-such-job")),
        ("team/nothing/here", JobNotFound("team/nothing/here")),
        ("nightly", NotParameterized("nightly")),
        ("frozen", Disabled("frozen")),
        ("old/job", Disabled("old/job")),
    ],
)
def test_job_level_refusals(client, job, expected) -> None:
    assert client.trigger(job, {}, new_id()) == expected


def test_queue_veto_is_refused(client) -> None:
    outcome = client.trigger("vetoed", {}, new_id())
    assert isinstance(outcome, Refused)


def test_bad_token_is_rejected_with_a_clear_message(jenkins) -> None:
    with JenkinsClient(jenkins.base_url, "admin", "wrong-token", timeout_seconds=2) as client:
        outcome = client.trigger("deploy", {}, new_id())
        assert outcome == AuthRejected("Jenkins rejected the credentials of user admin: check JENKINS_USER / JENKINS_API_TOKEN")
        with pytest.raises(JenkinsAuthRejected, match="user admin"):
            client.job_info("deploy")


def test_missing_build_permission_is_about_the_job(jenkins) -> None:
    with JenkinsClient(jenkins.base_url, "viewer", "viewer-token", timeout_seconds=2) as client:
        assert client.trigger("deploy", {}, new_id()) == JobForbidden("deploy", "viewer", "Job/Build")
        assert client.job_info("deploy").exists


# --- per-job permissions: this job, or Jenkins as a whole? ------------------------------------------------------

PERMISSION_USERS = {
    "admin": {"api_token": ADMIN_TOKEN},
    "dispatch": {"api_token": "dispatch-token", "permissions": {
        "deny_build": ["team/app/deploy", "secret/*"], "deny_read": ["hidden"], "deny_discover": ["private"]}},
}
PERMISSION_JOBS = [{"path": name, "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.1}
                   for name in ("secret/one", "hidden", "private")]


@pytest.fixture
def restricted(make_jenkins):
    """An emulator where user ``dispatch`` may build some jobs and not others; whoAmI requests are counted."""
    emulator = make_jenkins(users=PERMISSION_USERS, jobs=PERMISSION_JOBS)
    emulator.who_am_i = emulator.add_fault(path="^whoAmI/")  # a fault without effects counts requests
    return emulator


def test_per_job_403_on_trigger_is_job_forbidden_and_whoami_is_asked_once(restricted) -> None:
    with JenkinsClient(restricted.base_url, "dispatch", "dispatch-token", timeout_seconds=2) as client:
        ids = [new_id() for _ in range(32)]
        with ThreadPoolExecutor(16) as pool:
            outcomes = list(pool.map(lambda d: client.trigger("team/app/deploy", {}, d), ids))
        assert outcomes == [JobForbidden("team/app/deploy", "dispatch", "Job/Build")] * 32
        assert client.trigger("secret/one", {}, new_id()) == JobForbidden("secret/one", "dispatch", "Job/Build")
        assert isinstance(client.trigger("deploy", {}, new_id()), Accepted)  # the credentials do work
        assert restricted.who_am_i.hits == 1
    assert restricted.counters()["trigger_requests"] == 1


def test_whoami_that_cannot_be_read_keeps_the_403_jenkins_wide(restricted) -> None:
    restricted.clear_faults()  # the first matching fault applies: drop the fixture's counting one
    restricted.add_fault(path="^whoAmI/", status=500)
    with JenkinsClient(restricted.base_url, "dispatch", "dispatch-token", timeout_seconds=2) as client:
        outcome = client.trigger("team/app/deploy", {}, new_id())
    assert isinstance(outcome, Unavailable) and "whoAmI" in outcome.reason


@pytest.mark.parametrize(
    "jenkins_config",
    [
        {},  # Jenkins's own realm: a wrong token is a 401
        {"bad_credentials": "anonymous"},  # an SSO realm that treats unknown credentials as anonymous: 403 everywhere
        {"bad_credentials": "anonymous", "anonymous_read": True},  # ... even where anonymous may read: the trigger is a 403
    ],
    ids=["401", "403-no-anonymous-read", "403-anonymous-read"],
)
def test_wrong_credentials_are_auth_rejected_not_job_forbidden(make_jenkins, jenkins_config) -> None:
    emulator = make_jenkins(users=PERMISSION_USERS, jobs=PERMISSION_JOBS, **jenkins_config)
    expected = AuthRejected("Jenkins rejected the credentials of user dispatch: check JENKINS_USER / JENKINS_API_TOKEN")
    with JenkinsClient(emulator.base_url, "dispatch", "wrong-token", timeout_seconds=2) as client:
        for job in ("deploy", "team/app/deploy"):
            assert client.trigger(job, {}, new_id()) == expected
        if not jenkins_config.get("anonymous_read"):
            with pytest.raises(JenkinsAuthRejected, match="user dispatch"):
                client.job_info("hidden")
        # whoAmI agrees: a 401, or anonymous.
        assert client._credentials_work(time.monotonic() + 2) is False
    assert emulator.counters()["trigger_requests"] == 0


def test_job_info_per_job_403_becomes_a_failed_job_not_a_stopped_pass(restricted) -> None:
    with JenkinsClient(restricted.base_url, "dispatch", "dispatch-token", timeout_seconds=2) as client:
        info = client.job_info("hidden")
        assert info == JobInfo(exists=True, forbidden=JobForbidden("hidden", "dispatch", "Job/Read"))
        decision = check_job("hidden", info)
        assert decision.act is Act.FAIL and decision.error_class == "JobForbidden"
        assert decision.reason.startswith("Jenkins user dispatch may not read hidden: missing the Job/Read permission")
        assert client.job_info("private") == JobInfo(exists=False)  # no Discover either: Jenkins says 404
        assert client.job_info("team/app/deploy").declares_dispatch_id  # may read it, just not build it
        assert restricted.who_am_i.hits == 1
    with JenkinsClient(restricted.base_url, "dispatch", "wrong-token", timeout_seconds=2) as client, \
            pytest.raises(JenkinsAuthRejected, match="user dispatch"):
        client.job_info("hidden")


def test_connection_refused_is_unavailable_and_quick() -> None:
    with JenkinsClient(f"http://127.0.0.1:{free_port()}", "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        outcome = client.trigger("deploy", {}, new_id())
        assert isinstance(outcome, Unavailable) and "cannot connect" in outcome.reason
        with pytest.raises(JenkinsUnavailable, match="cannot connect"):
            client.queue_item(1)


def test_server_error_is_that_requests_failure_and_nothing_queued(jenkins, client) -> None:
    """A 500 says this request failed, not that Jenkins is down (the dispatcher's breaker weighs that)."""
    jenkins.add_fault(path="buildWithParameters$", status=500)
    dispatch_id = new_id()
    outcome = client.trigger("deploy", {}, dispatch_id)
    assert isinstance(outcome, ServerError) and outcome.status == 500
    assert jenkins.triggers_for(dispatch_id) == 0


@pytest.mark.parametrize(("kind", "reason"), [("restarting", "restarting"), ("starting", "starting")])
def test_restart_window_is_unavailable(jenkins, client, kind, reason) -> None:
    jenkins.restart(window_seconds=5, kind=kind)
    outcome = client.trigger("deploy", {}, new_id())
    assert isinstance(outcome, Unavailable) and reason in outcome.reason
    with pytest.raises(JenkinsUnavailable, match=reason):
        client.job_info("deploy")


def test_timeout_is_outcome_unknown_within_the_time_budget(jenkins) -> None:
    # Jenkins holds the trigger unhandled until the test releases it: the client's answer comes from its own
    # budget, not from Jenkins.
    held = jenkins.add_fault(path="buildWithParameters$", hold=True, times=1)
    dispatch_id = new_id()
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=0.5) as client:
        outcome = client.trigger("deploy", {}, dispatch_id)
    assert isinstance(outcome, OutcomeUnknown) and "may still be queued" in outcome.reason
    assert held.waiting == 1 and jenkins.triggers_for(dispatch_id) == 0  # given up on while Jenkins still held it
    # Jenkins acts on the abandoned request later: exactly what the reconciler must expect.
    held.release()
    assert jenkins.wait_until(lambda: jenkins.triggers_for(dispatch_id) == 1, timeout=10)


@pytest.mark.parametrize("fault", [{"drop_after_accept": True}, {"slow_seconds": 1.5}])
def test_request_acted_on_without_an_answer_is_unknown_and_found_later(jenkins, fault) -> None:
    jenkins.add_fault(path="buildWithParameters$", times=1, **fault)
    dispatch_id = new_id()
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=0.7) as client:
        outcome = client.trigger("team/app/deploy", {"VERSION": "1"}, dispatch_id)
        assert isinstance(outcome, OutcomeUnknown)
        assert jenkins.triggers_for(dispatch_id) == 1
        found = client.find_by_dispatch_id("team/app/deploy", dispatch_id)
        assert found is not None and found.queue_id is not None


def test_connection_reset_is_unknown(jenkins, client) -> None:
    jenkins.add_fault(path="buildWithParameters$", reset=True, times=1)
    dispatch_id = new_id()
    assert isinstance(client.trigger("deploy", {}, dispatch_id), OutcomeUnknown)
    assert jenkins.triggers_for(dispatch_id) == 0
    assert isinstance(client.trigger("deploy", {}, dispatch_id), Accepted)


def test_location_host_is_not_trusted(make_jenkins) -> None:
    emulator = make_jenkins(location_base="http://10.9.9.9:8080")
    with JenkinsClient(emulator.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        outcome = client.trigger("deploy", {}, new_id())
        assert outcome == Accepted(1)
        assert isinstance(client.queue_item(1), BuildStarted | QueueBuildable | QueueWaiting)


@pytest.mark.parametrize("slash", ["", "/"])
def test_context_path_with_or_without_trailing_slash(make_jenkins, slash) -> None:
    emulator = make_jenkins(context_path="/jenkins/")
    base = emulator.base_url.rstrip("/") + slash
    with JenkinsClient(base, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        dispatch_id = new_id()
        outcome = client.trigger("team/app/deploy", {}, dispatch_id)
        assert isinstance(outcome, Accepted)
        found = wait_for(lambda: client.find_by_dispatch_id("team/app/deploy", dispatch_id), lambda f: f and f.build_number)
        assert found.build_url.startswith(emulator.base_url + "job/team/job/app/job/deploy/")


@pytest.mark.parametrize("job", ["Test Job", "déploiement ünï", "repo/feature%2Ffoo", "team/app/deploy"])
def test_odd_job_names_work_end_to_end(jenkins, client, job) -> None:
    info = client.job_info(job)
    assert info.exists and info.declares_dispatch_id
    dispatch_id = new_id()
    outcome = client.trigger(job, {}, dispatch_id)
    assert isinstance(outcome, Accepted)
    found = wait_for(lambda: client.find_by_dispatch_id(job, dispatch_id), lambda f: f and f.build_number)
    assert found.build_number == 1
    finished = wait_for(lambda: client.build(job, 1), lambda s: isinstance(s, Finished))
    assert isinstance(finished, Finished)


def test_concurrent_triggers_share_one_pool(jenkins, client) -> None:
    ids = [new_id() for _ in range(24)]
    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(lambda d: client.trigger("deploy", {}, d), ids))
    assert all(isinstance(o, Accepted) for o in outcomes)
    assert len({o.queue_id for o in outcomes}) == 24
    assert all(jenkins.triggers_for(d) == 1 for d in ids)


# --- crumbs ------------------------------------------------------------------------------------------------


def test_crumb_is_fetched_once_reused_and_refetched_after_restart(make_jenkins) -> None:
    emulator = make_jenkins(crumb_mode="always")
    crumb_requests = emulator.add_fault(path="^crumbIssuer/")  # a fault without effects counts requests
    with JenkinsClient(emulator.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        assert isinstance(client.trigger("deploy", {}, new_id()), Accepted)
        assert isinstance(client.trigger("deploy", {}, new_id()), Accepted)
        assert isinstance(client.cancel_queue_item(999), CancelResult)
        assert crumb_requests.hits == 1
        emulator.restart(window_seconds=0)  # sessions, and so crumbs, are gone
        assert isinstance(client.trigger("deploy", {}, new_id()), Accepted)
        assert crumb_requests.hits == 2


def test_password_auth_uses_a_session_bound_crumb(jenkins) -> None:
    with JenkinsClient(jenkins.base_url, "admin", "admin-password", timeout_seconds=2) as client:
        assert isinstance(client.trigger("deploy", {}, new_id()), Accepted)


def test_crumb_refused_again_becomes_auth_rejected(make_jenkins) -> None:
    emulator = make_jenkins(crumb_mode="always")
    with JenkinsClient(emulator.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        client._session.cookies.clear()
        # A crumb issuer that hands out crumbs for a session the server never keeps: every crumb is refused.
        emulator.jenkins.sessions.clear()
        original = emulator.jenkins.new_session
        emulator.jenkins.new_session = lambda user: "forgotten-" + user
        try:
            outcome = client.trigger("deploy", {}, new_id())
        finally:
            emulator.jenkins.new_session = original
        assert isinstance(outcome, AuthRejected) and "crumb" in outcome.detail


# --- job info, queue, builds -----------------------------------------------------------------------------------


def test_job_info(client) -> None:
    deploy = client.job_info("deploy")
    assert deploy == JobInfo(True, True, True, ("DISPATCH_ID", "ENV", "FLAG", "COUNT", "PAYLOAD"))
    assert client.job_info("no-dispatch-id") == JobInfo(True, True, False, ("ENV",))
    assert client.job_info("nightly") == JobInfo(True, True, False, ())
    assert client.job_info("frozen").buildable is False
    assert client.job_info("old/job").buildable is False
    assert client.job_info("missing") == JobInfo(exists=False)
    assert client.job_info("team").exists and not client.job_info("team").buildable


def test_queue_item_states(jenkins, client) -> None:
    waiting = client.trigger("waiting", {}, new_id())
    state = client.queue_item(waiting.queue_id)
    assert isinstance(state, QueueWaiting) and state.why.startswith("In the quiet period. Expires in")

    first = client.trigger("serial", {}, new_id())
    wait_for(lambda: client.queue_item(first.queue_id), lambda s: isinstance(s, BuildStarted))
    second = client.trigger("serial", {}, new_id())
    blocked = wait_for(lambda: client.queue_item(second.queue_id), lambda s: isinstance(s, QueueBlocked))
    assert isinstance(blocked, QueueBlocked) and blocked.why.startswith("Build #1 is already in progress (ETA:")

    jenkins.configure(executors=0)
    third = client.trigger("deploy", {}, new_id())
    buildable = wait_for(lambda: client.queue_item(third.queue_id), lambda s: isinstance(s, QueueBuildable))
    assert buildable == QueueBuildable("Waiting for next available executor")

    assert client.cancel_queue_item(third.queue_id) is CancelResult.CANCELLED
    assert client.queue_item(third.queue_id) == QueueCancelled()
    assert client.queue_item(987654) == QueueItemGone()


def test_left_items_are_forgotten_after_retention(make_jenkins) -> None:
    emulator = make_jenkins(left_item_retention_seconds=0.3)
    with JenkinsClient(emulator.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2) as client:
        outcome = client.trigger("deploy", {}, new_id())
        assert isinstance(wait_for(lambda: client.queue_item(outcome.queue_id), lambda s: isinstance(s, BuildStarted)), BuildStarted)
        assert wait_for(lambda: client.queue_item(outcome.queue_id), lambda s: isinstance(s, QueueItemGone), 3) == QueueItemGone()


def test_build_states_and_results(client) -> None:
    outcome = client.trigger("deploy", {"EMULATOR_RESULT": "UNSTABLE", "EMULATOR_DURATION": "0.3"}, new_id())
    started = wait_for(lambda: client.queue_item(outcome.queue_id), lambda s: isinstance(s, BuildStarted))
    assert isinstance(client.build("deploy", started.build_number), Building)
    finished = wait_for(lambda: client.build("deploy", started.build_number), lambda s: isinstance(s, Finished))
    assert finished.result == "UNSTABLE"
    assert client.build("deploy", 999) == BuildGone()
    assert client.build("missing-job", 1) == BuildGone()


# --- find by DISPATCH_ID -------------------------------------------------------------------------------------


def test_find_in_queue_and_in_builds(jenkins, client) -> None:
    queued_id, built_id = new_id(), new_id()
    queued = client.trigger("waiting", {}, queued_id)
    assert client.find_by_dispatch_id("waiting", queued_id) == Found(queue_id=queued.queue_id)
    assert client.find_by_dispatch_id("deploy", queued_id) is None  # same id, other job: not a match

    built = client.trigger("deploy", {}, built_id)
    found = wait_for(lambda: client.find_by_dispatch_id("deploy", built_id), lambda f: f and f.result)
    assert found == Found(queue_id=built.queue_id, build_number=1, build_url=f"{jenkins.base_url}job/deploy/1/", result="SUCCESS", building=False)
    assert client.find_by_dispatch_id("deploy", new_id()) is None
    assert client.find_by_dispatch_id("missing-job", built_id) is None


def test_find_looks_only_at_the_search_window(jenkins) -> None:
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2, search_window=2) as client:
        ids = [new_id() for _ in range(3)]
        for dispatch_id in ids:
            client.trigger("deploy", {}, dispatch_id)
        jenkins.wait_idle()
        assert client.find_by_dispatch_id("deploy", ids[0]) is None
        assert client.find_by_dispatch_id("deploy", ids[2]).build_number == 3


# --- cancel and stop -----------------------------------------------------------------------------------------


def test_cancel_outcomes(jenkins, client) -> None:
    queued = client.trigger("waiting", {}, new_id())
    with JenkinsClient(jenkins.base_url, "viewer", "viewer-token", timeout_seconds=2) as viewer:
        assert viewer.cancel_queue_item(queued.queue_id) is CancelResult.NOT_PERMITTED
    assert client.cancel_queue_item(queued.queue_id) is CancelResult.CANCELLED
    assert client.cancel_queue_item(queued.queue_id) is CancelResult.ALREADY_STARTED  # a LeftItem now
    assert client.cancel_queue_item(424242) is CancelResult.NOT_FOUND
    started = client.trigger("deploy", {}, new_id())
    wait_for(lambda: client.queue_item(started.queue_id), lambda s: isinstance(s, BuildStarted))
    assert client.cancel_queue_item(started.queue_id) is CancelResult.ALREADY_STARTED


def test_stop_build(jenkins, client) -> None:
    outcome = client.trigger("deploy", {"EMULATOR_DURATION": "30"}, new_id())
    started = wait_for(lambda: client.queue_item(outcome.queue_id), lambda s: isinstance(s, BuildStarted))
    assert client.stop_build("deploy", started.build_number) is StopResult.STOP_REQUESTED
    finished = wait_for(lambda: client.build("deploy", started.build_number), lambda s: isinstance(s, Finished))
    assert finished.result == "ABORTED"
    assert client.stop_build("deploy", started.build_number) is StopResult.STOP_REQUESTED  # finished: a no-op
    assert client.stop_build("deploy", 999) is StopResult.GONE


# --- secrets and settings ------------------------------------------------------------------------------------


def test_api_token_never_leaks(jenkins, caplog) -> None:
    secret = "s3cr3t-T0KEN-value"
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    jenkins.add_fault(path="^queue/item/", latency_seconds=1.0)
    for base in (jenkins.base_url, f"http://127.0.0.1:{free_port()}/"):
        with JenkinsClient(base, "admin", secret, timeout_seconds=0.4, verify_tls=False, logger=logging.getLogger("t")) as client:
            texts.append(repr(client))
            texts.append(repr(client.trigger("deploy", {}, new_id())))
            for call in (lambda c=client: c.job_info("deploy"), lambda c=client: c.queue_item(1), lambda c=client: c.cancel_queue_item(1)):
                try:
                    call()
                except Exception as exc:  # noqa: BLE001 - collecting every message
                    texts.append(str(exc))
                    texts.append(repr(exc))
    assert texts and all(secret not in text for text in texts)
    assert secret not in caplog.text


def test_disabled_tls_verification_logs_one_warning(jenkins, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="jenkins-test")
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=2, verify_tls=False, logger=logging.getLogger("jenkins-test")) as client:
        client.trigger("deploy", {}, new_id())
        client.trigger("deploy", {}, new_id())
    warnings = [r for r in caplog.records if r.name == "jenkins-test"]
    assert len(warnings) == 1 and "TLS verification" in warnings[0].getMessage()


def test_timeout_split_never_exceeds_the_budget(jenkins) -> None:
    held = jenkins.add_fault(path="api/json", hold=True)
    with JenkinsClient(jenkins.base_url, "admin", ADMIN_TOKEN, timeout_seconds=0.6) as client:
        # Connect and read timeouts together fit in what is left of the call's budget, whatever is left.
        for left in (0.6, 0.3, 0.05):
            assert sum(client._timeouts(time.monotonic() + left)) <= left
        with pytest.raises(JenkinsUnavailable, match="no answer"):
            client.job_info("deploy")
        assert held.waiting == 1  # given up on its own budget while Jenkins still held the request
    held.release()


# --- job paths reach Jenkins as written ----------------------------------------------------------------------


@pytest.mark.parametrize("job", ["team/app/deploy", "Test Job", "déploiement ünï", "repo/feature%2Ffoo", "a~b/.x/y.", "..."])
def test_requests_keeps_every_job_path_as_encoded(job) -> None:
    """requests normalises what it sends: it decodes %XX of unreserved characters and urllib3 removes dot segments.
    Every path job_path builds must come out of that unchanged, segment for segment."""
    url = "http://jenkins.example/ctx/" + job_path(job) + "buildWithParameters"
    sent = requests.Request("POST", url).prepare().path_url
    segments = [unquote(s) for s in sent.split("/")[2:-1]]
    assert segments[0::2] == ["job"] * len(job.split("/")) and segments[1::2] == job.split("/")


def test_a_dot_dot_job_path_is_never_sent(jenkins, client) -> None:
    with pytest.raises(InvalidJobPath, match=r"'\.' and '\.\.'"):
        client.trigger("team/../app/deploy", {}, new_id())
    assert jenkins.counters()["trigger_requests"] == 0
