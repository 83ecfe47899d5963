"""A row's own Jenkins controller, resolved in one place: its settings, a client for it, its links in Jenkins.

A row names its controller (the ``controller`` column; ``default``, JENKINS_URL, unless it names another of
JENKINS_CONTROLLERS). Two controllers may have the same job names, queue item numbers and build numbers, so
anything that acts on a row in Jenkins or points at it there — `cancel` from the CLI, in bulk or from the page,
the links `show`, `ls --json` and the page draw — must reach the row's own controller. They all come through
here. The dispatcher's lanes are the only other way to Jenkins: each is built for one controller
(``Settings.for_controller``). tests/unit/test_layout.py forbids the "the Jenkins" shortcuts of ``Settings``
(``jenkins``, ``require_jenkins``) everywhere else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_CONTROLLER, JenkinsSettings, Settings
from .jobs import job_path, job_path_error

if TYPE_CHECKING:
    from .client import JenkinsClient


def controller_name(row: Mapping[str, Any]) -> str:
    """The controller a row names (a row read without the column, or written before it existed: ``default``)."""
    return row.get("controller") or DEFAULT_CONTROLLER


def controllers_told_apart(configured: Collection[str], rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a list of rows names each one's controller: when several are configured, or a row names one that is
    not (a removed controller's rows; with none configured, as when only the database is, one other than
    ``default``). Two controllers' rows may share a job name and a build number: without the name, two builds #45
    of two controllers read like one job built twice."""
    known = set(configured) or {DEFAULT_CONTROLLER}
    return len(known) > 1 or any(controller_name(row) not in known for row in rows)


def controller_of(settings: Settings, row: Mapping[str, Any]) -> JenkinsSettings:
    """The row's controller's settings; ControllerNotConfigured when the configuration does not name it."""
    return settings.controller(controller_name(row))


def is_configured(settings: Settings, row: Mapping[str, Any]) -> bool:
    """Whether the row's controller is in the configuration (a removed one strands its rows in flight)."""
    return controller_name(row) in settings.controllers_by_name()


def client_for(settings: Settings, row: Mapping[str, Any]) -> JenkinsClient:
    """A client of the row's own controller (close it: it is a context manager); ControllerNotConfigured when the
    configuration does not name it."""
    # Imported here: the HTTP client (requests, urllib3: ~0.1 s) is for the few commands that reach Jenkins, not
    # for every command that only reads a row's controller.
    from .client import jenkins_client

    return jenkins_client(controller_of(settings, row))


def links_for(settings: Settings, row: Mapping[str, Any]) -> dict[str, str]:
    """The row's links in Jenkins, all on its own controller: its build (as Jenkins gave it), its job and, until it
    has a build, its queue item. Only the build when its controller is not configured (nothing else is known)."""
    links: dict[str, str] = {}
    if row.get("build_url"):
        links["build"] = row["build_url"]
    if not is_configured(settings, row):
        return links
    base = controller_of(settings, row).url
    if job_path_error(row["job_name"]) is None:  # a row written with plain SQL may name no Jenkins item
        links["job"] = base + job_path(row["job_name"])
    if row.get("jenkins_queue_id") is not None and not row.get("build_url"):
        links["queue_item"] = f"{base}queue/item/{row['jenkins_queue_id']}/api/json"
    return links
