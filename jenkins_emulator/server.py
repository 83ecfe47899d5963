"""The emulator's HTTP face: routes Jenkins' URLs to the model and the views, with Jenkins' authentication, CSRF
crumbs, status codes and headers; applies the injected faults; hands ``/_emulator/`` to the control API.
``JenkinsEmulator`` runs it on a thread and offers the same controls as Python methods for tests.

Owns request parsing and the rules Jenkins applies on the way to an object (who may see or trigger it, which
answer a trigger gets). Must not build JSON documents or pages (``views.py``) nor keep state of its own beyond
the running server (the model and the faults hold it).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import html
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from . import control
from .config import DEFAULT_CONFIG, config_problem
from .faults import Fault, Faults
from .model import OVERRIDES, Build, Folder, Jenkins, Job, Permissions
from .views import (
    Response,
    access_denied,
    anonymous_denied,
    api_answer,
    build_json,
    folder_json,
    html_page,
    job_json,
    missing_permission,
    not_found,
    oops,
    queue_item_json,
    queue_json,
    requires_post,
    root_json,
    send_error,
    unavailable_page,
)


@dataclass
class Caller:
    """Who sent a request: a user (or None for anonymous), whether by API token, and its session."""

    user: str | None  # None: anonymous
    token_auth: bool = False
    session_id: str | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass  # quiet: tests run many requests

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    # ------------------------------------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        emulator = self.server.emulator
        jenkins = emulator.jenkins
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        if split.path.startswith(control.PREFIX):
            self._write(control.control_answer(jenkins, emulator.faults, emulator.base_url, method, split.path[len(control.PREFIX) :], body), method)
            return
        context = jenkins.settings.context_path
        if not split.path.startswith(context) and split.path + "/" != context:
            self._write(not_found(), method)
            return
        path = split.path[len(context) :]
        fault = emulator.faults.take(method, path)
        try:
            if fault and fault.latency_seconds:
                time.sleep(fault.latency_seconds)
            if fault and fault.hold:
                fault.wait_until_released()
            if fault and fault.reset:
                self._abort_connection()
                return
            if fault and fault.status:
                response = unavailable_page("restarting") if fault.status == 503 else oops(fault.status, "A problem occurred while processing the request")
                self._write(response, method)
                return
            window = emulator.faults.unavailable_window()
            if window:
                with jenkins.lock:
                    jenkins.counters["unavailable_answers"] += 1
                self._write(unavailable_page(window), method)
                return
            try:
                response = self._route(method, path, split.query, body)
            except Exception as exc:  # an emulator bug must still look like a Jenkins 500, not hang the client
                response = oops(500, f"{type(exc).__name__}: {exc}")
        finally:
            if fault:
                emulator.faults.handled(fault)
        if fault and fault.drop_after_accept:
            self._close_silently()
            return
        if fault and fault.slow_seconds:
            time.sleep(fault.slow_seconds)
        self._write(response, method)

    def _abort_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _close_silently(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _write(self, response: Response, method: str) -> None:
        jenkins = self.server.emulator.jenkins
        try:
            self.send_response(response.status)
            if response.content_type:
                self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Jenkins", jenkins.settings.version)
            self.send_header("X-Jenkins-Session", jenkins.session_hash)
            self.send_header("X-Hudson", "1.395")
            for name, value in response.headers or ():
                self.send_header(name, value)
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(response.body)
        except OSError:
            self.close_connection = True

    # ------------------------------------------------------------------------------------------------------
    # authentication and CSRF

    def _caller(self) -> Caller | Response:
        jenkins = self.server.emulator.jenkins
        session_id = None
        cookie = SimpleCookie()
        with contextlib.suppress(Exception):
            cookie.load(self.headers.get("Cookie") or "")
        if jenkins.cookie_name in cookie and cookie[jenkins.cookie_name].value in jenkins.sessions:
            session_id = cookie[jenkins.cookie_name].value
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Basic "):
            user = jenkins.sessions.get(session_id) if session_id else None
            return Caller(user, False, session_id)
        try:
            user, _, secret = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, secret = "", ""
        account = jenkins.users.get(user)
        if account and account["api_token"] and secret == account["api_token"]:
            return Caller(user, True, session_id)
        if account and account["password"] and secret == account["password"]:
            return Caller(user, False, session_id)
        if jenkins.settings.bad_credentials == "anonymous":
            # Some security realms (SSO plugins) and proxies ignore credentials they do not know: anonymous.
            return Caller(None, False, session_id)
        page = html_page("Unauthorized", f"Invalid password/token for user: {user}")
        return Response(401, page, headers=[("WWW-Authenticate", 'Basic realm="Jenkins"')])

    def _crumb_ok(self, caller: Caller, form: dict[str, list[str]]) -> bool:
        jenkins = self.server.emulator.jenkins
        mode = jenkins.settings.crumb_mode
        if mode == "off" or (caller.token_auth and mode != "always"):
            return True
        given = self.headers.get("Jenkins-Crumb") or (form.get("Jenkins-Crumb") or [None])[0]
        if not given or not caller.session_id:
            return False
        return given == jenkins.crumb_for(caller.user or "anonymous", caller.session_id)

    # ------------------------------------------------------------------------------------------------------
    # routing

    def _route(self, method: str, path: str, query: str, body: bytes) -> Response:
        emulator = self.server.emulator
        jenkins = emulator.jenkins
        caller = self._caller()
        if isinstance(caller, Response):
            return caller
        form: dict[str, list[str]] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            form.setdefault(name, []).append(value)
        content_type = self.headers.get("Content-Type") or ""
        if body and content_type.startswith("application/x-www-form-urlencoded"):
            for name, value in parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True):
                form.setdefault(name, []).append(value)
        segments = [unquote(s) for s in path.split("/")]
        if segments and segments[-1] == "":
            segments.pop()
        if segments[:1] == ["whoAmI"]:
            return self._who_am_i(caller, segments[1:], (form.get("tree") or [None])[0])
        if caller.user is None and not jenkins.settings.anonymous_read:
            return anonymous_denied("hudson.model.Hudson.Read")
        if method == "POST" and not self._crumb_ok(caller, form):
            return send_error(403, "No valid crumb was included in the request")
        if method == "POST" and caller.user is None:
            return anonymous_denied("hudson.model.Item.Build")
        tree = (form.get("tree") or [None])[0]
        user = caller.user or "anonymous"
        with jenkins.lock:
            permissions = jenkins.permissions_of(caller.user)
            if segments in ([], ["api", "json"]):
                if not segments and method != "POST":
                    return Response(200, html_page("Dashboard", "Welcome to Jenkins!"))
                return api_answer(root_json(jenkins, permissions), tree, shallow_children=True)
            if segments == ["crumbIssuer", "api", "json"]:
                if jenkins.settings.crumb_mode == "off":
                    return not_found()
                headers = []
                session_id = caller.session_id
                if session_id is None:
                    session_id = jenkins.new_session(user)
                    headers.append(("Set-Cookie", f"{jenkins.cookie_name}={session_id}; Path={jenkins.settings.context_path}; HttpOnly"))
                doc = {"_class": "hudson.security.csrf.DefaultCrumbIssuer", "crumb": jenkins.crumb_for(user, session_id), "crumbRequestField": "Jenkins-Crumb"}
                response = api_answer(doc, tree)
                response.headers = (response.headers or []) + headers
                return response
            if segments in (["me", "api", "json"],):
                return api_answer({"_class": "hudson.model.User", "absoluteUrl": f"{jenkins.base_url}user/{user}", "description": None, "fullName": user, "id": user, "property": []}, tree)
            if segments == ["queue", "api", "json"]:
                return api_answer(queue_json(jenkins, permissions), tree)
            if segments == ["queue", "cancelItem"]:
                return self._cancel(method, form, permissions)
            if len(segments) >= 3 and segments[:2] == ["queue", "item"] and segments[2].isdigit():
                return self._queue_item(method, int(segments[2]), segments[3:], tree, permissions)
            if segments[:1] == ["job"]:
                return self._job_route(method, segments, form, tree, user, permissions)
        return not_found()

    def _who_am_i(self, caller: Caller, rest: list[str], tree: str | None) -> Response:
        """``hudson.security.WhoAmI``, an UnprotectedRootAction: readable without Overall/Read. Spring's anonymous
        token is "authenticated" too; only ``anonymous`` tells. ``details`` and ``toString`` are no longer exported
        (SECURITY-1695, Jenkins 2.219)."""
        if rest == []:
            return Response(200, html_page("Who Am I", f"Name: {html.escape(caller.user or 'anonymous')}"))
        if rest != ["api", "json"]:
            return not_found()
        doc = {"_class": "hudson.security.WhoAmI", "anonymous": caller.user is None, "authenticated": True,
               "authorities": ["authenticated"] if caller.user else ["anonymous"], "name": caller.user or "anonymous"}
        return api_answer(doc, tree)

    def _queue_item(self, method: str, item_id: int, rest: list[str], tree: str | None,
                    permissions: Permissions) -> Response:
        jenkins = self.server.emulator.jenkins
        item = jenkins.items.get(item_id)
        if item is None or not permissions.may_discover(item.job.path):  # Queue.Item.getApi: null without Discover
            return not_found()
        if rest == ["api", "json"]:
            if not permissions.may_read(item.job.path):  # ... and AccessDeniedException without Read
                return access_denied(f"Please log in to access {Jenkins.relative_url(item.job.path)}")
            return api_answer(queue_item_json(jenkins, item), tree)
        if rest == []:
            text = f"Queue item exists. For details check, for example, {jenkins.base_url}queue/item/{item_id}/api/json?tree=cancelled,executable[url]"
            return Response(200, text.encode(), "text/plain;charset=utf-8")
        if rest == ["cancelQueue"] and method == "POST":
            jenkins.cancel(item)
            return Response(204, b"", None)
        return not_found()

    def _cancel(self, method: str, form: dict[str, list[str]], permissions: Permissions) -> Response:
        jenkins = self.server.emulator.jenkins
        if method != "POST":
            return requires_post()
        raw = (form.get("id") or [""])[0]
        item = jenkins.items.get(int(raw)) if raw.isdigit() else None
        if item is None or not permissions.may_read(item.job.path):  # Queue.doCancelItem hides unreadable items
            return oops(404, f"Provided id ({raw}) not found")
        if not permissions.may_cancel(item.job.path):
            return oops(422, f"Item for id ({raw}) is not cancellable")
        if jenkins.cancel(item):
            return Response(204, b"", None)
        return oops(500, f"Could not cancel run for id {raw}")

    def _job_route(self, method: str, segments: list[str], form: dict[str, list[str]], tree: str | None, user: str,
                   permissions: Permissions) -> Response:
        jenkins = self.server.emulator.jenkins
        names: list[str] = []
        position = 0
        while position + 1 < len(segments) and segments[position] == "job":
            names.append(segments[position + 1])
            position += 2
            found = jenkins.find("/".join(names))
            if found is None:
                return not_found()
            # Jenkins finds items whatever the case of the URL's names; permissions are the item's own.
            path = found.path
            names = path.split("/")
            # Jenkins.getItem / AbstractFolder.getItem: without Item/Read, Discover gets a 403, else it is a 404.
            if not permissions.may_read(path):
                if permissions.may_discover(path):
                    return access_denied(f"Please login to access job {names[-1]}")
                return not_found()
            if isinstance(jenkins.find(path), Job):
                break
        thing = jenkins.find("/".join(names))
        rest = segments[position:]
        if isinstance(thing, Folder):
            if rest == ["api", "json"]:
                return api_answer(folder_json(jenkins, thing, permissions), tree, shallow_children=True)
            return Response(200, html_page(thing.name, "Folder")) if rest == [] else not_found()
        if not isinstance(thing, Job):
            return not_found()
        job = thing
        if rest == ["api", "json"]:
            return api_answer(job_json(jenkins, job, tree), tree, shallow_children=True)
        if rest == []:
            return Response(200, html_page(job.name, "Project"))
        if rest == ["buildWithParameters"]:
            return self._build_with_parameters(method, job, form, user, permissions)
        if rest == ["build"]:
            return self._build(method, job, form, user, permissions)
        if rest and rest[0].isdigit():
            build = job.builds.get(int(rest[0]))
            if build is None:
                return not_found()
            if rest[1:] == ["api", "json"]:
                return api_answer(build_json(jenkins, build), tree)
            if rest[1:] == ["stop"]:
                if method != "POST":
                    return requires_post()
                jenkins.stop(build)
                referer = self.headers.get("Referer")
                return Response(302, b"", None, headers=[("Location", referer or jenkins.url_of(build))])
            if rest[1:] == []:
                return Response(200, html_page(f"{job.name} #{build.number}", "Build"))
        return not_found()

    @staticmethod
    def _build_denied(job: Job, user: str, permissions: Permissions) -> Response | None:
        """``job.checkPermission(Item.BUILD)``."""
        if permissions.may_build(job.path):
            return None
        return missing_permission(user, "hudson.model.Item.Build", "Job/Build")

    def _location(self, relative: str) -> str:
        """Stapler builds Location from the request's own scheme/host/port, not from the root URL."""
        jenkins = self.server.emulator.jenkins
        host, port = self.server.server_address[:2]
        origin = jenkins.settings.location_base or f"http://{self.headers.get('Host') or f'{host}:{port}'}"
        return origin.rstrip("/") + jenkins.settings.context_path + relative

    def _single_values(self, form: dict[str, list[str]], job: Job) -> dict[str, str] | Response:
        values: dict[str, str] = {}
        for definition in job.parameters:
            given = form.get(definition.name)
            if given is not None and len(given) > 1:
                return oops(500, f"java.lang.IllegalArgumentException: Illegal number of parameter values for {definition.name}: {len(given)}")
            if given:
                values[definition.name] = given[0]
        return values

    def _delay_and_overrides(self, form: dict[str, list[str]]) -> tuple[float | None, dict[str, str]]:
        delay = None
        raw_delay = (form.get("delay") or [None])[0]
        if raw_delay:
            match = re.fullmatch(r"\s*(\d+)\s*(secs?|)\s*", raw_delay)
            if match:
                delay = float(int(match.group(1)) if match.group(2) else int(match.group(1)) // 1000)
        # Emulator-only knobs, read from the raw request so they work even when the job does not declare them.
        overrides = {name: form[name][0] for name in OVERRIDES if form.get(name)}
        return delay, overrides

    def _build_with_parameters(self, method: str, job: Job, form: dict[str, list[str]], user: str, permissions: Permissions) -> Response:
        jenkins = self.server.emulator.jenkins
        # BuildAuthorizationToken.checkPermission: the Build permission first, then POST.
        denied = self._build_denied(job, user, permissions)
        if denied:
            return denied
        if method != "POST":
            return requires_post()
        if not jenkins.is_buildable(job):
            return send_error(409, f"{job.path} is not buildable")
        if not job.parameterized:
            return send_error(400, f"{job.path} is not parameterized")
        values = self._single_values(form, job)
        if isinstance(values, Response):
            return values
        if job.refuse:
            jenkins.counters["trigger_requests"] += 1
            return Response(302, b"", None, headers=[("Location", jenkins.url_of(job))])
        delay, overrides = self._delay_and_overrides(form)
        item, created = jenkins.schedule(job, values, user, delay, overrides)
        return Response(201 if created else 303, b"", None, headers=[("Location", self._location(f"queue/item/{item.id}/"))])

    def _build(self, method: str, job: Job, form: dict[str, list[str]], user: str, permissions: Permissions) -> Response:
        jenkins = self.server.emulator.jenkins
        if not jenkins.is_buildable(job):
            return send_error(409, f"{job.path} is not buildable")
        if method != "POST":
            if job.parameterized:
                return Response(405, html_page(job.name, "This build requires parameters:"))
            return requires_post()
        denied = self._build_denied(job, user, permissions)
        if denied:
            return denied
        delay, overrides = self._delay_and_overrides(form)
        if job.parameterized:
            raw = (form.get("json") or [None])[0]
            if raw is None:
                others = [name for name in form if name not in ("delay",)]
                return oops(400, "This page expects a form submission" if others else "Nothing is submitted")
            try:
                submitted = {p["name"]: str(p.get("value", "")) for p in json.loads(raw).get("parameter", [])}
            except (ValueError, AttributeError, KeyError, TypeError):
                return oops(400, "Failed to parse form data")
            item, created = jenkins.schedule(job, submitted, user, delay, overrides)
            # Queue.schedule returns null for a merged request: then a 302 to the job page.
            return Response(201 if created else 302, b"", None, headers=[("Location", jenkins.url_of(job))])
        if job.refuse:
            return Response(302, b"", None, headers=[("Location", jenkins.url_of(job))])
        item, _created = jenkins.schedule(job, {}, user, delay, overrides)
        return Response(201, b"", None, headers=[("Location", self._location(f"queue/item/{item.id}/"))])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 drops connections under a thread pool of triggers
    allow_reuse_address = True
    emulator: JenkinsEmulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dropped connections are part of the job; do not print tracebacks


class JenkinsEmulator:
    """A Jenkins on 127.0.0.1 for tests and demos. ``start()`` returns its base URL."""

    def __init__(self, config: dict[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = json.loads(json.dumps(config if config is not None else DEFAULT_CONFIG))
        problem = config_problem(self.config)
        if problem:
            raise ValueError(problem)
        self.host, self.port = host, port
        self.jenkins = Jenkins(self.config)
        self.faults = Faults()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def start(self) -> str:
        """Listen and serve on a thread; returns the base URL."""
        self._server = _Server((self.host, self.port), _Handler)
        self._server.emulator = self
        host, port = self._server.server_address[:2]
        self.port = port
        self.base_url = f"http://{host}:{port}{self.jenkins.settings.context_path}"
        self.jenkins.server_url = self.base_url
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="emulator-http", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving (releasing the requests faults hold), the scheduler and the notifier."""
        self.faults.release_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.jenkins.close()

    def __enter__(self) -> JenkinsEmulator:
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------------
    # fault injection

    def add_fault(self, **spec: Any) -> Fault:
        """Inject a fault (the fields of ``Fault``), e.g. ``add_fault(path="buildWithParameters$", status=500, times=1)``."""
        return self.faults.add(**spec)

    def clear_faults(self) -> None:
        """Remove every fault (releasing the requests they hold) and end any restart window."""
        self.faults.clear()

    def release_held(self) -> None:
        """Let every request a ``hold`` fault keeps go on: Jenkins acts on it now (``Fault.release`` for one)."""
        self.faults.release_all()

    def restart(self, window_seconds: float = 1.0, kind: str = "restarting") -> None:
        """Answer 503 for ``window_seconds`` (kind "restarting" or "starting"), then come back like a
        restarted Jenkins: new session id and cookie name, crumbs invalid, left items forgotten."""
        control.restart(self.jenkins, self.faults, window_seconds, kind)

    # ------------------------------------------------------------------------------------------------------
    # conveniences for tests

    def set_job(self, path: str, **changes: Any) -> Job:
        """Change a job at run time: disabled, concurrent, duration_seconds, result, refuse, notify, downstream..."""
        return self.jenkins.set_job(path, **changes)

    def add_job(self, spec: dict[str, Any]) -> Job:
        """Add a job from a spec of the config's shape."""
        return self.jenkins.add_job(spec)

    def configure(self, **changes: Any) -> None:
        """Change top-level settings (and "notification", "quieting_down") at run time."""
        self.jenkins.configure(**changes)

    def set_user(self, name: str, **changes: Any) -> dict[str, Any]:
        """Add a user or change its api_token, password or permissions, e.g. ``set_user("bot", permissions="all")``."""
        return control.set_user(self.jenkins, name, **changes)

    def counters(self) -> dict[str, Any]:
        """What ``GET /_emulator/counters`` answers."""
        return control.counters_json(self.jenkins)

    def triggers_for(self, dispatch_id: str) -> int:
        """Distinct queue items created with this DISPATCH_ID (merged requests do not count)."""
        return self.counters()["triggers_by_dispatch_id"].get(dispatch_id, 0)

    def item_times(self, job: str) -> list[float]:
        """When each queue item of ``job`` was created (epoch seconds, oldest first; merged requests make none)."""
        return self.counters()["items_created_at_by_job"].get(job, [])

    def peak_in_flight(self, job: str | None = None) -> int:
        """The most items queued or building at once, overall or for one job."""
        counters = self.counters()
        return counters["peak_in_flight"] if job is None else counters["peak_in_flight_by_job"].get(job, 0)

    def builds(self, job: str) -> list[Build]:
        """The job's builds, oldest first."""
        with self.jenkins.lock:
            return sorted(self.jenkins.jobs[job].builds.values(), key=lambda b: b.number)

    @property
    def notifications(self) -> list[dict[str, Any]]:
        """The notification documents delivered so far (any HTTP answer counts)."""
        return list(self.jenkins.notifier.delivered)

    def wait_until(self, predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> bool:
        """Poll ``predicate`` until it holds or ``timeout`` passes; returns its last value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(interval)
        return bool(predicate())

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Until nothing is queued or running and every notification has been delivered."""
        return self.wait_until(lambda: self.jenkins.in_flight() == 0 and self.jenkins.notifier.pending() == 0, timeout)
