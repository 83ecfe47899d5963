"""Misbehaviour injected into the emulator's HTTP face: faults matched per request, and restart windows (503).

Owns the list of faults and the unavailable window, each behind its own lock; the server asks it, per request,
what to do. Must not import the rest of the package: it knows methods and paths, not jobs or builds.
"""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Fault:
    """One injected misbehaviour, applied to requests whose method and path (after the context path) match."""

    path: str = ""  # regular expression searched in the path, e.g. "buildWithParameters$"
    method: str | None = None
    latency_seconds: float = 0.0  # wait before handling
    status: int | None = None  # answer this instead of handling: 500 Oops page, 503 restart page, other codes bare
    reset: bool = False  # abort the connection (TCP RST) without handling or answering
    drop_after_accept: bool = False  # handle the request (a build IS queued), then close without answering
    slow_seconds: float = 0.0  # handle the request, then wait this long before answering
    hold: bool = False  # keep the request unhandled until ``release()``: Jenkins acts on it when the test says
    times: int | None = None  # how many matching requests it applies to; None means every one
    probability: float = 1.0  # applies to this share of matching requests (seeded: see "seed")
    seed: int = 0
    hits: int = 0
    waiting: int = 0  # requests it holds back now (``latency_seconds`` or ``hold``), not yet handled

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._released = threading.Event()

    @property
    def holds_back(self) -> bool:
        """Whether a request it applies to waits before it is handled (so counts in ``waiting`` until then)."""
        return self.hold or self.latency_seconds > 0

    def release(self) -> None:
        """Let the requests ``hold`` keeps go on to be handled, and hold no later one."""
        self._released.set()

    def wait_until_released(self) -> None:
        self._released.wait()

    def matches(self, method: str, path: str) -> bool:
        """Whether this fault may still apply to a request (its ``probability`` is drawn by ``Faults.take``)."""
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and self.method.upper() != method:
            return False
        return re.search(self.path, path) is not None


class Faults:
    """The faults in force and the window during which every request gets the restart page."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._unavailable_until = 0.0
        self._unavailable_kind = "restarting"

    def add(self, **spec: Any) -> Fault:
        """Add a fault built from ``Fault``'s fields; returns it (its ``hits`` count as requests match)."""
        fault = Fault(**spec)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every fault, releasing the requests they hold, and end any unavailable window."""
        self.release_all()
        with self._lock:
            self.faults.clear()
            self._unavailable_until = 0.0

    def take(self, method: str, path: str) -> Fault | None:
        """The first fault that applies to this request, counted as hit; None if none does."""
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path) and (fault.probability >= 1.0 or fault._rng.random() < fault.probability):
                    fault.hits += 1
                    fault.waiting += fault.holds_back
                    return fault
        return None

    def handled(self, fault: Fault) -> None:
        """A request ``fault`` held back (``take`` counted it in ``waiting``) has been handled, or dropped."""
        if fault.holds_back:
            with self._lock:
                fault.waiting -= 1

    def release_all(self) -> None:
        """Let every held request go on to be handled (``Fault.release`` of each ``hold`` fault)."""
        for fault in self.snapshot():
            fault.release()

    def be_unavailable(self, window_seconds: float, kind: str) -> None:
        """Answer 503 for ``window_seconds``, with the page of ``kind`` ("restarting" or "starting")."""
        with self._lock:
            self._unavailable_until = time.monotonic() + window_seconds
            self._unavailable_kind = kind

    def unavailable_window(self) -> str | None:
        """The kind of the 503 page to answer now, or None when the emulator is available."""
        with self._lock:
            return self._unavailable_kind if time.monotonic() < self._unavailable_until else None

    def snapshot(self) -> list[Fault]:
        """The faults in force, for the control API's state."""
        with self._lock:
            return list(self.faults)
