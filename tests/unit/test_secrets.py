"""secrets.fetch_secret_string and runtime.settings: each secret read once per process, re-read on demand."""

from __future__ import annotations

import json

from jenkins_dispatch import runtime

from .aws_secrets import DB_SECRET, create_secrets


def test_runtime_settings_read_secrets_once(aws, secret_calls, monkeypatch):
    arns = create_secrets(aws)
    for name, arn in arns.items():
        monkeypatch.setenv(name, arn)
    for name in ("DATABASE_URL", "JENKINS_URL", "JENKINS_USER", "JENKINS_API_TOKEN", "WEBHOOK_SECRET"):
        monkeypatch.delenv(name, raising=False)
    runtime.reset()
    first = runtime.settings()
    assert runtime.settings() is first
    assert len(secret_calls) == 3


def test_forced_refresh_rereads_a_rotated_secret(aws, secret_calls):
    from jenkins_dispatch.secrets import fetch_secret_string

    arn = create_secrets(aws)["DB_SECRET_ARN"]
    assert json.loads(fetch_secret_string(arn))["password"] == DB_SECRET["password"]
    aws.put_secret_value(SecretId=arn, SecretString=json.dumps({**DB_SECRET, "password": "rotated"}))
    assert json.loads(fetch_secret_string(arn))["password"] == DB_SECRET["password"]  # cached
    assert json.loads(fetch_secret_string(arn, force=True))["password"] == "rotated"
    assert len(secret_calls) == 2
