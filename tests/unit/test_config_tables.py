"""The database and controller settings, case by case: each way DB_* and a secret combine, each problem of a
JENKINS_CONTROLLERS entry, in the order they are reported. Pure: secrets come from a dict, not Secrets Manager."""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.config import load_settings, parse_database_url
from jenkins_dispatch.errors import ConfigError

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jd/db-AbCdEf"
FULL_SECRET = {"host": "db.example.com", "username": "app", "password": "pw-S3cret", "dbname": "jobs"}


def _database(env: dict[str, str], secret: dict | None = None):
    """The database settings ``env`` gives, the secret named by DB_SECRET_ARN being ``secret``."""
    if secret is not None:
        env = {"DB_SECRET_ARN": SECRET_ARN, **env}
    return load_settings(env, fetch_secret=lambda arn: json.dumps(secret)).database


@pytest.mark.parametrize(("env", "secret", "expected"), [
    ({}, FULL_SECRET, dict(engine="postgresql", host="db.example.com", port=5432, user="app", password="pw-S3cret",
                           dbname="jobs", tls="verify", iam_auth=False, secret_arn=SECRET_ARN, region=None)),
    # DB_HOST, DB_USER, DB_NAME and DB_PORT win over the secret's; the password only ever comes from it.
    ({"DB_HOST": "proxy", "DB_USER": "other", "DB_NAME": "db2", "DB_PORT": "6543"}, FULL_SECRET,
     dict(host="proxy", user="other", dbname="db2", port=6543, password="pw-S3cret")),
    ({}, {**FULL_SECRET, "port": "5433"}, dict(port=5433)),
    ({}, {**FULL_SECRET, "engine": "aurora-mysql"}, dict(engine="mysql", port=3306)),
    ({}, {**FULL_SECRET, "engine": "mysql", "port": 3310}, dict(engine="mysql", port=3310)),
    ({"DB_ENGINE": "mariadb"}, FULL_SECRET, dict(engine="mysql", port=3306)),
    ({}, {key: value for key, value in FULL_SECRET.items() if key != "dbname"}, dict(dbname="postgres")),
    # IAM authentication alone: no secret, no password, the token's region.
    ({"DB_IAM_AUTH": "true", "DB_HOST": "h", "DB_USER": "u", "AWS_REGION": "eu-west-1",
      "AWS_DEFAULT_REGION": "us-east-1"}, None,
     dict(host="h", user="u", password=None, iam_auth=True, secret_arn=None, region="eu-west-1", dbname="postgres")),
    ({"DB_IAM_AUTH": "true", "DB_HOST": "h", "DB_USER": "u", "AWS_DEFAULT_REGION": "us-east-1"}, None,
     dict(region="us-east-1")),
    # IAM authentication beside a secret: the secret's password is not used.
    ({"DB_IAM_AUTH": "true"}, {key: value for key, value in FULL_SECRET.items() if key != "password"},
     dict(password=None, iam_auth=True, host="db.example.com")),
    ({"DB_CA_BUNDLE": "/etc/ca.pem"}, FULL_SECRET, dict(ca_bundle="/etc/ca.pem")),
    ({"DB_STATEMENT_TIMEOUT_MS": "2000", "DB_CONNECT_TIMEOUT_SECONDS": "1.5"}, FULL_SECRET,
     dict(statement_timeout_ms=2000, connect_timeout_seconds=1.5)),
])
def test_the_database_from_a_secret_and_the_db_variables(env, secret, expected) -> None:
    settings = _database(env, secret)
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize(("env", "secret", "message"), [
    ({}, None, "no database configured: set DATABASE_URL (or DB_SECRET_ARN on AWS)"),
    ({"DB_IAM_AUTH": "true", "DB_USER": "u"}, None, "no database host: set DB_HOST"),
    ({"DB_IAM_AUTH": "true", "DB_HOST": "h"}, None, "no database user: set DB_USER"),
    ({}, {"host": "h", "password": "p"}, "no database user: set DB_USER"),
    ({}, {"username": "u", "password": "p"}, "no database host: set DB_HOST"),
    ({}, {"host": "h", "username": "u"}, "has no 'password' (or set DB_IAM_AUTH=true)"),
    ({}, {**FULL_SECRET, "engine": "oracle"}, "the secret named by DB_SECRET_ARN ('engine') names an unknown"),
    ({"DB_ENGINE": "mysql"}, {**FULL_SECRET, "engine": "postgres"}, "DB_ENGINE is mysql but the secret"),
    ({"DB_ENGINE": "mysql"}, {key: value for key, value in FULL_SECRET.items() if key != "dbname"},
     "no database name: set DB_NAME"),
    ({}, {**FULL_SECRET, "port": "five"}, "has a 'port' that is not a whole number from 1 to 65535"),
    ({}, {**FULL_SECRET, "port": 70000}, "has a 'port' that is not a whole number from 1 to 65535"),
    ({"DB_PORT": "0"}, FULL_SECRET, "DB_PORT must be a whole number from 1 to 65535"),
    # Checked in this order: the name before the port.
    ({"DB_ENGINE": "mysql"}, {"host": "h", "username": "u", "password": "p", "port": "x"}, "no database name"),
])
def test_a_database_that_cannot_be_reached_is_refused_naming_what_to_set(env, secret, message) -> None:
    with pytest.raises(ConfigError) as refused:
        _database(env, secret)
    said = str(refused.value)
    assert said.startswith(message) or message in said, said
    assert "\n" not in said and "pw-S3cret" not in said


@pytest.mark.parametrize(("env", "expected"), [
    ({"DATABASE_URL": "postgresql://u@db.example.com/jobs?sslrootcert=/url-ca.pem"},
     dict(tls="verify", ca_bundle="/url-ca.pem")),
    ({"DATABASE_URL": "postgresql://u@db.example.com/jobs?sslrootcert=/url-ca.pem", "DB_CA_BUNDLE": "/ca.pem"},
     dict(ca_bundle="/ca.pem")),
    # DATABASE_URL wins over a secret, which is then not even read.
    ({"DATABASE_URL": "postgresql://u@127.0.0.1/jobs", "DB_SECRET_ARN": SECRET_ARN, "DB_STATEMENT_TIMEOUT_MS": "900"},
     dict(host="127.0.0.1", secret_arn=None, statement_timeout_ms=900)),
])
def test_database_url_with_the_db_variables(env, expected) -> None:
    settings = load_settings(env, fetch_secret=lambda arn: pytest.fail("no secret is read")).database
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u@127.0.0.1/db", dict(tls="disable", unix_socket=None)),
    ("postgresql://u@db.example.com/db", dict(tls="verify")),
    ("postgresql://u@db.example.com/db?sslmode=require", dict(tls="verify")),
    ("postgresql://u@db.example.com/db?sslmode=prefer", dict(tls="disable")),
    ("postgresql:///db?host=/run/postgresql", dict(unix_socket="/run/postgresql/.s.PGSQL.5432", tls="disable",
                                                   host="localhost")),
    ("postgresql://:5433/db?host=/run/postgresql", dict(unix_socket="/run/postgresql/.s.PGSQL.5433", port=5433)),
    ("postgresql:///db?host=/tmp/.s.PGSQL.5432", dict(unix_socket="/tmp/.s.PGSQL.5432")),
    ("postgres://a%40b:p%2Fw@h:6000/my%20db", dict(user="a@b", password="p/w", port=6000, dbname="my db")),
    ("mysql://app@db.example.com/jobs?sslmode=require", dict(tls="verify")),
    ("mysql://app@db.example.com/jobs?ssl-mode=PREFERRED", dict(tls="disable")),
    ("mysql://app@127.0.0.1/jobs", dict(tls="disable", user="app")),
    ("mysql://127.0.0.1/jobs", dict(user="root")),
])
def test_database_urls(url, expected) -> None:
    settings = parse_database_url(url)
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://u@db.example.com/db?sslmode=sometimes", "DATABASE_URL has an unknown sslmode 'sometimes'"),
    ("postgresql://u@h:port/db", "DATABASE_URL is not a valid URL"),
    ("mysql://app@h/jobs?sslmode=maybe", "DATABASE_URL has an unknown ssl-mode 'maybe'"),
])
def test_bad_database_urls(url, message) -> None:
    with pytest.raises(ConfigError, match="^" + message):
        parse_database_url(url)


BASE = {"DATABASE_URL": "postgresql://u@127.0.0.1/db"}
EU = {"url": "https://eu.example.com/", "user": "u", "api_token": "t"}


def _controllers(controllers: object):
    return load_settings({**BASE, "JENKINS_CONTROLLERS": json.dumps(controllers)}).controllers


@pytest.mark.parametrize(("entry", "expected"), [
    (EU, dict(url="https://eu.example.com/", max_in_flight=None, webhook_secret=None)),
    ({**EU, "url": " https://eu.example.com/ci ", "user": " u "}, dict(url="https://eu.example.com/ci/", user="u")),
    ({**EU, "max_in_flight": 10_000_000}, dict(max_in_flight=10_000_000)),
    ({**EU, "webhook_secret": "  own-hook  "}, dict(webhook_secret="own-hook")),
])
def test_a_controller_entry(entry, expected) -> None:
    [controller] = _controllers({"eu": entry})
    assert {key: getattr(controller, key) for key in expected} == expected


@pytest.mark.parametrize(("entry", "lines"), [
    ("https://eu.example.com/", ["JENKINS_CONTROLLERS['eu'] must be a JSON object with url, user and api_token"]),
    ({**EU, "token": "t", "cap": 1}, ["JENKINS_CONTROLLERS['eu'] has unknown keys ['cap', 'token']: use url, user, "
                                      "api_token, max_in_flight, webhook_secret"]),
    ({**EU, "url": 5}, ["JENKINS_CONTROLLERS['eu']: url must be a string", "JENKINS_CONTROLLERS['eu'] has no url"]),
    ({"url": " ", "user": "", "api_token": None},
     ["JENKINS_CONTROLLERS['eu'] has no url", "JENKINS_CONTROLLERS['eu'] has no user",
      "JENKINS_CONTROLLERS['eu'] has no api_token"]),
    ({**EU, "url": "ftp://eu.example.com/"}, ["JENKINS_CONTROLLERS['eu']'s url must be an http(s) URL"]),
    ({**EU, "max_in_flight": True}, ["JENKINS_CONTROLLERS['eu']: max_in_flight must be a whole number from 1 to "
                                     "10000000"]),
    ({**EU, "max_in_flight": "5"}, ["JENKINS_CONTROLLERS['eu']: max_in_flight must be a whole number"]),
    ({**EU, "max_in_flight": 10_000_001}, ["JENKINS_CONTROLLERS['eu']: max_in_flight must be a whole number"]),
    ({**EU, "webhook_secret": " "}, ["JENKINS_CONTROLLERS['eu']: webhook_secret must be a non-empty string"]),
    ({**EU, "webhook_secret": None}, ["JENKINS_CONTROLLERS['eu']: webhook_secret must be a non-empty string"]),
    # Every problem of one entry, in this order: keys, types, missing values, the url, the cap, the secret.
    ({"url": 5, "user": "u", "api_token": "t", "max_in_flight": 0, "webhook_secret": 1, "extra": 1},
     ["JENKINS_CONTROLLERS['eu'] has unknown keys ['extra']", "JENKINS_CONTROLLERS['eu']: url must be a string",
      "JENKINS_CONTROLLERS['eu'] has no url", "JENKINS_CONTROLLERS['eu']: max_in_flight must be",
      "JENKINS_CONTROLLERS['eu']: webhook_secret must be"]),
])
def test_each_problem_of_a_controller_entry_in_order(entry, lines) -> None:
    with pytest.raises(ConfigError) as refused:
        _controllers({"eu": entry})
    said = str(refused.value).splitlines()
    assert len(said) == len(lines) and all(s.startswith(line) for s, line in zip(said, lines, strict=True)), said


@pytest.mark.parametrize("controllers", [[], {}, "eu", [EU]])
def test_jenkins_controllers_must_be_a_non_empty_object(controllers) -> None:
    with pytest.raises(ConfigError, match=r"^JENKINS_CONTROLLERS must be a non-empty JSON object"):
        _controllers(controllers)


def test_controllers_from_their_secret_name_the_secret_when_refused() -> None:
    env = {**BASE, "JENKINS_CONTROLLERS_SECRET_ARN": "arn:x"}
    with pytest.raises(ConfigError, match=r"^the secret named by JENKINS_CONTROLLERS_SECRET_ARN must be a non-empty"):
        load_settings(env, fetch_secret=lambda arn: "{}")
    # The variable wins over the secret, which is then not read.
    settings = load_settings({**env, "JENKINS_CONTROLLERS": json.dumps({"eu": EU})},
                             fetch_secret=lambda arn: pytest.fail("no secret is read"))
    assert [c.name for c in settings.controllers] == ["eu"]


def test_two_spellings_of_one_jenkins_are_one_controller() -> None:
    with pytest.raises(ConfigError) as refused:
        _controllers({"eu": EU, "eu2": {**EU, "url": "HTTPS://EU.example.com"}, "us": {**EU, "url": "https://us/"}})
    assert str(refused.value).splitlines() == [
        "JENKINS_CONTROLLERS: controllers 'eu' and 'eu2' have the same url: each Jenkins is one controller"]


JENKINS_SECRET = {"url": "https://ci.example.com/jenkins", "user": "bot", "api_token": "tok-S3cret"}


def _jenkins(env: dict[str, str], secret: dict | None = None):
    """The default controller ``env`` gives, the secret named by JENKINS_SECRET_ARN being ``secret``."""
    if secret is not None:
        env = {"JENKINS_SECRET_ARN": "arn:jenkins", **env}
    return load_settings({**BASE, **env}, fetch_secret=lambda arn: json.dumps(secret)).jenkins


@pytest.mark.parametrize(("env", "secret", "expected"), [
    ({}, JENKINS_SECRET, dict(url="https://ci.example.com/jenkins/", user="bot", api_token="tok-S3cret")),
    ({"JENKINS_USER": "other", "JENKINS_VERIFY_TLS": "false", "JENKINS_SEARCH_WINDOW": "50"}, JENKINS_SECRET,
     dict(user="other", api_token="tok-S3cret", verify_tls=False, search_window=50, name="default")),
    ({"JENKINS_URL": "http://127.0.0.1:8080", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t",
      "JENKINS_TIMEOUT_SECONDS": "3"}, None, dict(url="http://127.0.0.1:8080/", timeout_seconds=3.0)),
])
def test_the_default_controller_from_its_variables_or_its_secret(env, secret, expected) -> None:
    jenkins = _jenkins(env, secret)
    assert {key: getattr(jenkins, key) for key in expected} == expected


def test_no_jenkins_variable_no_default_controller() -> None:
    assert _jenkins({}) is None and _jenkins({"JENKINS_VERIFY_TLS": "false"}) is None


@pytest.mark.parametrize(("env", "secret", "message"), [
    ({"JENKINS_USER": "u"}, None, "JENKINS_URL is not set (nor 'url' in the secret named by JENKINS_SECRET_ARN)"),
    ({}, {"user": "u", "api_token": "t"}, "JENKINS_URL is not set"),
    ({"JENKINS_URL": "https://u:tok-S3cret@ci/"}, None, "JENKINS_URL must not carry credentials: use JENKINS_USER"),
    ({"JENKINS_URL": "ftp://ci.example.com/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}, None,
     "JENKINS_URL must be an http(s) URL"),
    ({"JENKINS_URL": "https://[ci/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}, None,
     "JENKINS_URL must be an http(s) URL"),
    ({"JENKINS_URL": "https://ci/", "JENKINS_API_TOKEN": "t"}, None, "JENKINS_USER is not set"),
    ({}, {"url": "https://ci/", "user": "u"}, "JENKINS_API_TOKEN is not set (nor 'api_token' in the secret"),
    # Checked in this order: the url before the user before the token.
    ({"JENKINS_URL": "ftp://ci/"}, None, "JENKINS_URL must be an http(s) URL"),
    ({"JENKINS_URL": "https://ci/", "JENKINS_API_TOKEN": ""}, {"api_token": ""}, "JENKINS_USER is not set"),
])
def test_a_default_controller_that_cannot_be_reached_is_refused(env, secret, message) -> None:
    with pytest.raises(ConfigError) as refused:
        _jenkins(env, secret)
    said = str(refused.value)
    assert said.startswith(message) and "\n" not in said and "tok-S3cret" not in said, said


@pytest.mark.parametrize(("env", "header", "proxies"), [
    ({}, None, []),
    ({"UI_TRUSTED_USER_HEADER": "X-Remote-User", "UI_TRUSTED_PROXIES": " , 10.0.0.7,, fd00::/8 "},
     "x-remote-user", ["10.0.0.7/32", "fd00::/8"]),
    ({"UI_TRUSTED_USER_HEADER": "X-User", "UI_TRUSTED_PROXIES": "10.0.0.9/24"}, "x-user", ["10.0.0.0/24"]),
])
def test_a_login_proxy(env, header, proxies) -> None:
    identity = load_settings({**BASE, **env}).ui_identity
    assert (identity.header, [str(p) for p in identity.proxies]) == (header, proxies)


@pytest.mark.parametrize(("env", "lines"), [
    # A bad header alone: the missing proxies are not asked for on top.
    ({"UI_TRUSTED_USER_HEADER": "X User"}, ["UI_TRUSTED_USER_HEADER must be an HTTP header name"]),
    ({"UI_TRUSTED_USER_HEADER": "X-User", "UI_TRUSTED_PROXIES": " , "},
     ["UI_TRUSTED_PROXIES is required with UI_TRUSTED_USER_HEADER"]),
    ({"UI_TRUSTED_USER_HEADER": "X-User", "UI_TRUSTED_PROXIES": "proxy.local"},
     ["UI_TRUSTED_PROXIES: 'proxy.local' is not an address or CIDR"]),
    ({"UI_TRUSTED_PROXIES": "nope"}, ["UI_TRUSTED_PROXIES: 'nope' is not an address or CIDR"]),
    ({"UI_TRUSTED_PROXIES": "nope, 10.0.0.1"}, ["UI_TRUSTED_PROXIES: 'nope' is not an address or CIDR",
                                               "UI_TRUSTED_USER_HEADER is required with UI_TRUSTED_PROXIES"]),
])
def test_a_login_proxy_refused_one_line_per_problem(env, lines) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({**BASE, **env})
    said = str(refused.value).splitlines()
    assert len(said) == len(lines) and all(s.startswith(line) for s, line in zip(said, lines, strict=True)), said
