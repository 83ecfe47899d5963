"""Who may use the web page and how its answers protect the browser: pure decisions and an in-memory store of
sessions (each with its CSRF token). Tokens are compared in constant time and never rendered or logged.

A session is stored only when someone logs in (with UI_TOKEN: the right token posted to /login; without one,
on loopback, where every visitor is the operator: the first form accepted). Before that a browser is a
*visitor*: nothing is kept for it; its CSRF token is derived (HMAC under a key of this process) from a random
nonce in its own cookie. So requests without a session cookie, however many, create nothing and evict nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import ConfigError, InvalidInput
from ..inputs import control_character

SESSION_COOKIE = "jd_ui_session"
VISITOR_COOKIE = "jd_ui_visitor"  # a browser without a session: the nonce its CSRF token is derived from
MAX_SESSIONS = 10_000  # logins beyond this forget the least recently used session
_NONCE = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
SESSION_IDLE_SECONDS = 12 * 3600

# No inline script or style, nothing from elsewhere, no framing, forms post only to this page.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
                           "object-src 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to listen on) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


def check_listen(host: str, token: str | None) -> None:
    """Refuse (ConfigError, one line) to serve a non-loopback address without a token."""
    if not token and not is_loopback(host):
        raise ConfigError(f"ui refuses to listen on {host} without a token: set UI_TOKEN (or UI_TOKEN_SECRET_ARN), "
                          "or listen on 127.0.0.1")


def tokens_match(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; False when either is missing or empty."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def session_cookie(session_id: str, secure: bool = False, name: str = SESSION_COOKIE) -> str:
    """The Set-Cookie value: HttpOnly, SameSite=Strict, for the whole page."""
    return (f"{name}={session_id}; Path=/; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


@dataclass
class Session:
    """One browser's session: its CSRF token, whether it logged in, and a message for its next page."""

    id: str
    csrf: str
    authenticated: bool
    last_seen: float = field(default_factory=time.monotonic)
    flash: str | None = None
    stored: bool = True  # False: a visitor's, made for one request and kept nowhere


class Sessions:
    """Sessions by id, in memory (a restart logs everyone out), the least recently used forgotten first."""

    def __init__(self, token_required: bool):
        self.token_required = token_required
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)  # visitors' CSRF tokens; a restart makes open forms ask for a reload

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def visitor(self, nonce: str | None) -> tuple[Session, str | None]:
        """A browser without a session, kept nowhere: (its session for this request, a new nonce for its cookie
        when it brought none that could be ours). Its CSRF token is the HMAC of its nonce."""
        fresh = None
        if not nonce or not _NONCE.fullmatch(nonce):
            nonce = fresh = secrets.token_urlsafe(32)
        csrf = hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()
        return Session("", csrf, not self.token_required, stored=False), fresh

    def find(self, session_id: str | None) -> Session | None:
        """The live session with this id, or None."""
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if time.monotonic() - session.last_seen > SESSION_IDLE_SECONDS:
                del self._sessions[session_id]
                return None
            session.last_seen = time.monotonic()
            self._sessions.move_to_end(session_id)
            return session

    def start(self, authenticated: bool | None = None, csrf: str | None = None) -> Session:
        """A new session (at a login); authenticated from the start when no token is required."""
        session = Session(secrets.token_urlsafe(32), csrf or secrets.token_urlsafe(32),
                          (not self.token_required) if authenticated is None else authenticated)
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def end(self, session: Session) -> None:
        """Forget a session (logout, or replaced at login)."""
        if not session.stored:
            return
        with self._lock:
            self._sessions.pop(session.id, None)


ACTOR = "ui"  # who the history names for an action from the page when no login proxy names the operator
MAX_OPERATOR_NAME = 60  # the history's actor column holds "ui:" and this many characters (MySQL: VARCHAR(63))


def operator_name(header: str | None, proxies: tuple, peer: str | None, headers: dict[str, str]) -> str | None:
    """The operator a login proxy names in ``header``, believed only when the request came from one of
    ``proxies`` (an address anyone else sends it from is ignored); None when nobody is named, or the name is
    empty, too long or holds control characters. InvalidInput when it names more than one: the server joins a
    header sent twice with ", " (a proxy that adds its own line to the client's, say), and which of them the proxy
    vouched for cannot be told, so the action is refused rather than recorded under both."""
    if not header or not peer:
        return None
    try:
        address = ipaddress.ip_address(peer.strip("[]"))
    except ValueError:
        return None
    if not any(address in network for network in proxies):
        return None
    name = headers.get(header, "").strip()
    if "," in name:
        raise InvalidInput(f"{header}: the login proxy named more than one operator; nothing was changed (it must "
                           "send exactly one name, in one header line)")
    return name if 0 < len(name) <= MAX_OPERATOR_NAME and control_character(name) is None else None


def actor(name: str | None) -> str:
    """What the history, the pauses and the cap changes record for an action from the page: ``ui:NAME`` for
    an operator a trusted proxy named, else ``ui``."""
    return f"{ACTOR}:{name}" if name else ACTOR
