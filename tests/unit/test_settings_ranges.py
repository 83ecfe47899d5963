"""Every numeric setting is finite and within its range, each base at most its maximum, a malformed JENKINS_URL is
refused: one ConfigError naming the variable, one line, for every bad value of every numeric variable.

Issue 21 #7: RETRY_BASE_SECONDS=inf was accepted (the pass then failed with "interval out of range" and the row
stayed processing until its lease ran out); JENKINS_URL='http://[::1' raised ValueError (a traceback).
"""

from __future__ import annotations

import math

import pytest

from jenkins_dispatch.config import ENVIRONMENT, VARIABLES, load_settings
from jenkins_dispatch.errors import ConfigError

BASE_ENV = {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "http://j/", "JENKINS_USER": "u",
            "JENKINS_API_TOKEN": "t"}
# DB_PORT is read only beside DB_SECRET_ARN / DB_IAM_AUTH: an IAM-authenticated database needs no secret.
IAM_ENV = {"DB_IAM_AUTH": "true", "DB_HOST": "db.example", "DB_USER": "dispatch"}

# Every numeric variable, with its range: the lowest and highest value accepted.
RANGES = {
    "DB_PORT": (1, 65535),
    "DB_CONNECT_TIMEOUT_SECONDS": (0.1, 300),
    "DB_STATEMENT_TIMEOUT_MS": (100, 86_400_000),
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": (100, 86_400_000),
    "DB_STALL_SECONDS": (1, 3600),
    "POLL_SECONDS": (0.01, 60),
    "JENKINS_TIMEOUT_SECONDS": (0.1, 3600),
    "JENKINS_SEARCH_WINDOW": (1, 5000),
    "JENKINS_BREAKER_FAILURES": (1, 1000),
    "JENKINS_RETRY_BASE_SECONDS": (0.1, 3600),
    "JENKINS_RETRY_MAX_SECONDS": (0.1, 3600),
    "BATCH_SIZE": (1, 10_000),
    "MAX_PARALLEL_TRIGGERS": (1, 512),
    "MAX_IN_FLIGHT": (1, 10_000_000),
    "LEASE_SECONDS": (2, 604_800),
    "RETRY_BASE_SECONDS": (0, 604_800),
    "RETRY_MAX_SECONDS": (0, 604_800),
    "TIME_MARGIN_SECONDS": (0, 900),
    "WEBHOOK_DB_POOL_SIZE": (1, 1000),
    "HTTP_IDLE_TIMEOUT_SECONDS": (1, 3600),
    "MAX_RESENDS": (0, 100),
    "RESEND_QUIET_SECONDS": (0, 2_592_000),
    "CUTOVER_WINDOW_SECONDS": (0, 2_592_000),
}
WHOLE = {"DB_PORT", "DB_STATEMENT_TIMEOUT_MS", "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "JENKINS_SEARCH_WINDOW",
         "JENKINS_BREAKER_FAILURES", "BATCH_SIZE", "MAX_PARALLEL_TRIGGERS", "MAX_IN_FLIGHT", "LEASE_SECONDS",
         "WEBHOOK_DB_POOL_SIZE", "HTTP_IDLE_TIMEOUT_SECONDS", "MAX_RESENDS"}
# Settings another one must fit around: LEASE_SECONDS holds a trigger (JENKINS_TIMEOUT_SECONDS + 1 s), a base is at
# most its maximum.
COMPANIONS = {"JENKINS_TIMEOUT_SECONDS": {"LEASE_SECONDS": "604800"}, "LEASE_SECONDS": {"JENKINS_TIMEOUT_SECONDS": "1"},
              "RETRY_BASE_SECONDS": {"RETRY_MAX_SECONDS": "604800"}, "RETRY_MAX_SECONDS": {"RETRY_BASE_SECONDS": "0"},
              "JENKINS_RETRY_BASE_SECONDS": {"JENKINS_RETRY_MAX_SECONDS": "3600"},
              "JENKINS_RETRY_MAX_SECONDS": {"JENKINS_RETRY_BASE_SECONDS": "0.1"}}


def _env(name: str, value: str) -> dict[str, str]:
    env = {**BASE_ENV, **COMPANIONS.get(name, {}), name: value}
    if name == "DB_PORT":
        env.pop("DATABASE_URL")
        env.update(IAM_ENV)
    return env


def _refused(env: dict[str, str], name: str) -> str:
    with pytest.raises(ConfigError) as refused:
        load_settings(env)
    message = str(refused.value)
    assert name in message and "\n" not in message, message
    return message


def _bad_values(name: str) -> list[str]:
    low, high = RANGES[name]
    values = ["inf", "-inf", "Infinity", "nan", "1e400", "-1", "twelve", str(high * 10 + 1)]
    if low > 0:
        values.append("0" if name in WHOLE or low >= 1 else str(low / 2))
    if name in WHOLE:
        values.append("2.5")
    return values


def test_every_numeric_variable_has_a_range_here():
    """A numeric variable added to config.ENVIRONMENT without a row above would escape these tests."""
    numeric = {v.name for v in ENVIRONMENT
               if (isinstance(v.default, int | float) and not isinstance(v.default, bool)) or v.name in RANGES}
    numeric |= {"MAX_IN_FLIGHT", "RESEND_QUIET_SECONDS"}  # no default, or a derived one
    assert numeric == set(RANGES)
    assert set(RANGES) <= set(VARIABLES)


@pytest.mark.parametrize(("name", "value"), [(name, value) for name in RANGES for value in _bad_values(name)])
def test_a_bad_numeric_value_is_refused_naming_the_variable(name, value):
    _refused(_env(name, value), name)


@pytest.mark.parametrize("name", list(RANGES))
def test_both_ends_of_each_range_are_accepted(name):
    low, high = RANGES[name]
    for value in (low, high):
        text = str(int(value)) if name in WHOLE or float(value).is_integer() else str(value)
        settings = load_settings(_env(name, text))
        assert all(math.isfinite(v) for v in vars(settings).values()
                   if isinstance(v, int | float) and not isinstance(v, bool))


@pytest.mark.parametrize(("base", "maximum", "env"), [
    ("RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", {"RETRY_BASE_SECONDS": "60", "RETRY_MAX_SECONDS": "30"}),
    ("RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", {"RETRY_BASE_SECONDS": "1000"}),  # over the default maximum, 900
    ("RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", {"RETRY_MAX_SECONDS": "0"}),  # under the default base, 30
    ("JENKINS_RETRY_BASE_SECONDS", "JENKINS_RETRY_MAX_SECONDS",
     {"JENKINS_RETRY_BASE_SECONDS": "20", "JENKINS_RETRY_MAX_SECONDS": "10"}),
    ("JENKINS_RETRY_BASE_SECONDS", "JENKINS_RETRY_MAX_SECONDS", {"JENKINS_RETRY_BASE_SECONDS": "60"}),
])
def test_a_base_above_its_maximum_is_refused_naming_both(base, maximum, env):
    message = _refused({**BASE_ENV, **env}, base)
    assert maximum in message


def test_zero_backoff_stays_allowed():
    """Tests and impatient setups retry at once: 0 and 0 is a valid pair."""
    settings = load_settings({**BASE_ENV, "RETRY_BASE_SECONDS": "0", "RETRY_MAX_SECONDS": "0"})
    assert (settings.retry_base_seconds, settings.retry_max_seconds) == (0.0, 0.0)


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1/jenkins/", "https://ci.example.com:99999/",
                                 "http://ci.example.com:port/", "http://[not-an-ip]/"])
def test_a_malformed_jenkins_url_is_one_line_naming_it(url):
    message = _refused({**BASE_ENV, "JENKINS_URL": url}, "JENKINS_URL")
    assert "Traceback" not in message


def test_defaults_are_within_their_ranges():
    settings = load_settings(BASE_ENV)
    assert (settings.jenkins_breaker_failures, settings.jenkins_retry_base_seconds,
            settings.jenkins_retry_max_seconds, settings.db_stall_seconds) == (3, 1.0, 15.0, 10.0)


def test_the_help_shows_each_range():
    from jenkins_dispatch.cli.main import environment_help

    lines = {line.split()[0]: line for line in environment_help().splitlines()[1:]}
    for name, (low, high) in RANGES.items():
        assert f"[{low:g} to {high:g}]" in lines[name], lines[name]
