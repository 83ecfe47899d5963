"""The emulated Jenkins' state and rules: jobs, folders, users and their permissions, the queue, executors,
builds, and the Notification plugin's part in a build's life.

All state is guarded by ``Jenkins.lock``; a scheduler thread moves items through the queue the way
``hudson.model.Queue`` does (waiting → blocked/buildable → left) and finishes builds on time.
Must not render answers (``views.py`` does), parse requests (``server.py``) or know of the control API
(``control.py``): those read and call this module, never the other way round.
"""

from __future__ import annotations

import fnmatch
import hashlib
import secrets
import threading
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .config import Settings
from .notify import NotificationSettings, Notifier, notification_payload

RESULTS = ("SUCCESS", "UNSTABLE", "FAILURE", "NOT_BUILT", "ABORTED")

_RAW_ENCODE_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$&'()*+,-._=@")


def raw_encode(segment: str) -> str:
    """Util.rawEncode: everything but alphanumerics and !$&'()*+,-._=@ as UTF-8 %XX, uppercase."""
    return "".join(c if c in _RAW_ENCODE_SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in segment)


def name_key(path: str) -> str:
    """A job or folder path as Jenkins finds items: ``Jenkins.items`` and a folder's items are maps ordered by
    ``String.CASE_INSENSITIVE_ORDER``, which compares two names character by character, equal when their upper
    cases or the lower cases of those are equal. So ``DEPLOY`` is ``deploy``; each segment is looked up in its
    folder that way, which the whole path's key gives ('/' has no case)."""
    key = []
    for char in path:
        upper = char.upper()
        upper = upper if len(upper) == 1 else char  # Java maps one char to one char: no "SS" for "ß"
        lower = upper.lower()
        key.append(lower if len(lower) == 1 else upper)
    return "".join(key)


def now_ms() -> int:
    """The wall clock in milliseconds, as Jenkins' timestamps are."""
    return int(time.time() * 1000)


def time_span(seconds: float) -> str:
    """Jenkins' Util.getTimeSpanString, close enough for ``why`` texts."""
    if seconds < 1:
        return f"{max(0, int(seconds * 1000))} ms"
    if seconds < 10:
        return f"{seconds:.1f} sec"
    if seconds < 60:
        return f"{int(seconds)} sec"
    return f"{int(seconds // 60)} min {int(seconds % 60)} sec"


@dataclass
class ParameterDefinition:
    """One parameter a job declares: string, text, choice, boolean or password."""

    name: str
    type: str = "string"
    default: Any = ""
    choices: list[str] = field(default_factory=list)

    def value_from(self, raw: str | None) -> Any:
        """The value a request's raw text gives, or the default when the request leaves it out."""
        if self.type == "boolean":
            return (raw.lower() == "true") if raw is not None else bool(self.default)
        if self.type == "choice" and raw is None:
            return self.choices[0] if self.choices else ""
        return raw if raw is not None else ("" if self.default is None else str(self.default))


@dataclass(eq=False)  # identity, not value: items are keyed and compared as objects
class Folder:
    """A folder (``com.cloudbees.hudson.plugins.folder.Folder``); disabling one makes the jobs in it unbuildable."""

    path: str
    disabled: bool = False

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(eq=False)  # identity, not value: items are keyed and compared as objects
class Job:
    """A FreeStyle or Pipeline job: how its builds behave, and the builds it has had."""

    path: str
    kind: str = "freestyle"
    parameters: list[ParameterDefinition] = field(default_factory=list)
    disabled: bool = False
    concurrent: bool = True
    duration_seconds: float = 0.2
    result: str = "SUCCESS"
    quiet_period_seconds: float | None = None
    refuse: bool = False  # a QueueDecisionHandler vetoes every trigger: 302 to the job page
    notify: bool = True  # whether the Notification plugin is configured on this job
    downstream: list[dict[str, Any]] = field(default_factory=list)  # see downstream_specs
    next_number: int = 1
    builds: dict[int, Build] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def parameterized(self) -> bool:
        return bool(self.parameters)


@dataclass(eq=False)  # identity, not value: items are keyed and compared as objects
class Build:
    """One build: planned when it starts (duration, result), finished by the scheduler."""

    job: Job
    number: int
    queue_id: int
    parameters: list[tuple[ParameterDefinition, Any]]
    causes: int
    started: float
    planned_seconds: float
    planned_result: str
    quiet: bool  # no notifications for this build
    user: str
    result: str | None = None
    building: bool = True
    duration_ms: int = 0
    aborted: bool = False

    @property
    def timestamp_ms(self) -> int:
        return int(self.started * 1000)


@dataclass(eq=False)  # identity, not value: items are keyed and compared as objects
class QueueItem:
    """A queue item from its creation to the moment it leaves the queue (built or cancelled)."""

    id: int
    job: Job
    parameters: list[tuple[ParameterDefinition, Any]]
    user: str
    due: float
    in_queue_since_ms: int
    overrides: dict[str, str]
    causes: int = 1
    state: str = "waiting"  # waiting · blocked · buildable · left
    why: str | None = None
    buildable_since_ms: int | None = None
    left_at: float | None = None
    cancelled: bool = False
    build: Build | None = None

    def parameter_key(self) -> tuple[tuple[str, Any], ...]:
        return tuple((definition.name, value) for definition, value in self.parameters)


OVERRIDES = ("EMULATOR_RESULT", "EMULATOR_DURATION", "EMULATOR_NO_NOTIFY")  # per-build steering, not parameters
DOWNSTREAM_WHEN = ("started", "completed")


def downstream_specs(raw: Any) -> list[dict[str, Any]]:
    """A job's ``downstream`` list, checked: jobs this job queues when its build starts or completes.

    Each entry: ``{"job": "folder/child", "when": "started" | "completed" (default), "pass_parameters": true
    (default: "current build parameters", DISPATCH_ID included), "parameters": {"NAME": "value"}}`` — the
    Parameterized Trigger plugin's "Trigger parameterized build on other projects", or a Pipeline's
    ``build job: …, parameters: params…, wait: false``. Raises ValueError naming what is wrong.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"downstream must be a list of {{'job': ..., 'when': ...}} objects, got {type(raw).__name__}")
    specs = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("job"), str) or not entry["job"]:
            raise ValueError(f"each downstream entry needs a 'job' path, got {entry!r}")
        unknown = set(entry) - {"job", "when", "pass_parameters", "parameters"}
        if unknown:
            raise ValueError(f"downstream entry for {entry['job']!r} has unknown keys {sorted(unknown)}")
        if entry.get("when", "completed") not in DOWNSTREAM_WHEN:
            raise ValueError(f"downstream 'when' must be one of {', '.join(DOWNSTREAM_WHEN)}, got {entry.get('when')!r}")
        if not isinstance(entry.get("parameters", {}), dict):
            raise ValueError(f"downstream 'parameters' must be an object of name → value, got {entry.get('parameters')!r}")
        specs.append(dict(entry))
    return specs


PERMISSION_DENIALS = ("deny_build", "deny_read", "deny_discover")


@dataclass
class Permissions:
    """What one user may do, as a matrix-based authorization strategy would grant it.

    Built from a user spec's ``permissions``: ``"all"``; ``"read"`` (Overall/Read and Job/Read everywhere,
    no Job/Build, no Job/Cancel); or an object of per-job denials on top of "all". Each denial lists job or
    folder paths, or ``fnmatch`` patterns over full paths; a denial on a folder covers everything in it, as
    folder-level permissions are inherited. ``deny_read`` keeps Job/Discover, ``deny_discover`` takes both.
    """

    build_anything: bool = True
    cancel_anything: bool = True
    deny_build: list[str] = field(default_factory=list)
    deny_read: list[str] = field(default_factory=list)
    deny_discover: list[str] = field(default_factory=list)

    @classmethod
    def from_spec(cls, spec: Any) -> Permissions:
        if spec is None or spec == "all":
            return cls()
        if spec == "read":
            return cls(build_anything=False, cancel_anything=False)
        if not isinstance(spec, dict):
            raise ValueError(f'permissions must be "all", "read" or an object of {", ".join(PERMISSION_DENIALS)}, got {spec!r}')
        unknown = set(spec) - set(PERMISSION_DENIALS)
        if unknown:
            raise ValueError(f"unknown permission keys {sorted(unknown)}: use {', '.join(PERMISSION_DENIALS)}")
        for key, patterns in spec.items():
            if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
                raise ValueError(f"{key} must be a list of job paths or patterns, got {patterns!r}")
        return cls(**{key: list(spec.get(key, [])) for key in PERMISSION_DENIALS})

    def as_spec(self) -> str | dict[str, list[str]]:
        if not self.build_anything:
            return "read"
        if not any(getattr(self, key) for key in PERMISSION_DENIALS):
            return "all"
        return {key: list(getattr(self, key)) for key in PERMISSION_DENIALS}

    @staticmethod
    def _denied(patterns: list[str], path: str) -> bool:
        parts = path.split("/")
        scopes = ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]  # the item and its folders
        return any(fnmatch.fnmatchcase(scope, pattern) for pattern in patterns for scope in scopes)

    def may_discover(self, path: str) -> bool:
        return not self._denied(self.deny_discover, path)

    def may_read(self, path: str) -> bool:
        return self.may_discover(path) and not self._denied(self.deny_read, path)

    def may_build(self, path: str) -> bool:
        return self.build_anything and self.may_read(path) and not self._denied(self.deny_build, path)

    def may_cancel(self, path: str) -> bool:
        return self.cancel_anything and self.may_read(path)


FULL_PERMISSIONS = Permissions()  # anonymous when anonymous_read is on, and users without a spec


class Jenkins:
    """State and scheduling. The HTTP layer (``server.py``) translates requests into these calls."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self.settings = Settings.from_config(config)
        self.users: dict[str, dict[str, Any]] = {}
        for name, spec in (config.get("users") or {}).items():
            self.set_user(name, **spec)
        self.folders: dict[str, Folder] = {}
        self.jobs: dict[str, Job] = {}
        self._paths: dict[str, str] = {}  # name_key(path) → the path as the job or folder was created
        for spec in config.get("folders") or ():
            self.add_folder(spec["path"] if isinstance(spec, dict) else spec, disabled=bool(isinstance(spec, dict) and spec.get("disabled")))
        for spec in config.get("jobs") or ():
            self.add_job(spec)
        self.items: dict[int, QueueItem] = {}
        self.next_queue_id = self.settings.first_queue_id
        self.quieting_down = False
        self.salt = secrets.token_hex(16)
        self.session_hash = secrets.token_hex(4)
        self.cookie_name = "JSESSIONID." + secrets.token_hex(4)
        self.sessions: dict[str, str] = {}  # session id → user
        self.server_url = "http://127.0.0.1/"
        self.counters: dict[str, Any] = {}
        self.reset_counters()
        self.notifier = Notifier()
        self.notifier.configure(NotificationSettings.from_config(config.get("notification")))
        self._running = True
        self._scheduler = threading.Thread(target=self._schedule_forever, name="emulator-queue", daemon=True)
        self._scheduler.start()

    # ------------------------------------------------------------------------------------------------------
    # configuration

    def add_folder(self, path: str, disabled: bool = False) -> Folder:
        with self.lock:
            path = self._in_existing_folders(path)
            parts = path.split("/")
            for depth in range(1, len(parts) + 1):
                prefix = "/".join(parts[:depth])
                if prefix not in self.folders:
                    if isinstance(self.find(prefix), Job):
                        raise ValueError(f"cannot make folder {prefix!r}: a job already exists with that name")
                    self.folders[prefix] = Folder(prefix)
                    self._paths[name_key(prefix)] = prefix
            folder = self.folders[path]
            folder.disabled = disabled or folder.disabled
            return folder

    def _in_existing_folders(self, path: str) -> str:
        """``path`` with each leading segment that names an existing item spelled as that item is (Jenkins
        creates an item inside the folder it finds, whatever case the request used)."""
        parts = path.split("/")
        for depth in range(len(parts), 0, -1):
            found = self._paths.get(name_key("/".join(parts[:depth])))
            if found is not None:
                return "/".join([found, *parts[depth:]])
        return path

    def add_job(self, spec: dict[str, Any]) -> Job:
        parameters = []
        for raw in spec.get("parameters") or ():
            if isinstance(raw, str):
                raw = {"name": raw}
            parameters.append(ParameterDefinition(raw["name"], raw.get("type", "string"), raw.get("default", False if raw.get("type") == "boolean" else ""), list(raw.get("choices") or ())))
        if spec.get("parameterized") is False:
            parameters = []
        job = Job(
            path=spec["path"],
            kind=spec.get("kind", "freestyle"),
            parameters=parameters,
            disabled=bool(spec.get("disabled", False)),
            concurrent=bool(spec.get("concurrent", spec.get("kind") == "pipeline")),
            duration_seconds=float(spec.get("duration_seconds", 0.2)),
            result=spec.get("result", "SUCCESS"),
            quiet_period_seconds=spec.get("quiet_period_seconds"),
            refuse=bool(spec.get("refuse", False)),
            notify=bool(spec.get("notify", True)),
            downstream=downstream_specs(spec.get("downstream")),
        )
        with self.lock:
            if "/" in job.path:
                job.path = self.add_folder(job.path.rsplit("/", 1)[0]).path + "/" + job.path.rsplit("/", 1)[1]
            existing = self._paths.get(name_key(job.path))
            if existing is not None and existing != job.path:
                # ItemGroupMixIn.createProject → Jenkins.checkGoodName/… "A job already exists with the name"
                raise ValueError(f"A job already exists with the name {existing!r}: {job.path!r} differs only in case")
            if job.path in self.folders:
                raise ValueError(f"A folder already exists with the name {job.path!r}")
            self.jobs[job.path] = job
            self._paths[name_key(job.path)] = job.path
        return job

    def set_job(self, path: str, **changes: Any) -> Job:
        with self.lock:
            job = self.find(path)
            if not isinstance(job, Job):
                raise KeyError(path)
            for name, value in changes.items():
                if name not in ("disabled", "concurrent", "duration_seconds", "result", "quiet_period_seconds", "refuse", "notify", "downstream"):
                    raise ValueError(f"cannot set {name!r} on a job")
                setattr(job, name, downstream_specs(value) if name == "downstream" else value)
            self._wake.notify_all()
            return job

    def set_user(self, name: str, **changes: Any) -> dict[str, Any]:
        """Add a user, or change an existing one's ``api_token``, ``password`` or ``permissions`` (see Permissions)."""
        unknown = set(changes) - {"api_token", "password", "permissions"}
        if unknown:
            raise ValueError(f"cannot set {sorted(unknown)} on a user: api_token, password, permissions")
        permissions = Permissions.from_spec(changes["permissions"]) if "permissions" in changes else None
        with self.lock:
            account = self.users.setdefault(name, {"api_token": None, "password": None, "permissions": Permissions()})
            account.update({k: v for k, v in changes.items() if k != "permissions"})
            if permissions is not None:
                account["permissions"] = permissions
            return account

    def permissions_of(self, user: str | None) -> Permissions:
        """Anonymous and users without a spec may do everything the checks before this one let through."""
        account = self.users.get(user or "")
        return account["permissions"] if account else FULL_PERMISSIONS

    def configure(self, **changes: Any) -> None:
        with self.lock:
            for name, value in changes.items():
                if name == "notification":
                    self.notifier.configure(NotificationSettings.from_config(value))
                elif name == "quieting_down":
                    self.quieting_down = bool(value)
                elif name in Settings.__dataclass_fields__:
                    setattr(self.settings, name, value)
                else:
                    raise ValueError(f"unknown emulator setting {name!r}")
            self._wake.notify_all()

    def reset_counters(self) -> None:
        with self.lock:
            self.counters = {
                "trigger_requests": 0,
                "items_created": 0,
                "merged_requests": 0,
                "builds_started": 0,
                "triggers_by_dispatch_id": defaultdict(int),
                "triggers_by_parameter": defaultdict(lambda: defaultdict(int)),
                "peak_in_flight": 0,
                "peak_in_flight_by_job": defaultdict(int),
                "unavailable_answers": 0,  # requests answered 503 during a restart window: the outage, as seen
                "items_created_at_by_job": defaultdict(list),  # job path → when each of its items was created
            }

    def restart(self) -> None:
        """What survives a Jenkins restart: waiting items keep their ids; sessions and left items do not."""
        with self.lock:
            self.sessions.clear()
            self.session_hash = secrets.token_hex(4)
            self.cookie_name = "JSESSIONID." + secrets.token_hex(4)
            for item_id in [i for i, item in self.items.items() if item.state == "left"]:
                del self.items[item_id]

    def close(self) -> None:
        with self.lock:
            self._running = False
            self._wake.notify_all()
        self.notifier.close()

    # ------------------------------------------------------------------------------------------------------
    # lookups and urls

    @property
    def base_url(self) -> str:
        return self.settings.root_url or self.server_url

    def find(self, path: str) -> Job | Folder | None:
        """The job or folder at ``path``, whatever the case of its names (see ``name_key``)."""
        found = self._paths.get(name_key(path))
        return None if found is None else (self.jobs.get(found) or self.folders.get(found))

    def is_buildable(self, job: Job) -> bool:
        if job.disabled:
            return False
        parts = job.path.split("/")
        return not any(self.folders.get("/".join(parts[:d]), Folder("")).disabled for d in range(1, len(parts)))

    @staticmethod
    def relative_url(path: str) -> str:
        return "".join(f"job/{raw_encode(segment)}/" for segment in path.split("/"))

    def url_of(self, thing: Job | Folder | Build) -> str:
        if isinstance(thing, Build):
            return f"{self.base_url}{self.relative_url(thing.job.path)}{thing.number}/"
        return self.base_url + self.relative_url(thing.path)

    def crumb_for(self, user: str, session_id: str) -> str:
        return hashlib.sha256(f"{self.salt}{user};{session_id}".encode()).hexdigest()

    def new_session(self, user: str) -> str:
        with self.lock:
            session_id = secrets.token_urlsafe(18)
            self.sessions[session_id] = user
            return session_id

    # ------------------------------------------------------------------------------------------------------
    # triggering

    def schedule(self, job: Job, values: dict[str, str], user: str, delay_seconds: float | None, overrides: dict[str, str],
                 *, downstream: bool = False) -> tuple[QueueItem, bool]:
        """``Queue.schedule2``: returns (item, created). Identical parameters merge while still queued.

        ``downstream``: queued by another build, not by a trigger request, so the trigger counters (requests,
        merges, per DISPATCH_ID and per parameter) leave it out; ``items_created`` counts it.
        """
        with self.lock:
            parameters = [(definition, definition.value_from(values.get(definition.name))) for definition in job.parameters]
            if not downstream:
                self.counters["trigger_requests"] += 1
            key = tuple((d.name, v) for d, v in parameters)
            quiet = delay_seconds if delay_seconds is not None else (job.quiet_period_seconds if job.quiet_period_seconds is not None else self.settings.quiet_period_seconds)
            due = time.time() + float(quiet)
            for item in sorted(self.items.values(), key=lambda i: i.id):
                if item.job is job and item.state != "left" and item.parameter_key() == key:
                    item.causes += 1
                    if item.state == "waiting" and due < item.due:
                        item.due = due
                    if not downstream:
                        self.counters["merged_requests"] += 1
                    self._wake.notify_all()
                    return item, False
            item = QueueItem(self.next_queue_id, job, parameters, user, due, now_ms(), overrides)
            self.next_queue_id += 1
            item.why = f"In the quiet period. Expires in {time_span(due - time.time())}"
            self.items[item.id] = item
            self.counters["items_created"] += 1
            self.counters["items_created_at_by_job"][job.path].append(time.time())
            for definition, value in parameters if not downstream else ():
                text = parameter_text(value)
                self.counters["triggers_by_parameter"][definition.name][text] += 1
                if definition.name == "DISPATCH_ID":
                    self.counters["triggers_by_dispatch_id"][text] += 1
            self._note_in_flight()
            self._wake.notify_all()
            return item, True

    def cancel(self, item: QueueItem) -> bool:
        with self.lock:
            if item.state == "left":
                return False
            item.state, item.cancelled, item.left_at, item.why = "left", True, time.time(), None
            self._note_in_flight()
            return True

    def stop(self, build: Build) -> None:
        with self.lock:
            if build.building:
                build.aborted = True
                self._wake.notify_all()

    # ------------------------------------------------------------------------------------------------------
    # the scheduler: Queue.maintain + executors

    def in_flight(self, job: Job | None = None) -> int:
        with self.lock:
            queued = sum(1 for i in self.items.values() if i.state != "left" and (job is None or i.job is job))
            jobs = [job] if job else list(self.jobs.values())
            return queued + sum(1 for j in jobs for b in j.builds.values() if b.building)

    def _note_in_flight(self) -> None:
        self.counters["peak_in_flight"] = max(self.counters["peak_in_flight"], self.in_flight())
        for job in {i.job for i in self.items.values()} | {b.job for j in self.jobs.values() for b in j.builds.values() if b.building}:
            by_job = self.counters["peak_in_flight_by_job"]
            by_job[job.path] = max(by_job[job.path], self.in_flight(job))

    def _schedule_forever(self) -> None:
        with self.lock:
            while self._running:
                try:
                    self.maintain()
                except Exception:  # keep scheduling: one bad tick must not freeze the queue for the whole test
                    traceback.print_exc()
                self._wake.wait(0.01)

    def maintain(self) -> None:
        with self.lock:
            now = time.time()
            retention = self.settings.left_item_retention_seconds
            for item_id in [i for i, item in self.items.items() if item.state == "left" and item.left_at is not None and now - item.left_at >= retention]:
                del self.items[item_id]
            for job in self.jobs.values():
                for build in job.builds.values():
                    if build.building and (build.aborted or now >= build.started + build.planned_seconds):
                        self._finish(build, now)
            running = sum(1 for j in self.jobs.values() for b in j.builds.values() if b.building)
            starting_jobs: set[str] = set()
            for item in sorted((i for i in self.items.values() if i.state != "left"), key=lambda i: i.id):
                if now < item.due:
                    item.state, item.why = "waiting", f"In the quiet period. Expires in {time_span(item.due - now)}"
                    continue
                job = item.job
                if not job.concurrent:
                    current = next((b for b in job.builds.values() if b.building), None)
                    if current is not None or job.path in starting_jobs:
                        if item.state != "blocked":
                            item.buildable_since_ms = item.buildable_since_ms or now_ms()
                        item.state = "blocked"
                        number = current.number if current else job.next_number - 1
                        eta = max(0.0, current.started + current.planned_seconds - now) if current else 0.0
                        item.why = f"Build #{number} is already in progress (ETA: {time_span(eta)})"
                        continue
                if item.state not in ("buildable",):
                    item.buildable_since_ms = item.buildable_since_ms or now_ms()
                item.state = "buildable"
                if self.quieting_down:
                    item.why = "Jenkins is about to shut down"
                    continue
                if running >= self.settings.executors:
                    item.why = "Waiting for next available executor"
                    continue
                self._start(item, now)
                running += 1
                starting_jobs.add(job.path)
            self._note_in_flight()

    def _start(self, item: QueueItem, now: float) -> None:
        job = item.job
        item.state, item.left_at, item.why = "left", now, None
        if not self.is_buildable(job):
            return  # createExecutable() returns null for a disabled job: a LeftItem without executable
        overrides = item.overrides
        duration = float(overrides.get("EMULATOR_DURATION", job.duration_seconds))
        result = overrides.get("EMULATOR_RESULT", job.result).upper()
        build = Build(job, job.next_number, item.id, item.parameters, item.causes, now, duration, result if result in RESULTS else "SUCCESS",
                      overrides.get("EMULATOR_NO_NOTIFY", "").lower() == "true", item.user)
        job.next_number += 1
        job.builds[build.number] = build
        item.build = build
        self.counters["builds_started"] += 1
        queued_since = (item.buildable_since_ms or now_ms()) if item.buildable_since_ms else now_ms()
        self._notify(build, "QUEUED", queued_since)
        self._notify(build, "STARTED", build.timestamp_ms)
        self._queue_downstream(build, "started")

    def _finish(self, build: Build, now: float) -> None:
        build.result = "ABORTED" if build.aborted else build.planned_result
        build.duration_ms = max(1, int((now - build.started) * 1000))
        build.building = False
        self._queue_downstream(build, "completed")  # a publisher: it runs before the COMPLETED notification
        self._notify(build, "COMPLETED", build.timestamp_ms + build.duration_ms)
        self._notify(build, "FINALIZED", now_ms())

    def _queue_downstream(self, build: Build, when: str) -> None:
        """Queue the jobs ``build.job.downstream`` names for this point, as the parent build would.

        "Current build parameters" hands the child every parameter of this build (the child keeps those it
        declares, as Jenkins does), so a dispatched parent's DISPATCH_ID reaches the child and comes back
        in the child's notifications. EMULATOR_* overrides steer one build and are not parameters: they are
        not passed on, unless a spec's ``parameters`` sets them for the child. A missing child job is
        skipped, as Jenkins only logs it in the parent's console.
        """
        for spec in build.job.downstream:
            child = self.find(spec["job"])
            if spec.get("when", "completed") != when or not isinstance(child, Job):
                continue
            values = {d.name: parameter_text(v) for d, v in build.parameters} if spec.get("pass_parameters", True) else {}
            extra = {str(k): parameter_text(v) for k, v in (spec.get("parameters") or {}).items()}
            values.update({k: v for k, v in extra.items() if k not in OVERRIDES})
            overrides = {k: v for k, v in extra.items() if k in OVERRIDES}
            self.schedule(child, values, build.user, None, overrides, downstream=True)

    def _notify(self, build: Build, phase: str, timestamp_ms: int) -> None:
        """The Notification plugin's RunListener: one document per phase, if the job has the plugin configured."""
        if not build.job.notify:
            return
        job_url = self.relative_url(build.job.path)
        parameters = {d.name: parameter_text(v) for d, v in build.parameters if d.type != "password"} if build.parameters else None
        payload = notification_payload(job_name=build.job.name, job_url=job_url, base_url=self.base_url, number=build.number,
                                       queue_id=build.queue_id, phase=phase, timestamp_ms=timestamp_ms, duration_ms=build.duration_ms,
                                       result=build.result, parameters=parameters)
        self.notifier.publish(build.job.path, payload, suppressed=build.quiet)


def parameter_text(value: Any) -> str:
    """A parameter value as Jenkins prints it: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
