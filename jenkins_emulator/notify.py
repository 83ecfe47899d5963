"""The Notification plugin (docs/jenkins.md#notifications): its settings, its JSON document, and its HTTP delivery
(JSON POSTs from a background thread, failures ignored).

Works on plain values handed over by the model when a build changes phase; must not import the rest of the
package (the model imports this module, not the other way round).
"""

from __future__ import annotations

import base64
import json
import queue
import random
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit


@dataclass
class NotificationSettings:
    url: str | None = None
    drop_probability: float = 0.0
    duplicate_probability: float = 0.0
    seed: int = 0
    drop_jobs: list[str] = field(default_factory=list)
    drop_phases: list[str] = field(default_factory=list)
    timeout_seconds: float = 5.0

    @classmethod
    def from_config(cls, raw: dict[str, Any] | str | None) -> NotificationSettings:
        if raw is None:
            return cls()
        if isinstance(raw, str):
            return cls(url=raw)
        known = {name: raw[name] for name in cls.__dataclass_fields__ if name in raw}
        return cls(**known)


def notification_payload(*, job_name: str, job_url: str, base_url: str, number: int, queue_id: int, phase: str,
                         timestamp_ms: int, duration_ms: int, result: str | None, parameters: dict[str, str] | None) -> dict[str, Any]:
    """The document the plugin POSTs for one build phase; ``job_url`` is relative to ``base_url``; ``parameters``
    (passwords left out) is None for a build without any."""
    finished = phase in ("COMPLETED", "FINALIZED")
    relative_build_url = f"{job_url}{number}/"
    state: dict[str, Any] = {
        "full_url": base_url + relative_build_url,
        "number": number,
        "queue_id": queue_id,
        "timestamp": timestamp_ms,
        "duration": duration_ms if finished else 0,
        "phase": phase,
    }
    if finished:
        state["status"] = result
    state["url"] = relative_build_url
    state["scm"] = {"changes": [], "culprits": []}
    if parameters is not None:
        state["parameters"] = parameters
    state["log"] = ""
    state["artifacts"] = {}
    return {"name": job_name, "display_name": job_name, "url": job_url, "build": state}


def _split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """``http://user:secret@host/p`` → (``http://host/p``, Basic header), as the plugin does."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url, {}
    userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    header = "Basic " + base64.b64encode(userinfo.encode("utf-8")).decode("ascii")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), {"Authorization": header}


class Notifier:
    """Delivers in order on one thread (the plugin posts synchronously from the build thread)."""

    def __init__(self) -> None:
        self.settings = NotificationSettings()
        self._random = random.Random(0)
        self._outbox: queue.Queue[tuple[str, bytes] | None] = queue.Queue()
        self._lock = threading.Lock()
        self.delivered: list[dict[str, Any]] = []  # payloads whose POST got any HTTP answer
        self.counters = {"sent": 0, "dropped": 0, "duplicated": 0, "failed": 0}
        self._thread = threading.Thread(target=self._run, name="emulator-notifier", daemon=True)
        self._thread.start()

    def configure(self, settings: NotificationSettings) -> None:
        with self._lock:
            self.settings = settings
            self._random = random.Random(settings.seed)

    def publish(self, job_path: str, payload: dict[str, Any], *, suppressed: bool) -> None:
        with self._lock:
            settings = self.settings
            if not settings.url:
                return
            phase = payload["build"]["phase"]
            # Draw the dice for every event, so a seed gives the same pattern whatever is suppressed.
            drop_roll, duplicate_roll = self._random.random(), self._random.random()
            if suppressed or job_path in settings.drop_jobs or phase in settings.drop_phases or drop_roll < settings.drop_probability:
                self.counters["dropped"] += 1
                return
            body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            copies = 2 if duplicate_roll < settings.duplicate_probability else 1
            if copies == 2:
                self.counters["duplicated"] += 1
            for _ in range(copies):
                self._outbox.put((settings.url, body))

    def pending(self) -> int:
        return self._outbox.unfinished_tasks

    def close(self) -> None:
        self._outbox.put(None)

    def _run(self) -> None:
        while True:
            entry = self._outbox.get()
            try:
                if entry is None:
                    return
                self._deliver(*entry)
            finally:
                self._outbox.task_done()

    def _deliver(self, url: str, body: bytes) -> None:
        target, headers = _split_credentials(url)
        headers["Content-Type"] = "application/json;charset=UTF-8"
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout_seconds) as response:
                response.read()
        except urllib.error.HTTPError:
            pass  # the plugin counts any HTTP answer, even 4xx/5xx, as delivered
        except (OSError, ValueError):
            with self._lock:
                self.counters["failed"] += 1
            return
        with self._lock:
            self.counters["sent"] += 1
            self.delivered.append(json.loads(body))
