"""What the HTTP sides read: the webhook's shared secret, the web page's login token and the login proxy that
names its operator, and the defaults of `serve`'s and `ui`'s own options.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from .reading import SecretFetcher, _secret_text, _sources, _text

# `jenkins-dispatch serve` (its options, not variables): a pass at least this often, and where it listens.
SERVE_INTERVAL_SECONDS = 10.0
SERVE_HOST = "127.0.0.1"
SERVE_PORT = 8080
# `jenkins-dispatch ui` (its options): the web page's port and how often its pages reload themselves.
UI_PORT = 8081
UI_REFRESH_SECONDS = 10

_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}")


@dataclass(frozen=True)
class UiIdentity:
    """Who pulls the web page's levers, as a login proxy tells: the header naming the operator and the proxies
    believed (an empty ``header``: nobody is named, every action is recorded as ``ui``)."""

    header: str | None = None  # lower-case, as the page's request headers are keyed
    proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


def load_ui_identity(env: Mapping[str, str] | None = None) -> UiIdentity:
    """UI_TRUSTED_USER_HEADER and UI_TRUSTED_PROXIES, both or neither; ConfigError with one line per problem."""
    env = os.environ if env is None else env
    header = _text(env, "UI_TRUSTED_USER_HEADER") or None
    problems: list[str] = []
    if header is not None and not _HEADER_NAME.fullmatch(header):
        problems.append(f"UI_TRUSTED_USER_HEADER must be an HTTP header name (e.g. X-Forwarded-User), got {header!r}")
    proxies = _trusted_proxies(_text(env, "UI_TRUSTED_PROXIES"), problems)
    if header is not None and not proxies and not problems:
        problems.append("UI_TRUSTED_PROXIES is required with UI_TRUSTED_USER_HEADER: the addresses of the login "
                        "proxies whose header is believed (a header from anyone else is ignored)")
    if proxies and header is None:
        problems.append("UI_TRUSTED_USER_HEADER is required with UI_TRUSTED_PROXIES: the header the proxies name "
                        "the operator in")
    if problems:
        raise ConfigError("\n".join(problems))
    return UiIdentity(header.lower() if header else None, tuple(proxies))


def _trusted_proxies(text: str, problems: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """UI_TRUSTED_PROXIES' comma-separated addresses and CIDRs (empty parts skipped), a problem appended for each
    that is neither."""
    proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            proxies.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            problems.append(f"UI_TRUSTED_PROXIES: {part!r} is not an address or CIDR (e.g. 10.0.0.0/24)")
    return proxies


def _token(name: str, arn_name: str, env: Mapping[str, str] | None,
           fetch_secret: SecretFetcher | None) -> str | None:
    """A token given as variable ``name``, else in the secret named by ``arn_name``; None if neither is set."""
    env, fetch_secret = _sources(env, fetch_secret)
    token = _text(env, name) or None
    arn = _text(env, arn_name)
    if not token and arn:
        if fetch_secret is None:  # _sources gives one whenever an ARN is set
            raise ConfigError(f"{arn_name} is set but no secrets source is available")
        token = _secret_text(fetch_secret, arn_name, arn, "token")
    return token


def load_webhook_secret(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> str | None:
    """The webhook's shared secret (WEBHOOK_SECRET, else the secret named by WEBHOOK_SECRET_ARN), None if unset."""
    return _token("WEBHOOK_SECRET", "WEBHOOK_SECRET_ARN", env, fetch_secret)


def load_ui_token(env: Mapping[str, str] | None = None, fetch_secret: SecretFetcher | None = None) -> str | None:
    """The web page's login token (UI_TOKEN, else the secret named by UI_TOKEN_SECRET_ARN), None if unset."""
    return _token("UI_TOKEN", "UI_TOKEN_SECRET_ARN", env, fetch_secret)

