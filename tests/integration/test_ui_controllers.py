"""Issue 23 on the web page, over real HTTP on the real database (both engines): each controller's backlog against
its own cap and its state (paused, by whom, since when; not configured), and the lever that pauses and resumes a
whole controller for maintenance, asked first, CSRF-protected, recorded with the operator's name."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import CONTROLLERS, PAYLOAD, UiClient, plain_settings, rows_naming

pytestmark = pytest.mark.both_engines


def controllers_page(make_ui, **env: str) -> UiClient:
    return UiClient(make_ui(plain_settings(JENKINS_CONTROLLERS=CONTROLLERS, **env), refresh_seconds=60).url)


def section(text: str) -> str:
    """The controllers' table of the overview."""
    assert 'id="controllers"' in text, "the overview has no controllers section"
    return text.split('id="controllers"', 1)[1].split("</table>", 1)[0]


def cells(text: str) -> dict[str, list[str]]:
    """Each row of the controllers' table by controller name: its cells as text (tags removed)."""
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", section(text), re.S)[1:]:
        found = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if found:
            rows[found[0]] = found
    return rows


def test_overview_shows_each_controller_with_its_backlog_cap_and_state(make_ui, queue, db):
    queue.enqueue("deploy")
    queue.enqueue("deploy", controller="eu")
    queue.enqueue("deploy", controller="eu", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    running = queue.enqueue("build", controller="eu").id
    db.run("UPDATE jenkins_jobs_queue SET status = 'processing', dispatch_id = 'd-1', attempts = 1, "
           "lease_expires_at = :t WHERE id = :id", id=running, t=datetime.now(UTC) + timedelta(minutes=5))
    queue.enqueue("deploy", controller="gone")
    queue.pause(None, controller="eu", paused_by="alice", reason="Jenkins upgrade")
    text = controllers_page(make_ui).get("/").text
    rows = cells(text)
    assert list(rows) == ["default", "eu", "gone"]
    assert rows["default"][1:5] == ["1", "1", "0 / -", "ok"]
    assert rows["eu"][1:4] == ["2", "1", "1 / 3"]
    assert rows["eu"][4].startswith("paused since ") and rows["eu"][4].endswith("by alice: Jenkins upgrade")
    assert rows["gone"][1:5] == ["1", "1", "0 / -", "controller gone is not configured: 1 pending, failed at the "
                                                    "next dispatcher pass with nothing sent"]
    # The levers: pause a configured controller, resume a paused one; none for a name no configuration knows.
    assert [rows[name][5] for name in rows] == ["-", "-", "-"]  # no live dispatcher said anything of them
    assert rows["default"][6] == "Pause controller default…" and rows["eu"][6] == "Resume controller eu"
    assert rows["gone"][6] == ""


def test_each_controllers_jenkins_is_shown_as_the_live_dispatchers_recorded_it(make_ui, queue):
    queue.enqueue("deploy", controller="eu")
    queue.record_heartbeat(
        dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=datetime.now(UTC),
        stale_after_seconds=300, outcome="ok", detail=None, passes=3,
        controllers={"default": {"status": "ok", "since": None, "reason": None},
                     "eu": {"status": "unavailable", "since": "2026-12-01T10:00:00Z",
                            "reason": "Jenkins answered 503 <b>restarting</b>"}})
    text = controllers_page(make_ui).get("/").text
    rows = cells(text)
    assert rows["default"][5] == "up"
    assert rows["eu"][5] == "down since 2026-12-01T10:00:00Z: Jenkins answered 503 <b>restarting</b>"
    assert "<b>restarting" not in section(text)  # the reason renders as text


def test_a_paused_controller_without_rows_or_configuration_is_listed_and_can_be_resumed(make_ui, queue):
    queue.pause(None, controller="old", paused_by="alice")  # e.g. a controller removed from the configuration
    page = controllers_page(make_ui)
    row = cells(page.get("/").text)["old"]
    assert row[1:4] == ["0", "0", "0 / -"] and row[6] == "Resume controller old"
    assert row[4].startswith("controller old is not configured; paused since ")
    page.post("/controllers/resume", {"controller": "old"})
    assert queue.pauses() == [] and "old" not in cells(page.get("/").text)


def test_one_controller_alone_adds_no_section(make_ui, queue):
    queue.enqueue("deploy")
    text = UiClient(make_ui(refresh_seconds=60).url).get("/").text
    assert 'id="controllers"' not in text and "Overview" in text


def test_pause_a_whole_controller_asks_first_then_resume_it(make_ui, queue):
    for controller in ("default", "eu", "eu"):
        queue.enqueue("deploy", controller=controller)
    page = controllers_page(make_ui)
    asked = page.post("/controllers/pause", {"controller": "eu", "next": "/"})
    assert asked.status_code == 200
    assert "pauses every row of controller eu: 2 pending rows" in html.unescape(asked.text)
    assert 'name="confirm" value="yes"' in asked.text and queue.pauses() == []  # nothing changed yet
    done = page.post("/controllers/pause", {"controller": "eu", "next": "/", "confirm": "yes",
                                            "reason": "Jenkins upgrade"})
    assert "paused controller eu: 2 pending job(s) wait until resumed" in done.text
    [pause] = queue.pauses()
    assert (pause.job_name, pause.controller, pause.paused_by, pause.reason) == (None, "eu", "ui", "Jenkins upgrade")
    assert cells(done.text)["eu"][4].endswith("by ui: Jenkins upgrade")
    again = page.post("/controllers/pause", {"controller": "eu", "confirm": "yes"})
    assert "controller eu was already paused; nothing changed" in again.text and len(queue.pauses()) == 1
    resumed = page.post("/controllers/resume", {"controller": "eu", "next": "/"})
    assert "resumed controller eu: 2 pending job(s) may be dispatched again" in resumed.text
    assert queue.pauses() == [] and cells(resumed.text)["eu"][4] == "ok"
    assert "controller eu was not paused" in page.post("/controllers/resume", {"controller": "eu"}).text


def test_the_operator_a_trusted_proxy_names_is_recorded_in_the_controllers_pause(make_ui, queue):
    page = controllers_page(make_ui, UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.0/8")
    page.http.headers["X-Forwarded-User"] = "alice@example.com"
    page.post("/controllers/pause", {"controller": "eu", "confirm": "yes"})
    [pause] = queue.pauses()
    assert (pause.controller, pause.paused_by) == ("eu", "ui:alice@example.com")
    assert cells(page.get("/").text)["eu"][4].endswith("by ui:alice@example.com")


def test_the_controller_lever_without_the_form_token_or_read_only_changes_nothing(make_ui, queue):
    page = controllers_page(make_ui)
    page.get("/")
    for token in (None, "", "wrong"):
        answer = page.post("/controllers/pause", {"controller": "eu", "confirm": "yes"}, csrf=token)
        assert answer.status_code == 403 and "form token is missing or wrong" in answer.text
    queue.pause(None, controller="eu")
    reader = UiClient(make_ui(plain_settings(JENKINS_CONTROLLERS=CONTROLLERS), read_only=True).url)
    text = reader.get("/").text
    assert 'method="post"' not in text and cells(text)["eu"][4].startswith("paused since")
    for path in ("/controllers/pause", "/controllers/resume"):
        answer = reader.post(path, {"controller": "eu", "confirm": "yes"})
        assert answer.status_code == 403 and "--read-only" in answer.text
    assert [(p.job_name, p.controller) for p in queue.pauses()] == [(None, "eu")]


@pytest.mark.parametrize(("form", "message"), [
    ({}, "controller: a controller name is required"),
    ({"controller": "Bad Name"}, "controller: bad controller name"),
    ({"controller": PAYLOAD}, "controller: bad controller name"),
])
def test_a_bad_controller_name_answers_400_and_changes_nothing(make_ui, queue, form, message):
    page = controllers_page(make_ui)
    for path in ("/controllers/pause", "/controllers/resume"):
        answer = page.post(path, dict(form, confirm="yes"))
        assert answer.status_code == 400 and message in answer.text and "<img" not in answer.text, path
    assert queue.pauses() == []


def test_a_controller_not_configured_is_refused_where_the_page_would_store_for_it(make_ui, queue):
    """Issue 33: the lever paused any well-formed name, configured or not (a controller no dispatcher serves: its
    rows fail at the next pass whatever the pause). Resuming one stays possible (a controller removed since)."""
    page = controllers_page(make_ui)
    for confirm in ({}, {"confirm": "yes"}):
        answer = page.post("/controllers/pause", {"controller": "zz", **confirm})
        assert answer.status_code == 400, answer.text
        assert "controller: controller &#39;zz&#39; is not configured (configured: default, eu)" in answer.text
    assert queue.pauses() == []
    only_eu = UiClient(make_ui(plain_settings(JENKINS_CONTROLLERS=json.dumps(
        {"eu": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t"}})), refresh_seconds=60).url)
    for path, form in (("/caps", {"job": "deploy", "cap": "2"}), ("/rates", {"job": "deploy", "per_minute": "2"})):
        answer = only_eu.post(path, {**form, "confirm": "yes"})  # the page's caps and rates are default's
        assert answer.status_code == 400 and "controller &#39;default&#39; is not configured" in answer.text, path
    assert queue.limits() == [] and queue.limit_history() == []


@pytest.fixture
def html_controller(db, engine) -> Iterator[None]:
    with rows_naming(db, engine, PAYLOAD):
        yield


def test_a_controller_name_from_the_rows_renders_as_text(make_ui, html_controller):
    text = controllers_page(make_ui).get("/").text
    assert PAYLOAD not in text and "<img" not in text
    assert html.escape(PAYLOAD, quote=False) in section(text)
    assert cells(text)[PAYLOAD][4] == (f"controller {PAYLOAD} is not configured: 1 pending, failed at the next "
                                        "dispatcher pass with nothing sent")


def jobs_table(text: str) -> tuple[list[str], dict[int, list[str]]]:
    """The job list's header cells and each row's cells by id, as text (tags removed)."""
    table = text.split('id="jobs"', 1)[1].split("</table>", 1)[0]
    as_text = lambda c: html.unescape(re.sub(r"<[^>]+>", "", c)).strip()  # noqa: E731
    header = [as_text(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
    rows = {}
    for row in re.findall(r"<tr class=[^>]*>(.*?)</tr>", table, re.S):
        found = [as_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        rows[int(re.search(r'href="/jobs/(\d+)"', row).group(1))] = found
    return header, rows


def test_the_job_list_names_each_rows_controller_and_filters_by_one(make_ui, queue):
    """Issue 36: with two controllers the list has a controller column, and `?controller=` (as `ls --controller`)
    selects one controller's rows, kept by the form, the paging and the bulk links."""
    here = queue.enqueue("deploy").id
    there = [queue.enqueue("deploy", controller="eu").id for _ in range(2)]
    page = controllers_page(make_ui)
    header, rows = jobs_table(page.get("/jobs").text)
    column = header.index("controller")
    assert {i: cells[column] for i, cells in rows.items()} == {here: "default", there[0]: "eu", there[1]: "eu"}
    assert list(jobs_table(page.get("/jobs?controller=eu").text)[1]) == there[::-1]
    assert list(jobs_table(page.get("/jobs?controller=default").text)[1]) == [here]
    text = page.get("/jobs?controller=eu&limit=1").text
    assert '<option value="eu" selected>' in text  # the form keeps the filter
    assert html.unescape(text).count("controller=eu") >= 3  # older », retry and cancel matching carry it
    bulk = page.get("/bulk?action=cancel&controller=eu").text
    assert f"ids {there[0]}, {there[1]}" in bulk and "<li>controller: eu</li>" in bulk
    assert page.get("/jobs?controller=nowhere").status_code == 200  # a controller gone from the configuration
    refused = page.get("/jobs?controller=no%20such")
    assert refused.status_code == 400 and "controller" in refused.text


def test_the_job_list_of_one_controller_has_no_controller_column(client, queue):
    queue.enqueue("deploy")
    header, _ = jobs_table(client.get("/jobs").text)
    assert "controller" not in header and "job" in header


def test_the_overview_shows_other_controllers_caps_and_names_the_controller_of_each_cap_change(make_ui, queue):
    """Issue 36: eu's cap of 3 on deploy appeared nowhere on the overview (its jobs' table is the default
    controller's, whose levers it holds), and "Cap changes" printed `deploy: no cap → 3` for both controllers."""
    queue.set_limit("deploy", 2, changed_by="alice")
    queue.set_limit("deploy", 3, controller="eu", changed_by="bob")
    queue.set_rate("build", 5, controller="eu")
    queue.enqueue("deploy", controller="eu")
    text = controllers_page(make_ui).get("/").text
    assert 'id="other-controllers-limits"' in text
    table = text.split('id="other-controllers-limits"', 1)[1].split("</table>", 1)[0]
    found = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
             for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert [cells for cells in found if cells] == [["eu", "build", "-", "0 / 5 per minute"], ["eu", "deploy", "0 / 3", "-"]]
    changes = text.split('id="cap-changes"', 1)[1].split("</ol>", 1)[0]
    lines = [" ".join(html.unescape(re.sub(r"<[^>]+>", "", li)).split()) for li in re.findall(r"<li>(.*?)</li>", changes, re.S)]
    assert any("deploy on eu: no cap → 3" in line for line in lines) and \
        any("deploy on default: no cap → 2" in line for line in lines), lines


def test_one_controllers_cap_changes_do_not_name_it(client, queue):
    queue.set_limit("deploy", 2, changed_by="alice")
    changes = client.get("/").text.split('id="cap-changes"', 1)[1].split("</ol>", 1)[0]
    assert "deploy</strong>: no cap → 2" in html.unescape(changes) and " on default" not in changes


def test_the_bulk_confirmation_breaks_the_selection_down_by_job_and_controller(make_ui, queue):
    """Issue 36: the bulk confirmation listed ids only; with two controllers it says what changes where."""
    for controller in ("eu", "eu", "default"):
        queue.enqueue("deploy", controller=controller)
    queue.enqueue("build", controller="eu")
    text = controllers_page(make_ui).get("/bulk?action=cancel&status=pending").text
    assert 'id="bulk-breakdown"' in text
    shown = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text.split('id="bulk-breakdown"', 1)[1]
                                          .split("</table>", 1)[0])).split())
    assert "deploy eu 2 build eu 1 deploy default 1" in shown, shown
