"""The emulator's configuration and faults, without starting it: every default job declares DISPATCH_ID, a
malformed config is named in one line, and faults count the requests they hold back."""

from __future__ import annotations

import pytest


def test_default_jobs_all_declare_dispatch_id() -> None:
    """Issue 12 #11: the README's `enqueue nightly` failed against the default emulator (nightly had no parameters)."""
    from jenkins_emulator import DEFAULT_CONFIG

    assert {"deploy", "nightly", "team/app/deploy"} <= {job["path"] for job in DEFAULT_CONFIG["jobs"]}
    for job in DEFAULT_CONFIG["jobs"]:
        assert {"name": "DISPATCH_ID"} in job.get("parameters", []) and job.get("parameterized", True), job


@pytest.mark.parametrize(
    "config, problem",
    [
        ({"jobs": [{"path": "ok"}, {"kind": "pipeline"}]}, 'jobs[1] has no "path": {"kind": "pipeline"}'),
        ({"jobs": ["deploy"]}, 'jobs[0] must be an object with a "path", got "deploy"'),
        ({"jobs": {"path": "x"}}, "jobs must be a list of objects"),
        ({"jobs": [{"path": ""}]}, 'jobs[0] has no "path": {"path": ""}'),
        ({"jobs": [{"path": "a", "parameters": [{"type": "string"}]}]}, 'jobs[0] ("a") parameters[0] has no "name"'),
        ({"folders": [{"disabled": True}]}, 'folders[0] has no "path": {"disabled": true}'),
        ({"users": ["admin"]}, 'users must be an object: {"NAME": {"api_token": ...}}'),
        ({"users": {"admin": "admin-token"}}, 'users["admin"] must be an object such as {"api_token": "...", "password": "..."}'),
        ({"notification": 5}, "notification must be a URL or an object with a \"url\""),
        ([], "the config must be a JSON object"),
    ],
)
def test_config_problems_are_named_in_one_line(config, problem) -> None:
    from jenkins_emulator.config import config_problem

    assert config_problem(config) == problem


def test_well_formed_configs_have_no_problem() -> None:
    from jenkins_emulator import DEFAULT_CONFIG
    from jenkins_emulator.config import config_problem

    from ..emulator_fixtures import FAST_CONFIG

    assert config_problem(DEFAULT_CONFIG) is None and config_problem(FAST_CONFIG) is None and config_problem({}) is None


@pytest.mark.parametrize(
    "spec, held",
    [
        ({"latency_seconds": 4.0}, True),  # a request Jenkins acts on late
        ({"hold": True}, True),  # one it acts on when the test releases it
        ({"status": 500}, False),  # answered without being acted on: nothing to wait for
        ({"drop_after_accept": True}, False),
        ({"slow_seconds": 2.0}, False),  # acted on at once, answered late
    ],
)
def test_a_fault_counts_the_requests_it_holds_back_until_they_are_handled(spec, held) -> None:
    """``waiting``: what a test waits on to know that every late request has landed in Jenkins."""
    from jenkins_emulator.faults import Faults

    faults = Faults()
    fault = faults.add(path="buildWithParameters$", **spec)
    taken = [faults.take("POST", "job/deploy/buildWithParameters") for _ in range(2)]
    assert taken == [fault, fault] and fault.hits == 2 and fault.waiting == (2 if held else 0)
    faults.handled(fault)
    assert fault.waiting == (1 if held else 0)
