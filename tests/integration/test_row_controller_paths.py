"""Issue 33: a row's controller goes wherever the row goes. Two emulators as two controllers with the same job names
and the same queue-item and build numbers: cancelling a row — from the CLI, in bulk, from the web page — cancels
its own queue item or stops its own build, in its own controller's Jenkins, and nothing of the other controller;
and every link to Jenkins a row shows points at its own controller. Real database (both engines), real HTTP.
"""

from __future__ import annotations

import json

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.operating import bulk
from jenkins_dispatch.operating.operator import job_details

from ..dispatch_helpers import dispatch_settings, wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import UiClient

pytestmark = pytest.mark.both_engines

LONG = {"path": "long", "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 120}
QUEUED = "waiting"  # the fixtures' job whose items wait 30 s in the queue


def two_controllers(make_jenkins, monkeypatch):
    """Emulators for `default` and `eu`, each with the same jobs and numbering, and the settings naming both
    (also in the environment, for the CLI)."""
    home, eu = make_jenkins(jobs=[LONG]), make_jenkins(jobs=[LONG])
    controllers = json.dumps({"eu": {"url": eu.base_url, "user": "admin", "api_token": ADMIN_TOKEN}})
    settings = dispatch_settings(home.base_url, JENKINS_CONTROLLERS=controllers, LEASE_SECONDS="60")
    for name, value in {"JENKINS_URL": home.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": ADMIN_TOKEN,
                        "JENKINS_CONTROLLERS": controllers, "LEASE_SECONDS": "60",
                        "JENKINS_TIMEOUT_SECONDS": "1"}.items():
        monkeypatch.setenv(name, value)
    return home, eu, settings


def in_jenkins(queue, settings, home, eu, job_name: str) -> dict[str, int]:
    """A row of ``job_name`` on each controller, triggered together, the same queue item number on both; for the
    long job, each building as its controller's build of the same number. Their ids by controller."""
    ids = {c: queue.enqueue(job_name, controller=c).id for c in ("default", "eu")}
    assert wait_for(lambda: run_pass(settings)["triggered"] == 0 and all(
        queue.get(i)["jenkins_queue_id"] is not None for i in ids.values()), timeout=20, interval=0.1)
    numbers = {c: queue.get(i)["jenkins_queue_id"] for c, i in ids.items()}
    assert numbers["default"] == numbers["eu"], numbers  # the same queue item number on both controllers
    if job_name == LONG["path"]:
        assert home.wait_until(lambda: len(home.builds("long")) == len(eu.builds("long")) > 0, timeout=10)
        for c, i in ids.items():  # as the webhook's STARTED would record it
            row = queue.get(i)
            build = (home if c == "default" else eu).builds("long")[-1]
            queue.record_progress(i, row["dispatch_id"], build_number=build.number,
                                  build_url=f"{(home if c == 'default' else eu).base_url}job/long/{build.number}/")
    return ids


def items_cancelled(emulator) -> list[int]:
    with emulator.jenkins.lock:
        return sorted(i.id for i in emulator.jenkins.items.values() if i.cancelled)


def aborted(emulator) -> list[int]:
    return [b.number for b in emulator.builds("long") if b.aborted]


def cancel_by(path: str, target: int, queue, settings, capsys, make_ui) -> None:
    """Cancel row ``target`` the way ``path`` does: the CLI's `cancel ID`, a bulk cancel of its controller, the
    web page's Cancel button."""
    if path == "cli":
        assert main(["cancel", str(target)]) == 0, capsys.readouterr().err
    elif path == "bulk":
        row = queue.get(target)
        outcomes = bulk.act(queue, settings, bulk.CANCEL, [bulk.Target(target, row["updated_at"])])
        assert [o.outcome for o in outcomes] == ["done"], outcomes
    else:
        page = UiClient(make_ui(settings, refresh_seconds=60).url)
        answer = page.post(f"/jobs/{target}/cancel", {"confirm": "yes"})
        assert answer.status_code == 200 and f"job {target} cancelled" in answer.text, answer.text


@pytest.mark.parametrize("path", ["cli", "bulk", "page"])
def test_cancelling_a_queued_row_cancels_its_own_controllers_item_only(path, make_jenkins, monkeypatch, queue,
                                                                       capsys, make_ui):
    home, eu, settings = two_controllers(make_jenkins, monkeypatch)
    ids = in_jenkins(queue, settings, home, eu, QUEUED)
    number = queue.get(ids["eu"])["jenkins_queue_id"]
    cancel_by(path, ids["eu"], queue, settings, capsys, make_ui)
    assert items_cancelled(eu) == [number]
    assert items_cancelled(home) == []  # the default controller's item of the same number is untouched
    assert queue.get(ids["eu"])["status"] == "cancelled"
    assert queue.get(ids["default"])["status"] == "processing"


@pytest.mark.parametrize("path", ["cli", "bulk", "page"])
def test_cancelling_a_building_row_stops_its_own_controllers_build_only(path, make_jenkins, monkeypatch, queue,
                                                                        capsys, make_ui):
    home, eu, settings = two_controllers(make_jenkins, monkeypatch)
    ids = in_jenkins(queue, settings, home, eu, LONG["path"])
    before = queue.get(ids["default"])
    cancel_by(path, ids["eu"], queue, settings, capsys, make_ui)
    row = queue.get(ids["eu"])
    assert eu.wait_until(lambda: aborted(eu) == [row["build_number"]], timeout=10), aborted(eu)
    assert aborted(home) == [] and all(b.building for b in home.builds("long"))
    assert row["status"] == "cancelled" and row["build_url"].startswith(eu.base_url), row
    assert queue.get(ids["default"]) == before  # the other controller's row: not a field changed


def test_every_link_of_a_row_points_at_its_own_controller(make_jenkins, monkeypatch, queue):
    home, eu, settings = two_controllers(make_jenkins, monkeypatch)
    ids = in_jenkins(queue, settings, home, eu, QUEUED)
    for controller, emulator in (("default", home), ("eu", eu)):
        links = job_details(queue, ids[controller], settings)["links"]
        assert set(links) == {"job", "queue_item"}, links
        assert all(url.startswith(emulator.base_url) for url in links.values()), (controller, links)


def test_a_bulk_cancel_stopped_by_one_controllers_jenkins_still_cancels_the_others_rows(make_jenkins, monkeypatch,
                                                                                        queue):
    """One controller failing as a whole (here: it refuses our credentials) stops the rest of its own rows in a
    bulk cancel, not the other controller's."""
    home, eu, settings = two_controllers(make_jenkins, monkeypatch)
    ids = [in_jenkins(queue, settings, home, eu, QUEUED) for _ in range(2)]
    eu.set_user("admin", api_token="changed")  # eu now answers 401 to everything we send
    targets = bulk.select_targets(queue, bulk.CANCEL, bulk.Filters(status="processing"), limit=100).rows
    outcomes = {o.id: o.outcome for o in bulk.act(queue, settings, bulk.CANCEL, targets)}
    assert sorted(outcomes[i["eu"]] for i in ids) == ["failed", "not_attempted"], outcomes
    assert [outcomes[i["default"]] for i in ids] == ["done", "done"], outcomes
    assert [queue.get(i["default"])["status"] for i in ids] == ["cancelled", "cancelled"]
    assert [queue.get(i["eu"])["status"] for i in ids] == ["processing", "processing"]
