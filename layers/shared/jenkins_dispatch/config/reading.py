"""How a variable is read: text, numbers within the table's range, booleans, choices, and secrets by ARN.

Every reader names the variable at fault and never echoes a secret's value. The underscored readers are the
config package's own (its modules share them); nothing outside ``config/`` calls them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from .variables import VARIABLES, default_of

SecretFetcher = Callable[[str], str]
"""Given a secret's ARN, return its SecretString."""

# Every variable naming a secret: when one is set, Secrets Manager is the secrets source (``_sources``).
SECRET_ARN_VARIABLES = ("DB_SECRET_ARN", "JENKINS_SECRET_ARN", "WEBHOOK_SECRET_ARN", "UI_TOKEN_SECRET_ARN",
                        "JENKINS_CONTROLLERS_SECRET_ARN")

_FROM_TABLE = object()  # a reader's default: the variable's own, from ENVIRONMENT


def _text(env: Mapping[str, str], name: str) -> str:
    """The variable's value without surrounding blanks ('' when unset). Only listed variables may be read."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not listed in config.ENVIRONMENT")
    return (env.get(name) or "").strip()


def _range(name: str) -> tuple[float, float]:
    """A numeric variable's range; a variable read as a number must have one (else a KeyError, as ``_text``)."""
    variable = VARIABLES[name]
    if variable.minimum is None or variable.maximum is None:
        raise KeyError(f"{name} has no minimum and maximum in config.ENVIRONMENT")
    return variable.minimum, variable.maximum


def _range_error(name: str, raw: str, whole: bool) -> ConfigError:
    low, high = _range(name)
    kind = "a whole number" if whole else "a number"
    return ConfigError(f"{name} must be {kind} from {low:g} to {high:g}, got {raw!r}")


def _int(env: Mapping[str, str], name: str) -> int:
    """A whole number within the variable's range (``ENVIRONMENT``); unset or empty: its default."""
    value = _optional_int(env, name)
    return default_of(name) if value is None else value


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    """A whole number within the variable's range (``ENVIRONMENT``); unset or empty: None."""
    low, high = _range(name)
    raw = _text(env, name)
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise _range_error(name, raw, whole=True) from None
    if not low <= value <= high:
        raise _range_error(name, raw, whole=True)
    return value


def _float(env: Mapping[str, str], name: str, *, default: Any = _FROM_TABLE) -> float:
    """A finite number within the variable's range (``ENVIRONMENT``); unset or empty: ``default``."""
    low, high = _range(name)
    raw = _text(env, name)
    if raw == "":
        return default_of(name) if default is _FROM_TABLE else default
    try:
        value = float(raw)
    except ValueError:
        raise _range_error(name, raw, whole=False) from None
    if not low <= value <= high:  # also refuses NaN and both infinities
        raise _range_error(name, raw, whole=False)
    return value


def _base_and_maximum(base_name: str, base: float, maximum_name: str, maximum: float) -> None:
    """A backoff's first wait may not exceed its longest (the doubling would never start)."""
    if base > maximum:
        raise ConfigError(f"{base_name} ({base:g}) must not exceed {maximum_name} ({maximum:g})")


def _bool(env: Mapping[str, str], name: str) -> bool:
    raw = _text(env, name).lower()
    if raw == "":
        return default_of(name)
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    raw = _text(env, name).lower()
    if raw == "":
        return default_of(name)
    if raw not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _secret_json(fetch: SecretFetcher, name: str, arn: str) -> dict:
    try:
        raw = fetch(arn)
    except ConfigError as exc:
        raise ConfigError(f"{name} is set, but {exc}") from None
    except Exception as exc:  # boto / powertools errors carry no secret values
        raise ConfigError(f"cannot read the secret named by {name} ({arn}): {type(exc).__name__}: {exc}") from None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise ConfigError(f"the secret named by {name} ({arn}) must be a JSON object")
    return value


def _secret_text(fetch: SecretFetcher, name: str, arn: str, key: str) -> str:
    """A secret that is either plain text or a JSON object holding ``key``."""
    try:
        raw = fetch(arn)
    except ConfigError as exc:
        raise ConfigError(f"{name} is set, but {exc}") from None
    except Exception as exc:
        raise ConfigError(f"cannot read the secret named by {name} ({arn}): {type(exc).__name__}: {exc}") from None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = raw
    if isinstance(value, dict):
        value = value.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"the secret named by {name} ({arn}) is empty or has no {key!r} field")
    return value


def _sources(env: Mapping[str, str] | None, fetch_secret: SecretFetcher | None) -> tuple[Mapping[str, str], SecretFetcher | None]:
    """The environment to read (``os.environ`` by default) and, when a ``*_SECRET_ARN`` is set, Secrets Manager."""
    env = os.environ if env is None else env
    if fetch_secret is None and any(_text(env, k) for k in SECRET_ARN_VARIABLES):
        from ..secrets import fetch_secret_string

        fetch_secret = fetch_secret_string
    return env, fetch_secret

