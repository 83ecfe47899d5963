import os
from pathlib import Path

# Before any handler or Powertools import: fake AWS, no tracing, a metrics namespace.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "JenkinsDispatch")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "jenkins-dispatch")
os.environ.setdefault("POWERTOOLS_DEV", "false")

import pytest  # noqa: E402

from jenkins_dispatch.config import parse_database_url  # noqa: E402
from jenkins_dispatch.store.db import Database  # noqa: E402
from jenkins_dispatch.store.migrations import migrate  # noqa: E402
from jenkins_dispatch.store.queue import Queue  # noqa: E402

from .emulator_fixtures import *  # noqa: E402,F401,F403
from .pg_server import postgres_server, scratch_database  # noqa: E402

TABLES = "jenkins_job_events, jenkins_jobs_queue, jenkins_job_limits, jenkins_job_pauses, jenkins_dispatchers"


@pytest.fixture(scope="session")
def database_url():
    """One database for the whole session, migrated once; exported for subprocesses."""
    with postgres_server() as (admin_url, _where), scratch_database(admin_url) as url:
        with Database(parse_database_url(url)) as db:
            migrate(db)
        previous = os.environ.get("DATABASE_URL")
        os.environ["DATABASE_URL"] = url
        try:
            yield url
        finally:
            if previous is None:
                os.environ.pop("DATABASE_URL", None)
            else:
                os.environ["DATABASE_URL"] = previous


@pytest.fixture
def db(database_url):
    """A session on the shared database, with every table emptied first."""
    with Database(parse_database_url(database_url), application_name="jd-tests") as database:
        database.run(f"TRUNCATE {TABLES} RESTART IDENTITY")
        yield database


@pytest.fixture
def queue(db):
    return Queue(db, lease_seconds=60)


LAYERS = ("unit", "integration", "system")


def pytest_collection_modifyitems(config, items):
    """Mark every test with the layer its folder names, so `-m unit` selects what `tests/unit` holds."""
    tests_folder = Path(__file__).resolve().parent
    for item in items:
        try:
            folder = item.path.resolve().relative_to(tests_folder).parts[0]
        except ValueError:
            continue
        if folder in LAYERS:
            item.add_marker(folder)
