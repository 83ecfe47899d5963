"""Child processes for the tests that race real processes: started by a fork server, never forked from a test.

A test process has threads (the emulator, a webhook, xdist's own) by the time it starts children, and a child
forked from it inherits their locks in whatever state they were: Python 3.12+ warns about it ("This process is
multi-threaded, use of fork() may lead to deadlocks in the child"), and an object built before the fork and
started after it (a server whose threads the parent already ran) fails in the child. multiprocessing's
"forkserver" forks each child from a server process instead: single-threaded, started once per test process,
with the package and the test helpers imported once (``PRELOADED``). A child is therefore a fresh process
like a spawned one (its target a top-level function of an importable module, its arguments picklable:
strings, numbers, and this context's Queue, Event and Barrier; it builds its own servers and sessions), minus
the ~0.6 s of CPU a spawned interpreter spent on its imports (measured: `spawn` 0.62 s a child, this 0.05 s).

The server was started with the environment and directory of its first use; each child takes the parent's
environment (DATABASE_URL among it: a test sets its own) and directory as they are when it is started.

``start_together`` holds every child at a gate until all have started, so a race between them is a race, not a
head start for the first one started.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections.abc import Callable, Iterable, Sequence

# What every racing child needs, imported once by the fork server rather than by each child.
PRELOADED = ["pytest", "jenkins_dispatch.dispatching.dispatcher", "jenkins_dispatch.dispatching.dispatch_loop",
             "jenkins_dispatch.serve", "jenkins_dispatch.store.dialects.postgresql.session",
             "jenkins_dispatch.store.dialects.mysql.session", "tests.dispatch_helpers", "tests.stores"]
CHILDREN = multiprocessing.get_context("forkserver")
CHILDREN.set_forkserver_preload(PRELOADED)


def _run_when_told(target: Callable, ready, go, args: Sequence, environment: dict[str, str], cwd: str) -> None:
    # By now the child has imported the target's module (unpickling it did): only the gate is left.
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(cwd)
    ready.put(os.getpid())
    go.wait()
    target(*args)


def start_together(target: Callable, args_per_process: Iterable[Sequence], timeout: float = 60.0) -> list:
    """One child process per argument tuple, each running ``target(*args)``, all released at once when every
    one of them has started. Returns the processes (started). A child that dies before the gate is an error."""
    ready, go = CHILDREN.Queue(), CHILDREN.Event()
    # Daemons: should a test fail before it stops them, they end with the test process instead of holding
    # it open (they start no processes of their own).
    environment, cwd = dict(os.environ), os.getcwd()
    processes = [CHILDREN.Process(target=_run_when_told, args=(target, ready, go, tuple(args), environment, cwd),
                                  daemon=True)
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


def drained(reports) -> list:
    """Everything the children put on ``reports`` (a CHILDREN.Queue), taken after they stopped: their failures, in
    one line each, for the test to show."""
    taken = []
    while not reports.empty():
        taken.append(reports.get())
    return taken
