"""JENKINS_CONTROLLERS is read and validated at start: one line per problem, each naming the variable, never a
token (issue 23)."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch import cli
from jenkins_dispatch.config import load_settings
from jenkins_dispatch.errors import ConfigError
from jenkins_dispatch.jenkins.controllers import controllers_told_apart

BASE = {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "https://a.example.com/",
        "JENKINS_USER": "u", "JENKINS_API_TOKEN": "secret-a"}


def _load(controllers: object, **env: str):
    return load_settings({**BASE, "JENKINS_CONTROLLERS": json.dumps(controllers), **env})


def test_the_default_controller_and_the_others():
    settings = _load({"eu": {"url": "https://eu.example.com/ci", "user": "u", "api_token": "t", "max_in_flight": 5}})
    assert [(c.name, c.url, c.max_in_flight) for c in settings.controllers] == [
        ("default", "https://a.example.com/", None), ("eu", "https://eu.example.com/ci/", 5)]
    assert settings.for_controller("eu").jenkins.api_token == "t"


@pytest.mark.parametrize("controllers, line", [
    ({"EU": {"url": "https://eu/", "user": "u", "api_token": "t"}}, "bad controller name 'EU'"),
    ({"eu": {"url": "https://A.example.com", "user": "u", "api_token": "t"}},
     "controllers 'default' and 'eu' have the same url"),
    ({"eu": {"url": "https://eu/", "user": "u"}}, "JENKINS_CONTROLLERS['eu'] has no api_token"),
    ({"default": {"url": "https://eu/", "user": "u", "api_token": "t"}}, "JENKINS_CONTROLLERS defines 'default'"),
    ({"eu": {"url": "https://x:s3cr3t@eu/", "user": "u", "api_token": "t"}}, "must not carry credentials"),
    ({"eu": {"url": "https://eu/", "user": "u", "api_token": "t", "max_in_flight": 0}}, "max_in_flight must be"),
])
def test_each_problem_is_one_line_naming_the_variable(controllers, line):
    with pytest.raises(ConfigError) as refused:
        _load(controllers)
    [message] = str(refused.value).splitlines()
    assert line in message and "JENKINS_CONTROLLERS" in message and "s3cr3t" not in message


def test_several_problems_are_one_line_each():
    with pytest.raises(ConfigError) as refused:
        _load({"Bad": {}, "eu": {"url": "https://eu/", "user": "u"}, "default": {}})
    assert len(str(refused.value).splitlines()) == 3


def test_not_json_is_refused():
    with pytest.raises(ConfigError, match="JENKINS_CONTROLLERS must be JSON"):
        load_settings({**BASE, "JENKINS_CONTROLLERS": "{nope"})


def test_the_secret_holds_the_same_json():
    secret = json.dumps({"eu": {"url": "https://eu/", "user": "u", "api_token": "t"}})
    settings = load_settings({**BASE, "JENKINS_CONTROLLERS_SECRET_ARN": "arn:x"}, fetch_secret=lambda arn: secret)
    assert [c.name for c in settings.controllers] == ["default", "eu"]


def test_a_bad_configuration_is_refused_at_start_in_one_line_exit_2(monkeypatch, capsys):
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("JENKINS_CONTROLLERS", json.dumps({"EU": {"url": "https://eu/", "user": "u", "api_token": "t"}}))
    assert cli.main(["dispatch"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "bad controller name 'EU'" in err


def test_a_controller_may_have_its_own_webhook_secret_never_shown():
    settings = _load({"eu": {"url": "https://eu/", "user": "u", "api_token": "t", "webhook_secret": "eu-hook"}},
                     WEBHOOK_SECRET="shared-hook")
    by_name = settings.controllers_by_name()
    assert (by_name["eu"].webhook_secret, by_name["default"].webhook_secret) == ("eu-hook", None)
    assert "eu-hook" not in repr(settings)
    assert sorted(settings.webhook_secrets()) == ["eu-hook", "shared-hook"]


@pytest.mark.parametrize("secret, line", [
    ("", "webhook_secret must be a non-empty string"),
    (7, "webhook_secret must be a non-empty string"),
    ("shared-hook", "webhook_secret must differ from WEBHOOK_SECRET"),
])
def test_a_bad_webhook_secret_is_refused_naming_the_controller_never_the_secret(secret, line):
    with pytest.raises(ConfigError) as refused:
        _load({"eu": {"url": "https://eu/", "user": "u", "api_token": "t", "webhook_secret": secret}},
              WEBHOOK_SECRET="shared-hook")
    [message] = str(refused.value).splitlines()
    assert line in message and "JENKINS_CONTROLLERS['eu']" in message and "shared-hook" not in message.replace(
        "must differ from WEBHOOK_SECRET", "")


def test_two_controllers_may_not_share_a_webhook_secret():
    with pytest.raises(ConfigError, match="'eu' and 'us' have the same webhook_secret"):
        _load({"eu": {"url": "https://eu/", "user": "u", "api_token": "t", "webhook_secret": "same"},
               "us": {"url": "https://us/", "user": "u", "api_token": "t", "webhook_secret": "same"}},
              WEBHOOK_SECRET="shared-hook")


@pytest.mark.parametrize(("configured", "row_controllers", "told_apart"), [
    (["default"], ["default", None], False),  # one controller: its name would be noise
    ([], ["default"], False),  # only the database configured (`ls` from a laptop): the default's rows
    ([], ["eu"], True),  # ... and a row of another
    (["default", "eu"], [], True),  # two configured: the column is there even for one controller's rows
    (["default", "eu"], ["default"], True),
    (["default"], ["default", "retired"], True),  # a removed controller's row is not taken for the default's
    (["eu"], ["eu", None], True),  # a row without the column is the default's, which is not configured
])
def test_a_list_names_each_rows_controller_when_several_may_be_listed(configured, row_controllers, told_apart) -> None:
    rows = [{"id": n} if c is None else {"id": n, "controller": c} for n, c in enumerate(row_controllers)]
    assert controllers_told_apart(configured, rows) is told_apart
