"""Jenkins controllers' settings: the default one (JENKINS_URL & co., or JENKINS_SECRET_ARN) and the others of
JENKINS_CONTROLLERS (or its secret), validated together (names, URLs, caps, webhook secrets of their own).
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import ConfigError
from .reading import SecretFetcher, _bool, _float, _int, _secret_json, _sources, _text
from .variables import default_of

# Several Jenkins controllers (docs/controllers.md): JENKINS_URL & co. are the one named DEFAULT_CONTROLLER.
DEFAULT_CONTROLLER = "default"
CONTROLLER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
CONTROLLER_KEYS = ("url", "user", "api_token", "max_in_flight", "webhook_secret")
CONTROLLER_MAX_IN_FLIGHT = (1, 10_000_000)  # a controller's own cap, as MAX_IN_FLIGHT's range


@dataclass(frozen=True)
class JenkinsSettings:
    """Where and how to reach Jenkins: URL, user, API token (never shown), timeout, TLS, search window."""
    url: str
    user: str
    api_token: str = field(repr=False)
    timeout_seconds: float = default_of("JENKINS_TIMEOUT_SECONDS")
    verify_tls: bool = default_of("JENKINS_VERIFY_TLS")
    search_window: int = default_of("JENKINS_SEARCH_WINDOW")
    # Which controller this is (rows name it in their `controller` column) and its own cap on jobs in flight
    # (beside MAX_IN_FLIGHT; None: none).
    name: str = DEFAULT_CONTROLLER
    max_in_flight: int | None = None
    # The secret the webhook requires, instead of WEBHOOK_SECRET, of a notification whose build is this
    # controller's (None: the shared one). Never shown.
    webhook_secret: str | None = field(default=None, repr=False)


def _jenkins(env: Mapping[str, str], fetch: SecretFetcher | None, timeout: float) -> JenkinsSettings | None:
    secret = _jenkins_secret(fetch, _text(env, "JENKINS_SECRET_ARN"))
    url = _text(env, "JENKINS_URL") or secret.get("url") or ""
    user = _text(env, "JENKINS_USER") or secret.get("user") or ""
    token = _text(env, "JENKINS_API_TOKEN") or secret.get("api_token") or ""
    if not (url or user or token):
        return None
    _check_default_controller(url, user, token)
    return JenkinsSettings(
        url=url.rstrip("/") + "/",
        user=user,
        api_token=token,
        timeout_seconds=timeout,
        verify_tls=_bool(env, "JENKINS_VERIFY_TLS"),
        search_window=_int(env, "JENKINS_SEARCH_WINDOW"),
    )


def _jenkins_secret(fetch: SecretFetcher | None, arn: str) -> dict:
    """The JSON of the secret named by JENKINS_SECRET_ARN (an empty dict when none is named)."""
    if not arn:
        return {}
    if fetch is None:
        raise ConfigError("JENKINS_SECRET_ARN is set but no secrets source is available")
    return _secret_json(fetch, "JENKINS_SECRET_ARN", arn)


def _check_default_controller(url: str, user: str, token: str) -> None:
    """The default controller needs a Jenkins base URL without credentials, a user and a token, checked in
    that order; the messages say where each may be given."""
    if not url:
        raise ConfigError("JENKINS_URL is not set (nor 'url' in the secret named by JENKINS_SECRET_ARN)")
    if "@" in url:  # checked first, and the URL never echoed: it may hold a password or token
        raise ConfigError("JENKINS_URL must not carry credentials: use JENKINS_USER and JENKINS_API_TOKEN")
    if problem := _url_problem(url, "JENKINS_URL"):
        raise ConfigError(problem)
    if not user:
        raise ConfigError("JENKINS_USER is not set (nor 'user' in the secret named by JENKINS_SECRET_ARN)")
    if not token:
        raise ConfigError("JENKINS_API_TOKEN is not set (nor 'api_token' in the secret named by JENKINS_SECRET_ARN)")


def _url_problem(url: str, name: str) -> str | None:
    """Why ``url`` cannot be a Jenkins base URL (None: it can); ``name`` says where it was given. Never echoes it."""
    if "@" in url:  # checked first, and the URL never echoed: it may hold a password or token
        return f"{name} must not carry credentials: give the user and API token apart"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        well_formed = bool(parts.hostname)
    except ValueError:  # an unclosed "[", a port that is not a number or out of range
        well_formed = False
    if not well_formed or parts.scheme not in ("http", "https"):
        return f"{name} must be an http(s) URL such as https://ci.example.com/jenkins/"
    return None


def same_jenkins_key(url: str) -> str:
    """A Jenkins base URL as two spellings of the same one compare (scheme and host ignore case, one slash)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/"
    return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{path}"


def _controller(name: str, entry: object, timeout: float, env: Mapping[str, str],
                problems: list[str]) -> JenkinsSettings | None:
    """One entry of JENKINS_CONTROLLERS, or None with its problems appended (one line each)."""
    where = f"JENKINS_CONTROLLERS[{name!r}]"
    if not CONTROLLER_NAME.match(name):
        problems.append(f"JENKINS_CONTROLLERS: bad controller name {name!r}: use lower-case letters, digits, '_' "
                        "and '-', starting with a letter or digit (at most 64 characters)")
        return None
    if not isinstance(entry, dict):
        problems.append(f"{where} must be a JSON object with url, user and api_token")
        return None
    before = len(problems)
    unknown = sorted(set(entry) - set(CONTROLLER_KEYS))
    if unknown:
        problems.append(f"{where} has unknown keys {unknown}: use {', '.join(CONTROLLER_KEYS)}")
    texts = _controller_texts(entry, where, problems)
    cap = _controller_cap(entry, where, problems)
    hook = _controller_webhook_secret(entry, where, problems)
    if len(problems) > before:
        return None
    return JenkinsSettings(
        url=texts["url"].rstrip("/") + "/", user=texts["user"], api_token=texts["api_token"],
        timeout_seconds=timeout, verify_tls=_bool(env, "JENKINS_VERIFY_TLS"),
        search_window=_int(env, "JENKINS_SEARCH_WINDOW"), name=name, max_in_flight=cap,
        webhook_secret=hook,
    )


def _controller_texts(entry: dict, where: str, problems: list[str]) -> dict[str, str]:
    """An entry's url, user and api_token, stripped ('' when absent or not a string, with the problem appended);
    each must be given and the url be a Jenkins base URL."""
    texts: dict[str, str] = {}
    for key in ("url", "user", "api_token"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"{where}: {key} must be a string")
            value = None
        texts[key] = (value or "").strip()
    for key in ("url", "user", "api_token"):
        if not texts[key]:
            problems.append(f"{where} has no {key}")
    if texts["url"] and (problem := _url_problem(texts["url"], f"{where}'s url")):
        problems.append(problem)
    return texts


def _controller_cap(entry: dict, where: str, problems: list[str]) -> int | None:
    """An entry's own max_in_flight (None: none), a whole number within CONTROLLER_MAX_IN_FLIGHT."""
    cap = entry.get("max_in_flight")
    low, high = CONTROLLER_MAX_IN_FLIGHT
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not low <= cap <= high):
        problems.append(f"{where}: max_in_flight must be a whole number from {low} to {high}")
    return cap


def _controller_webhook_secret(entry: dict, where: str, problems: list[str]) -> str | None:
    """An entry's own webhook secret, stripped (None when left out: the shared WEBHOOK_SECRET then)."""
    hook = entry.get("webhook_secret")
    if "webhook_secret" in entry and (not isinstance(hook, str) or not hook.strip()):
        problems.append(f"{where}: webhook_secret must be a non-empty string (or left out: WEBHOOK_SECRET then)")
    return hook.strip() if isinstance(hook, str) else None


def _check_webhook_secrets(controllers: tuple[JenkinsSettings, ...], shared: str | None) -> None:
    """Each controller's own webhook secret differs from the shared one and from the others': a secret two of
    them accept would let either's Jenkins speak for the other, which is what a secret of its own prevents."""
    problems = []
    seen: dict[str, str] = {}
    for c in controllers:
        if not c.webhook_secret:
            continue
        if shared and hmac.compare_digest(c.webhook_secret.encode(), shared.encode()):
            problems.append(f"JENKINS_CONTROLLERS[{c.name!r}]: webhook_secret must differ from WEBHOOK_SECRET "
                            "(leave it out to use the shared one)")
        if c.webhook_secret in seen:
            problems.append(f"JENKINS_CONTROLLERS: controllers {seen[c.webhook_secret]!r} and {c.name!r} have the "
                            "same webhook_secret: give each its own")
        seen.setdefault(c.webhook_secret, c.name)
    if problems:
        raise ConfigError("\n".join(problems))


def _controllers(env: Mapping[str, str], fetch: SecretFetcher | None, timeout: float,
                 default: JenkinsSettings | None) -> tuple[JenkinsSettings, ...]:
    """Every controller: ``default`` (JENKINS_URL & co.) and JENKINS_CONTROLLERS' (or its secret's). Every problem
    is found before any is reported: ConfigError holds one line per problem, each naming the variable."""
    raw, given = _controllers_json(env, fetch)
    if not raw:
        return () if default is None else (default,)
    try:
        entries = json.loads(raw)
    except ValueError:
        raise ConfigError(f"{given} must be JSON: {{\"NAME\": {{\"url\": ..., \"user\": ..., "
                          "\"api_token\": ...}}") from None
    if not isinstance(entries, dict) or not entries:
        raise ConfigError(f"{given} must be a non-empty JSON object: {{\"NAME\": {{\"url\": ..., \"user\": ..., "
                          "\"api_token\": ...}}")
    problems: list[str] = []
    found: list[JenkinsSettings] = [] if default is None else [default]
    for name, entry in entries.items():
        if name == DEFAULT_CONTROLLER and default is not None:
            problems.append("JENKINS_CONTROLLERS defines 'default', which JENKINS_URL (or JENKINS_SECRET_ARN) "
                            "already is: define it in one place")
            continue
        controller = _controller(name, entry, timeout, env, problems)
        if controller is not None:
            found.append(controller)
    problems.extend(_same_url_problems(found))
    if problems:
        raise ConfigError("\n".join(problems))
    return tuple(sorted(found, key=lambda c: (c.name != DEFAULT_CONTROLLER, c.name)))


def _controllers_json(env: Mapping[str, str], fetch: SecretFetcher | None) -> tuple[str, str]:
    """JENKINS_CONTROLLERS' text, else its secret's JSON ('' when neither is set), and where it was given (for
    the messages)."""
    raw = _text(env, "JENKINS_CONTROLLERS")
    given = "JENKINS_CONTROLLERS"
    if not raw and (arn := _text(env, "JENKINS_CONTROLLERS_SECRET_ARN")):
        if fetch is None:
            raise ConfigError("JENKINS_CONTROLLERS_SECRET_ARN is set but no secrets source is available")
        raw = json.dumps(_secret_json(fetch, "JENKINS_CONTROLLERS_SECRET_ARN", arn))
        given = "the secret named by JENKINS_CONTROLLERS_SECRET_ARN"
    return raw, given


def _same_url_problems(controllers: list[JenkinsSettings]) -> list[str]:
    """One line per controller whose Jenkins another one already is (two spellings of one URL count as one)."""
    problems = []
    seen: dict[str, str] = {}
    for controller in controllers:
        key = same_jenkins_key(controller.url)
        if key in seen:
            problems.append(f"JENKINS_CONTROLLERS: controllers {seen[key]!r} and {controller.name!r} have the same "
                            "url: each Jenkins is one controller")
        seen.setdefault(key, controller.name)
    return problems


def load_jenkins_settings(env: Mapping[str, str] | None = None,
                          fetch_secret: SecretFetcher | None = None) -> JenkinsSettings | None:
    """The Jenkins part of the settings alone; None when no JENKINS_* variable (nor JENKINS_SECRET_ARN) is set."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _jenkins(env, fetch_secret, _float(env, "JENKINS_TIMEOUT_SECONDS"))


def load_controllers(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None,
                     default: JenkinsSettings | None = None) -> tuple[JenkinsSettings, ...]:
    """Every Jenkins controller: ``default`` (JENKINS_URL & co., as ``load_jenkins_settings`` read it) and those
    of JENKINS_CONTROLLERS (or JENKINS_CONTROLLERS_SECRET_ARN), validated together."""
    env, fetch_secret = _sources(env, fetch_secret)
    return _controllers(env, fetch_secret, _float(env, "JENKINS_TIMEOUT_SECONDS"), default)
