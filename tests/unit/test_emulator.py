"""The emulator's configuration, without starting it: every default job declares DISPATCH_ID, and a malformed
config is named in one line."""

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
