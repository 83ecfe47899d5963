"""Child processes for the tests that race real processes: always started with "spawn", never "fork".

A test process has threads (the emulator, a webhook, xdist's own) by the time it starts children, and a forked
child inherits their locks in whatever state they were: Python 3.12+ warns about it ("This process is
multi-threaded, use of fork() may lead to deadlocks in the child"), and an object built before the fork and
started after it (a server whose threads the parent already ran) fails in the child. A spawned child starts
a fresh interpreter instead, so its target must be a top-level function of an importable module and its
arguments picklable (strings, numbers, and this context's Queue and Event); it builds its own servers and
sessions. The environment (DATABASE_URL among it) is inherited.

Spawning costs each child an interpreter and its imports (eight children of a test module reach the gate in
about 2 s on this 2-core machine, one in 0.2 s): ``start_together`` holds every child at a gate until all have
started, so a race between them is a race, not a head start for the first one spawned.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections.abc import Callable, Iterable, Sequence

SPAWN = multiprocessing.get_context("spawn")


def _run_when_told(target: Callable, ready, go, args: Sequence) -> None:
    # By now the child has imported the target's module (unpickling it did): only the gate is left.
    ready.put(os.getpid())
    go.wait()
    target(*args)


def start_together(target: Callable, args_per_process: Iterable[Sequence], timeout: float = 60.0) -> list:
    """One spawned process per argument tuple, each running ``target(*args)``, all released at once when every
    one of them has started. Returns the processes (started). A child that dies before the gate is an error."""
    ready, go = SPAWN.Queue(), SPAWN.Event()
    # Daemons: should a test fail before it stops them, they end with the test process instead of holding
    # it open (they start no processes of their own).
    processes = [SPAWN.Process(target=_run_when_told, args=(target, ready, go, tuple(args)), daemon=True)
                 for args in args_per_process]
    for process in processes:
        process.start()
    waiting = len(processes)
    deadline = time.monotonic() + timeout
    while waiting:
        try:
            ready.get(timeout=0.2)
            waiting -= 1
        except queue.Empty:
            dead = [p.exitcode for p in processes if p.exitcode is not None]
            if dead or time.monotonic() > deadline:
                stop_all(processes)
                raise RuntimeError(f"{waiting} of {len(processes)} children never reached the gate "
                                   f"(exit codes of those that ended: {dead})") from None
    go.set()
    return processes


def stop_all(processes: Iterable, timeout: float = 10.0) -> None:
    """Join each process; kill those still alive after ``timeout``."""
    for process in processes:
        process.join(timeout=timeout)
        if process.is_alive():
            process.kill()
            process.join(timeout=timeout)
