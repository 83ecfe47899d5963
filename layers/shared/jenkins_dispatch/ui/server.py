"""The web page's HTTP side: a WSGI app on the bounded HTTP server (http_service), routes, sessions and login,
CSRF on every POST, the security headers on every answer, templates rendered with autoescaping. Every failure
answers a page that says what went wrong (400, 403, 404, 409, 503), never a traceback."""

from __future__ import annotations

import json
import re
import threading
import traceback
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import jinja2

from ..config import UI_PORT, UI_REFRESH_SECONDS, Settings
from ..errors import (
    OPERATION_FAILED,
    ConfigError,
    Conflict,
    DispatchError,
    InvalidInput,
    JenkinsError,
    NotFound,
)
from ..http_service import (
    BackgroundHttpServer,
    HttpLimits,
    RequestHead,
    listen_failure,
    read_body,
    request_headers,
    request_target,
    status_line,
    stop_on_signals,
)
from ..observability import logger
from ..operating import display, story
from ..store.db import SessionPool

if TYPE_CHECKING:
    from wsgiref.types import StartResponse
from . import forms, security
from .pages import LEVERS, Done, Page, Pages

HERE = Path(__file__).resolve().parent
POOL_SIZE = 4
FRONT_THREADS = 2  # static files, the login form, logout: never wait behind the database
NO_DATABASE_PATHS = ("/login", "/logout")
MAX_FORM_BYTES = 64 * 1024
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
_JOB_PATH = re.compile(r"^/jobs/([^/]+)(?:/(retry|cancel))?$")


@dataclass
class Answer:
    """What the handler sends: status, body, headers besides the security ones."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def template_environment() -> jinja2.Environment:
    """Jinja2 on the package's templates, every value escaped unless marked safe (none is)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["cell"] = display.cell
    env.filters["field"] = display.field
    env.filters["age"] = display.age
    env.filters["when"] = display.moment
    env.filters["ago"] = lambda moment: display.ago(moment, datetime.now(UTC))
    env.filters["iso"] = display.iso
    env.filters["phase"] = story.phase
    env.filters["glance"] = display.parameters_at_a_glance
    env.filters["took"] = lambda row: display.waited_and_ran(row, datetime.now(UTC))
    return env


def _static_files() -> dict[str, tuple[bytes, str]]:
    return {f"/static/{p.name}": (p.read_bytes(), STATIC_TYPES[p.suffix])
            for p in sorted((HERE / "static").iterdir()) if p.suffix in STATIC_TYPES}


class UiApp:
    """Routes a request to a page or a lever, with its session; knows nothing of sockets."""

    def __init__(self, settings: Settings, *, read_only: bool = False, refresh_seconds: int = UI_REFRESH_SECONDS,
                 token: str | None = None, pool_size: int = POOL_SIZE):
        self.settings = settings
        self.read_only = read_only
        self.refresh_seconds = refresh_seconds
        self.token = token
        self.sessions = security.Sessions(token_required=bool(token))
        self.pool_size = pool_size
        self.pool = SessionPool(settings.database, pool_size, application_name="jenkins-dispatch-ui")
        self.pages = Pages(settings, self.pool)
        self.templates = template_environment()
        self.static = _static_files()

    def close(self) -> None:
        """Close the database sessions."""
        self.pool.close()

    # ------------------------------------------------------------------ rendering

    def render(self, page: Page, session: security.Session | None, path: str = "/") -> Answer:
        """A page through its template, with what every page shows (the flash message, the CSRF token)."""
        flash = None
        if session is not None:
            flash, session.flash = session.flash, None
        context = dict(page.data, csrf=session.csrf if session else "", read_only=self.read_only,
                       flash=flash, refresh=self.refresh_seconds if page.refresh and page.status == 200 else 0, path=path,
                       logged_in=bool(self.token and session and session.authenticated))
        body = self.templates.get_template(page.template).render(**context).encode()
        return Answer(page.status, body, {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"})

    def problem(self, status: int, title: str, message: str, session: security.Session | None) -> Answer:
        """A page that says what went wrong, in one sentence, and nothing more."""
        return self.render(Page("error.html", {"title": title, "message": message}, status, refresh=False), session)

    def redirect(self, location: str, headers: dict[str, str] | None = None) -> Answer:
        """303 See Other to a path of this page."""
        return Answer(303, b"", {"Location": location, **(headers or {})})

    # ------------------------------------------------------------------ requests

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes, peer: str | None = None) -> Answer:
        """Answer one request; never raises. ``peer``: the address it came from (whether a login proxy's header
        naming the operator is believed)."""
        session = None
        try:
            url = urlsplit(target)
            path = url.path
            if path in self.static and method in ("GET", "HEAD"):
                content, content_type = self.static[path]
                return Answer(200, content, {"Content-Type": content_type, "Cache-Control": "no-cache"})
            if not self._host_allowed(headers.get("host", "")):
                return self.problem(421, "Wrong host", "This page answers only at its own loopback address "
                                    "(set UI_TOKEN to serve it under other names).", None)
            session, visitor_cookie = self._session(headers)
            try:
                actor = security.actor(security.operator_name(self.settings.ui_identity.header,
                                                              self.settings.ui_identity.proxies, peer, headers))
            except InvalidInput as ambiguous:
                if method == "POST":  # a lever would record who pulled it: refused
                    return self.problem(400, "Refused: who is the operator?", str(ambiguous), session)
                actor = security.ACTOR  # a page only shows: nothing is recorded
            answer = self._route(method, path, parse_qs(url.query, keep_blank_values=True), headers, body, session,
                                 actor)
            if visitor_cookie:
                answer.headers.setdefault("Set-Cookie", visitor_cookie)
            return answer
        except Exception:  # the page says it failed; the log has the why
            logger.error("ui request failed", extra={"path": target.split("?")[0],
                                                     "error": traceback.format_exc(limit=8)})
            return self.problem(500, "Internal error", "The page failed unexpectedly; the log says why.", session)

    def _host_allowed(self, host: str) -> bool:
        if self.token:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return security.is_loopback(name.lower())

    def _session(self, headers: dict[str, str]) -> tuple[security.Session, str | None]:
        """The browser's stored session, else its visitor's (never stored), with the cookie that visitor needs."""
        cookie = SimpleCookie()
        with suppress(CookieError):  # a malformed Cookie header is a browser without our session
            cookie.load(headers.get("cookie", ""))
        morsel = cookie.get(security.SESSION_COOKIE)
        session = self.sessions.find(morsel.value if morsel else None)
        if session is not None:
            return session, None
        morsel = cookie.get(security.VISITOR_COOKIE)
        visitor, nonce = self.sessions.visitor(morsel.value if morsel else None)
        return visitor, security.session_cookie(nonce, name=security.VISITOR_COOKIE) if nonce else None

    def _route(self, method: str, path: str, query: dict, headers: dict[str, str], body: bytes,
               session: security.Session, actor: str = security.ACTOR) -> Answer:
        if method == "POST":
            return self._post(path, headers, body, session, actor)
        if method not in ("GET", "HEAD"):
            return self.problem(405, "Method not allowed", f"{method} is not answered here.", session)
        if path == "/login":
            if session.authenticated:
                return self.redirect("/")
            return self.render(Page("login.html", {"error": None}, refresh=False), session)
        if not session.authenticated:
            return self.redirect("/login")
        try:
            return self._get(path, query, session)
        except DispatchError as error:
            return self._failure(error, session)

    def _get(self, path: str, query: dict, session: security.Session) -> Answer:
        if path == "/":
            return self.render(self.pages.overview(query), session, path)
        if path == "/jobs":
            return self.render(self.pages.jobs(query), session, path)
        if path == "/time":
            return self.render(self.pages.time(query), session, path)
        if path == "/bulk" and not self.read_only:
            return self.render(self.pages.bulk_preview(query), session, path)
        match = _JOB_PATH.match(path)
        if match and match.group(2) is None:
            return self.render(self.pages.job(self._job_id(match.group(1))), session, path)
        return self.problem(404, "Not found", f"There is no page at {path}.", session)

    def _post(self, path: str, headers: dict[str, str], body: bytes, session: security.Session,
              actor: str) -> Answer:
        form_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if (body and form_type != "application/x-www-form-urlencoded") or len(body) > MAX_FORM_BYTES:
            return self.problem(400, "Bad request", "Levers accept only this page's own forms.", session)
        if self.read_only and path not in ("/login", "/logout"):
            return self.problem(403, "Read-only", "This page was started with --read-only: nothing can be changed "
                                "here. Use the command line, or start the page without --read-only.", session)
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        given = form.get("csrf", [])
        if len(given) != 1 or not security.tokens_match(given[0], session.csrf):  # none, or several: refused
            return self.problem(403, "Refused: the form token is missing or wrong",
                                "Nothing was changed. Reload the page and try again (a form from another "
                                "site, or from before a restart, cannot pull a lever).", session)
        if path == "/login":
            return self._login(form, session)
        if not session.authenticated:
            return self.problem(403, "Log in first", "Nothing was changed: log in, then try again.", session)
        if path == "/logout":
            self.sessions.end(session)
            return self.redirect("/login", {"Set-Cookie": security.session_cookie("", secure=False) + "; Max-Age=0"})
        opened = None
        if not session.stored:
            # No token here (loopback: every visitor is the operator): the first form accepted is the login,
            # with the token the visitor's page carries, so the next page shows this lever's message.
            session = opened = self.sessions.start(authenticated=True, csrf=session.csrf)
        try:
            answer = self._lever(path, form, session, actor)
        except DispatchError as error:
            answer = self._failure(error, session)
        if opened is not None:
            answer.headers["Set-Cookie"] = security.session_cookie(opened.id)
        return answer

    def _lever(self, path: str, form: dict, session: security.Session, actor: str) -> Answer:
        match = _JOB_PATH.match(path)
        done: Done | Page
        if match and match.group(2):
            job_id = self._job_id(match.group(1))
            lever = self.pages.retry if match.group(2) == "retry" else self.pages.cancel
            done = lever(job_id, form, actor)
        elif path in LEVERS:
            done = LEVERS[path](self.pages, form, actor)
        elif path == "/bulk":
            return self.render(self.pages.bulk_act(form, actor), session, path)
        else:
            return self.problem(404, "Not found", f"There is no lever at {path}.", session)
        if isinstance(done, Page):  # the lever asks first: its confirmation, nothing changed
            return self.render(done, session, path)
        return self._done(done, session)

    def _done(self, done: Done, session: security.Session) -> Answer:
        session.flash = done.message
        return self.redirect(done.location)

    def _login(self, form: dict, session: security.Session) -> Answer:
        if not self.token:
            return self.redirect("/")
        given = form.get("token", [])
        if len(given) != 1 or not security.tokens_match(given[0].strip(), self.token):
            return self.render(Page("login.html", {"error": "That token is not the one configured (UI_TOKEN)."}, 403,
                                    refresh=False),
                               session)
        self.sessions.end(session)  # a new id once logged in: a session id seen before login is worth nothing
        fresh = self.sessions.start(authenticated=True)
        return self.redirect("/", {"Set-Cookie": security.session_cookie(fresh.id)})

    @staticmethod
    def _job_id(text: str) -> int:
        try:
            job_id = forms.positive_id(text, "job id")
        except InvalidInput:
            job_id = None
        if job_id is None:
            raise NotFound(f"there is no job {text!r}: a job's page is /jobs/ID with a numeric id")
        return job_id

    def _failure(self, error: DispatchError, session: security.Session) -> Answer:
        if isinstance(error, NotFound):
            return self.problem(404, "Not found", str(error), session)
        if isinstance(error, Conflict):
            return self.problem(409, "Nothing done", str(error), session)
        if isinstance(error, JenkinsError):
            return self.problem(502, "Jenkins unavailable", str(error), session)
        if isinstance(error, OPERATION_FAILED):
            return self.problem(503, "Unavailable", str(error), session)
        if isinstance(error, InvalidInput):
            return self.problem(400, "Bad request", str(error), session)
        return self.problem(400, "Refused", str(error), session)


def answer_wsgi(app: UiApp, environ: dict, start_response: StartResponse, method: str, target: str) -> list[bytes]:
    """Answer a WSGI request through ``app``, with the security headers (also `serve --ui`'s way in)."""
    answer = app.handle(method, target, request_headers(environ), read_body(environ, MAX_FORM_BYTES),
                        environ.get("REMOTE_ADDR"))
    headers = {**security.SECURITY_HEADERS, **answer.headers, "Content-Length": str(len(answer.body))}
    start_response(status_line(answer.status), list(headers.items()))
    return [] if method == "HEAD" else [answer.body]


class UiWsgi:
    """`ui`'s WSGI application: the page, and which requests may wait on the database."""

    def __init__(self, app: UiApp):
        self.app = app

    def lane(self, head: RequestHead) -> str:
        """Static files and the login form never wait behind the page's database sessions."""
        return "front" if head.path in self.app.static or head.path in NO_DATABASE_PATHS else "page"

    def __call__(self, environ: dict, start_response: StartResponse) -> list[bytes]:
        path, query = request_target(environ)
        method = environ.get("REQUEST_METHOD", "GET").upper()
        return answer_wsgi(self.app, environ, start_response, method, path + ("?" + query if query else ""))


def mounted_app(settings: Settings, *, read_only: bool = False) -> UiApp:
    """The page for `serve --ui`, which shares the webhook's address: a token is always required there."""
    if not settings.ui_token:
        raise ConfigError("serve --ui needs UI_TOKEN (or UI_TOKEN_SECRET_ARN): the page would share the webhook's "
                          "address, so it must ask for a token")
    return UiApp(settings, read_only=read_only, token=settings.ui_token)


class UiServer(BackgroundHttpServer):
    """The web page on a background thread: ``start``, ``url``, ``stop``."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = UI_PORT, *,
                 read_only: bool = False, refresh_seconds: int = UI_REFRESH_SECONDS):
        security.check_listen(host, settings.ui_token)
        self.app = UiApp(settings, read_only=read_only, refresh_seconds=refresh_seconds, token=settings.ui_token)
        wsgi = UiWsgi(self.app)
        try:
            super().__init__((host, port), wsgi, "ui-http", lanes={"front": FRONT_THREADS, "page": self.app.pool_size},
                             choose=wsgi.lane, log=logger, server_name="jenkins-dispatch-ui",
                             limits=HttpLimits(idle_seconds=settings.http_idle_timeout_seconds))
        except (OSError, OverflowError) as exc:
            self.app.close()
            raise ConfigError(listen_failure("ui", host, port, exc)) from None

    def closed(self) -> None:
        """The page's database sessions."""
        self.app.close()


def run_ui(settings: Settings, host: str, port: int, *, read_only: bool = False,
           refresh_seconds: int = UI_REFRESH_SECONDS) -> None:
    """`jenkins-dispatch ui`: serve the page until SIGTERM / SIGINT; the first stdout line says where."""
    server = UiServer(settings, host, port, read_only=read_only, refresh_seconds=refresh_seconds).start()
    print(json.dumps({"message": "serving the web page", "url": server.url, "read_only": read_only,
                      "token_required": bool(settings.ui_token),
                      "started_at": datetime.now(UTC).isoformat(timespec="seconds")}), flush=True)
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.stop()
