"""config.load_settings: settings read from Secrets Manager by ARN (moto), cached; overrides; IAM auth."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.config import load_settings, load_ui_identity, parse_database_url
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
    from jenkins_dispatch.store import endpoint

    settings = load_settings(
        {"DB_IAM_AUTH": "true", "DB_HOST": "proxy.example.internal", "DB_USER": "dispatch", "DB_NAME": "jobs",
         "AWS_REGION": "us-east-1"}
    ).database
    assert settings.iam_auth and settings.password is None and settings.tls == "verify"
    token = endpoint.iam_token(settings)
    assert token.startswith("proxy.example.internal:5432/?Action=connect") and "DBUser=dispatch" in token
    with pytest.raises(ConfigError, match="DB_USER"):
        load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h"})


@pytest.mark.parametrize(("url", "expected"), [
    ("mysql://app:pw@127.0.0.1/jobs", dict(engine="mysql", port=3306, user="app", dbname="jobs", tls="disable")),
    ("mariadb://app@db.example.com:3307/jobs", dict(engine="mysql", port=3307, tls="verify")),
    ("mysql://app@db.example.com/jobs?ssl-mode=DISABLED", dict(tls="disable")),
    ("mysql://app@localhost/jobs?ssl_mode=VERIFY_IDENTITY&ssl_ca=/ca.pem", dict(tls="verify", ca_bundle="/ca.pem")),
    ("mysql://app@localhost/jobs?unix_socket=/run/mysqld/mysqld.sock", dict(unix_socket="/run/mysqld/mysqld.sock")),
    ("postgresql://u@127.0.0.1/db", dict(engine="postgresql", port=5432)),
])
def test_a_mysql_or_mariadb_url_selects_the_mysql_dialect(url, expected) -> None:
    settings = parse_database_url(url)
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://app@db.example.com/", "names no database"),
    ("mysql://app@db.example.com/jobs?ssl-mode=SOMETIMES", "unknown ssl-mode"),
    ("oracle://app@db.example.com/jobs", "postgresql://, mysql:// or mariadb://"),
])
def test_a_bad_mysql_url_is_refused_in_one_line(url, message) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_database_url(url)
    assert "\n" not in str(caught.value)


def test_the_engine_comes_from_db_engine_or_the_secret_with_its_default_port(aws) -> None:
    settings = load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h", "DB_USER": "u", "DB_NAME": "jobs",
                              "DB_ENGINE": "mysql"}).database
    assert (settings.engine, settings.port, settings.tls) == ("mysql", 3306, "verify")
    with pytest.raises(ConfigError, match="DB_ENGINE names an unknown database engine 'oracle'"):
        load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h", "DB_USER": "u", "DB_ENGINE": "oracle"})
    with pytest.raises(ConfigError, match="DB_NAME"):  # MySQL has no default database
        load_settings({"DB_IAM_AUTH": "true", "DB_HOST": "h", "DB_USER": "u", "DB_ENGINE": "mariadb"})


def test_db_engine_and_the_secrets_engine_must_agree(aws) -> None:
    # The template always sets DB_ENGINE (postgresql by default): a MySQL secret deployed without
    # DatabaseEngine=mysql would otherwise be spoken to in PostgreSQL's protocol and fail obscurely.
    arn = aws.create_secret(Name="jd/mysql", SecretString=json.dumps(
        {"engine": "mysql", "host": "h", "username": "u", "password": "db-Pa55word!", "dbname": "jobs"}))["ARN"]
    with pytest.raises(ConfigError) as caught:
        load_settings({"DB_SECRET_ARN": arn, "DB_ENGINE": "postgresql"})
    message = str(caught.value)
    assert "DB_ENGINE" in message and "'mysql'" in message and "\n" not in message
    assert "Pa55word" not in message
    # Spelled differently but the same engine: fine.
    assert load_settings({"DB_SECRET_ARN": arn, "DB_ENGINE": "mariadb"}).database.engine == "mysql"
    assert load_settings({"DB_SECRET_ARN": arn}).database.engine == "mysql"


def test_ui_token_from_its_variable_or_its_secret_never_in_repr(aws):
    plain = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", "UI_TOKEN": "page-token-1"})
    assert plain.ui_token == "page-token-1" and "page-token-1" not in repr(plain)
    arn = aws.create_secret(Name="jd/ui", SecretString=json.dumps({"token": "page-token-2"}))["ARN"]
    from_secret = load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", "UI_TOKEN_SECRET_ARN": arn})
    assert from_secret.ui_token == "page-token-2" and "page-token-2" not in repr(from_secret)
    assert load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db"}).ui_token is None
    with pytest.raises(ConfigError, match="UI_TOKEN_SECRET_ARN"):
        load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db",
                       "UI_TOKEN_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:jd/none-AbCdEf"})


def test_the_cutover_window_is_read_with_its_default_and_refused_in_one_line_when_bad() -> None:
    base = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}
    assert load_settings(base).cutover_window_seconds == 3600.0
    assert load_settings({**base, "CUTOVER_WINDOW_SECONDS": "90"}).cutover_window_seconds == 90.0
    for bad in ("-1", "an hour", "nan"):
        with pytest.raises(ConfigError, match="CUTOVER_WINDOW_SECONDS") as caught:
            load_settings({**base, "CUTOVER_WINDOW_SECONDS": bad})
        assert "\n" not in str(caught.value)


def test_a_login_proxy_header_with_the_proxies_it_is_believed_from():
    identity = load_ui_identity({"UI_TRUSTED_USER_HEADER": "X-Forwarded-User",
                                 "UI_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/24,::1"})
    assert identity.header == "x-forwarded-user"
    assert [str(n) for n in identity.proxies] == ["127.0.0.1/32", "10.0.0.0/24", "::1/128"]
    assert load_ui_identity({}).header is None


@pytest.mark.parametrize(("env", "lines"), [
    ({"UI_TRUSTED_USER_HEADER": "X-User"}, ["UI_TRUSTED_PROXIES is required with UI_TRUSTED_USER_HEADER"]),
    ({"UI_TRUSTED_PROXIES": "10.0.0.1"}, ["UI_TRUSTED_USER_HEADER is required with UI_TRUSTED_PROXIES"]),
    ({"UI_TRUSTED_USER_HEADER": "X User", "UI_TRUSTED_PROXIES": "nope,10.0.0.0/99"},
     ["UI_TRUSTED_USER_HEADER must be an HTTP header name", "UI_TRUSTED_PROXIES: 'nope'",
      "UI_TRUSTED_PROXIES: '10.0.0.0/99'"]),
])
def test_login_proxy_settings_refused_one_line_per_problem(env, lines):
    with pytest.raises(ConfigError) as refused:
        load_settings({"DATABASE_URL": "postgresql://u@127.0.0.1/db", **env})
    said = str(refused.value).splitlines()
    assert len(said) == len(lines) and all(s.startswith(line) for s, line in zip(said, lines, strict=True))
