"""decisions.py: what the dispatcher does about a job check or a trigger answer (fail the row, stop the pass),
the one error class each cause is counted under, and how long a settled re-sent row is watched."""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.decisions import Act, check_job, decide_trigger, watch_window_seconds
from jenkins_dispatch.jenkins.answers import (
    AuthRejected,
    Forbidden,
    JobForbidden,
    JobInfo,
    NotParameterized,
)


@pytest.mark.parametrize(
    ("outcome", "act", "error_class", "text"),
    [
        (JobForbidden("team/app/deploy", "dispatch", "Job/Build"), Act.FAIL, "JobForbidden",
         "Jenkins user dispatch may not build team/app/deploy: missing the Job/Build permission "
         "(grant it, then `jenkins-dispatch retry ID`)"),
        (JobForbidden("hidden", "dispatch", "Job/Read"), Act.FAIL, "JobForbidden",
         "Jenkins user dispatch may not read hidden: missing the Job/Read permission (grant it, then `jenkins-dispatch retry ID`)"),
        (JobForbidden("x", "dispatch", "Job/Workspace"), Act.FAIL, "JobForbidden",
         "Jenkins user dispatch may not use x: missing the Job/Workspace permission (grant it, then `jenkins-dispatch retry ID`)"),
        (AuthRejected("Jenkins rejected the credentials of user dispatch: check JENKINS_USER / JENKINS_API_TOKEN"),
         Act.STOP_PASS, "AuthRejected", "Jenkins rejected the credentials of user dispatch"),
        # Unresolved (the client always resolves it): behave as before, stop without spending attempts.
        (Forbidden("x", "Job/Build"), Act.STOP_PASS, "AuthRejected", "x"),
    ],
)
def test_trigger_decisions_for_403s(outcome, act, error_class, text) -> None:
    decision = decide_trigger(getattr(outcome, "job_name", "x"), outcome)
    assert (decision.act, decision.error_class) == (act, error_class)
    assert text in decision.reason and "\n" not in decision.reason


@pytest.mark.parametrize(
    ("info", "act", "error_class"),
    [
        (JobInfo(exists=True, forbidden=JobForbidden("hidden", "dispatch", "Job/Read")), Act.FAIL, "JobForbidden"),
        (JobInfo(exists=False), Act.FAIL, "JobNotFound"),
        (JobInfo(True, True, True, ("DISPATCH_ID",)), None, None),
    ],
)
def test_job_checks_fail_a_job_the_user_may_not_read(info, act, error_class) -> None:
    decision = check_job("hidden", info)
    if act is None:
        assert decision is None
    else:
        assert (decision.act, decision.error_class) == (act, error_class)
    if info.forbidden:
        assert decision.reason == ("Jenkins user dispatch may not read hidden: missing the Job/Read permission "
                                   "(grant it, then `jenkins-dispatch retry ID`)")


@pytest.mark.parametrize("decide", [
    lambda: check_job("team/app", JobInfo(exists=True, buildable=True, parameter_names=("ENV",))),
    lambda: decide_trigger("team/app", NotParameterized("team/app")),
], ids=["seen by the job check", "told by the trigger's answer"])
def test_a_job_without_dispatch_id_fails_under_one_error_class(decide) -> None:
    """One cause, one metric (TriggerErrorsMissingDispatchIdParameter), however the dispatcher learns of it."""
    decision = decide()
    assert (decision.act, decision.error_class) == (Act.FAIL, "MissingDispatchIdParameter")
    assert "DISPATCH_ID" in decision.reason


@pytest.mark.parametrize(
    ("lease", "quiet", "timeout", "window"),
    [
        (300, 900, 10, 2120),  # the defaults: 35 minutes after the row settled
        (3, 9, 1, 23),  # the tests' lease and timeout
        (60, 0, 10, 80),  # re-sends not held: what remains is the lease and the timeouts
        (300, 3600, 10, 7520),  # held an hour: watched the hour it may wait, after landing up to an hour late
    ],
)
def test_a_settled_rows_dispatch_is_watched_for_as_long_as_its_re_send_may_wait_in_jenkins(lease, quiet, timeout,
                                                                                         window) -> None:
    assert watch_window_seconds(lease, quiet, timeout) == window
    # The re-send went out at most as the row settled (0 s before it, or some time before); Jenkins acted on it as
    # late as the guarantee covers (one lease plus the quiet period after it was sent, its own request taking up to
    # the timeout); it then waits the quiet period in the queue. Every moment of that wait is inside the window.
    for sent_before_settle in (0, timeout, lease):
        leaves_the_queue = -sent_before_settle + timeout + lease + quiet + quiet
        assert leaves_the_queue <= window
