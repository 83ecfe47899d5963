"""Settings and small helpers shared by the dispatcher tests."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from jenkins_dispatch.config import Settings, load_settings
from jenkins_dispatch.dispatching.dispatch_loop import DispatchLoop
from jenkins_dispatch.dispatching.wakeup import work_signal
from jenkins_dispatch.store.db import Database

WEBHOOK_SECRET = "test-webhook-secret"


def dispatch_settings(jenkins_url: str, **env: str) -> Settings:
    values = {
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "JENKINS_URL": jenkins_url,
        "JENKINS_USER": "admin",
        "JENKINS_API_TOKEN": "admin-token",
        "JENKINS_TIMEOUT_SECONDS": "1",
        "LEASE_SECONDS": "3",
        "BATCH_SIZE": "10",
        "MAX_PARALLEL_TRIGGERS": "4",
        "RETRY_BASE_SECONDS": "0",
        "RETRY_MAX_SECONDS": "0",
        "TIME_MARGIN_SECONDS": "0",
        "WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    values.update(env)
    return load_settings(values)


def expire_leases(db) -> None:
    """Skip the wait: every processing row's lease ends now (the time given as a parameter: SQL that both
    PostgreSQL and MySQL read the same way)."""
    db.run("UPDATE jenkins_jobs_queue SET lease_expires_at = :ended WHERE status = 'processing'",
           ended=datetime.now(UTC) - timedelta(seconds=1))


# Every wait_for timeout is multiplied by this: a timeout says when a condition is overdue, and on a machine busy
# with other work (beside two CPU burners, every process gets a fraction of a core) the same work takes several
# times as long. A test that passes returns as soon as its condition holds, so this costs nothing unless it fails.
PATIENCE = float(os.environ.get("JD_TEST_PATIENCE", "3"))


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Whether ``predicate`` holds within ``timeout`` seconds (times PATIENCE), polled every ``interval``."""
    deadline = time.monotonic() + timeout * PATIENCE
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@contextmanager
def dispatching(settings) -> Iterator[None]:
    """A continuous dispatcher (as `serve` runs it) on its own session, for the length of the block."""
    stop = threading.Event()
    session = Database(settings.database, application_name="jd-tests-loop")
    loop = DispatchLoop(settings, session, work_signal(session, stop, 0.5), interval=0.5, shutdown=stop)
    runner = threading.Thread(target=loop.run)
    runner.start()
    try:
        yield
    finally:
        stop.set()
        runner.join(20)
        session.close()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans (start, end) open at one moment, an end before a start at the same instant: e.g. the
    emulator's builds of one concurrency key, which its cap bounds."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most
