"""Settings and small helpers shared by the dispatcher tests."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from jenkins_dispatch.config import Settings, load_settings

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


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
