"""config.load_settings: settings read from Secrets Manager by ARN (moto), cached; overrides; IAM auth."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.config import load_settings
from jenkins_dispatch.errors import ConfigError

from .aws_secrets import DB_SECRET, JENKINS_SECRET, WEBHOOK_TOKEN, create_secrets


def test_settings_read_by_arn_and_cached(aws, secret_calls):
    arns = create_secrets(aws)
    env = {**arns, "LEASE_SECONDS": "120"}
    settings = load_settings(env)
    db = settings.database
    assert (db.host, db.port, db.user, db.password, db.dbname) == (
        DB_SECRET["host"], 5432, "dispatch", DB_SECRET["password"], "jobs"
    )
    assert db.tls == "verify" and db.secret_arn == arns["DB_SECRET_ARN"] and not db.iam_auth
    jenkins = settings.require_jenkins()
    assert (jenkins.url, jenkins.user, jenkins.api_token) == (
        "https://ci.example.com/jenkins/", "dispatcher", "jenkins-T0ken"
    )
    assert settings.require_webhook_secret() == WEBHOOK_TOKEN
    assert sorted(secret_calls) == sorted(arns.values())

    # A warm Lambda's later invocations (settings read again) are served from the cache.
    for _ in range(3):
        load_settings(env)
    assert len(secret_calls) == 3

    # No secret value leaks through repr (logs print settings objects).
    text = repr(settings)
    for value in (DB_SECRET["password"], JENKINS_SECRET["api_token"], WEBHOOK_TOKEN):
        assert value not in text


def test_json_webhook_secret_with_token_field(aws):
    arn = aws.create_secret(Name="jd/hook-json", SecretString=json.dumps({"token": "from-json"}))["ARN"]
    settings = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", "WEBHOOK_SECRET_ARN": arn})
    assert settings.webhook_secret == "from-json"


@pytest.mark.parametrize("name", ["DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN"])
def test_missing_secret_error_names_the_variable(aws, name):
    arns = create_secrets(aws)
    arns[name] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jd/absent-AbCdEf"
    with pytest.raises(ConfigError) as info:
        load_settings(arns)
    message = str(info.value)
    assert name in message and "jd/absent" in message
    assert "\n" not in message


def test_malformed_db_secret_error_names_the_variable_not_the_value(aws):
    arn = aws.create_secret(Name="jd/bad", SecretString="password=hunter2")["ARN"]
    with pytest.raises(ConfigError) as info:
        load_settings({"DB_SECRET_ARN": arn})
    assert "DB_SECRET_ARN" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_db_secret_without_password_is_refused(aws):
    arn = aws.create_secret(Name="jd/nopw", SecretString=json.dumps({"host": "h", "username": "u"}))["ARN"]
    with pytest.raises(ConfigError, match="DB_SECRET_ARN"):
        load_settings({"DB_SECRET_ARN": arn})


def test_template_style_overrides_win_over_the_secret(aws):
    """The template sets DB_HOST (e.g. an RDS Proxy endpoint) next to DB_SECRET_ARN."""
    arn = create_secrets(aws)["DB_SECRET_ARN"]
    settings = load_settings(
        {"DB_SECRET_ARN": arn, "DB_HOST": "proxy.proxy-abc.us-east-1.rds.amazonaws.com", "DB_PORT": "5432",
         "DB_NAME": "", "DB_USER": "", "DB_IAM_AUTH": "false"}
    )
    assert settings.database.host == "proxy.proxy-abc.us-east-1.rds.amazonaws.com"
    assert settings.database.dbname == "jobs" and settings.database.user == "dispatch"


def test_iam_auth_uses_a_generated_token_not_a_secret(aws, monkeypatch):
    from jenkins_dispatch.store import db as db_module

    settings = load_settings(
        {"DB_IAM_AUTH": "true", "DB_HOST": "proxy.example.internal", "DB_USER": "dispatch", "DB_NAME": "jobs",
         "AWS_REGION": "us-east-1"}
    ).database
    assert settings.iam_auth and settings.password is None and settings.tls == "verify"
    token = db_module._iam_token(settings)
    assert token.startswith("proxy.example.internal:5432/?Action=connect") and "DBUser=dispatch" in token
    with pytest.raises(ConfigError, match="DB_USER"):
        load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h"})
