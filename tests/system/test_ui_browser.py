"""Issue 15 in a real browser: Debian's Chromium, headless, driven by Selenium through Debian's chromium-driver
(never a browser or driver downloaded at run time). One browser for the module; each test gets its own page
server and database rows. A failing test leaves a screenshot (its path is in the failure message).

With JD_UI_SCREENSHOTS_TO_DOCS=1 docs/operating.md's screenshots (docs/ui-overview.png, docs/ui-job.png,
docs/ui-time.png) are written from this run."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.heartbeat import Heartbeat
from jenkins_dispatch.store.queue import FINAL_STATUSES

from ..dispatch_helpers import dispatch_settings, wait_for
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import CONTROLLERS, PAYLOAD, plain_settings, rows_naming

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DOCS = Path(__file__).resolve().parents[2] / "docs"
FLAG_PAYLOAD = '<img src=x onerror="window.__xss=1">'  # what a script would leave behind if one ran



@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator:
    """One headless Chromium for the module (skipped, saying why, only when Debian's chromium is absent)."""
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip(f"Debian's chromium and chromium-driver are not installed ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver (.ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download a browser or a driver
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(0)
    driver.screenshots = tmp_path_factory.mktemp("ui-screenshots")
    yield driver
    driver.quit()


@contextmanager
def screenshot_on_failure(browser, name: str) -> Iterator[None]:
    """Keep what the browser showed when the block failed, and say where."""
    try:
        yield
    except BaseException as failure:
        path = browser.screenshots / f"{name}.png"
        try:
            browser.save_screenshot(str(path))
            failure.add_note(f"screenshot: {path} (page {browser.current_url})")
        except Exception as exc:  # the browser itself may be what failed
            failure.add_note(f"no screenshot: {exc}")
        raise


def css(browser, selector: str):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector)


def all_css(browser, selector: str):
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, selector)


def click_button(browser, label: str, within: str = "main") -> None:
    """Click the button labelled ``label`` and wait for the page it leads to."""
    from selenium.webdriver.common.by import By

    old = css(browser, "html")
    css(browser, within).find_element(By.XPATH, f".//button[normalize-space()='{label}']").click()
    assert wait_for(lambda: _stale(old), timeout=10)


def _stale(element) -> bool:
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        return not element.tag_name  # any call on an element of a page that went away raises
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        # Asked while the page is being replaced, Chromium may answer "unhandled inspector error" instead.
        if "inspector" in str(exc):
            return False
        raise


def no_alert(browser) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return browser.switch_to.alert is None  # raises when there is none
    except NoAlertPresentException:
        return True


def put(queue, db, job, status, error=None, parameters=None):
    job_id = queue.enqueue(job, parameters or {}).id
    now = datetime.now(UTC)
    db.run("UPDATE jenkins_jobs_queue SET status = :status, last_error = :error, finished_at = :finished_at, "
           "updated_at = :at, attempts = 1 WHERE id = :id", id=job_id, status=status, error=error, at=now,
           finished_at=now if status in FINAL_STATUSES else None)
    return job_id


def listed_ids(browser) -> list[int]:
    """The ids the list shows, read in one script (a live list may swap its rows between two WebDriver calls)."""
    return [int(text) for text in browser.execute_script(
        "return Array.from(document.querySelectorAll(\"#jobs tbody a[href^='/jobs/']\"), a => a.textContent.trim())")]


def test_overview_then_filter_the_list_then_open_a_job(browser, ui, queue, db):
    from selenium.webdriver.support.select import Select

    with screenshot_on_failure(browser, "overview-filter"):
        failed = put(queue, db, "deploy", "failed", "Jenkins timeout after 10 s")
        done = put(queue, db, "deploy", "completed")
        pending = queue.enqueue("team/app/deploy", {"VERSION": "1.2.3"}).id
        browser.get(ui.url)
        assert css(browser, "h1").text == "Overview"
        assert "1\npending" in css(browser, "#counts").text.replace(" (1 due)", "")
        assert f"#{pending} team/app/deploy" in css(browser, "#oldest").text
        css(browser, "header nav a[href='/jobs']").click()
        assert wait_for(lambda: listed_ids(browser) == [pending, done, failed])
        Select(css(browser, "select[name=status]")).select_by_visible_text("failed")
        click_button(browser, "Filter", "#filters")
        assert listed_ids(browser) == [failed] and "status=failed" in browser.current_url
        css(browser, f"#jobs a[href='/jobs/{failed}']").click()
        assert wait_for(lambda: css(browser, "#status").text == "failed")
        assert "Jenkins timeout after 10 s" in css(browser, "#fields").text
        assert "by operator" in css(browser, "#history").text


def confirm(browser, label: str, within: str, expected: str, unchanged) -> None:
    """Click a lever, check its confirmation names what changes and that nothing changed yet, then confirm."""
    click_button(browser, label, within)
    assert expected in css(browser, "#confirm-what").text, css(browser, "#confirm-what").text
    assert unchanged(), f"{label}: something changed before it was confirmed"
    click_button(browser, css(browser, "#confirm button").text, "#confirm")


def test_retry_cancel_and_pause_change_the_page_and_the_database(browser, ui, queue, db):
    with screenshot_on_failure(browser, "levers"):
        failed = put(queue, db, "deploy", "failed", "HTTP 404")
        browser.get(f"{ui.url}jobs/{failed}")
        confirm(browser, "Retry…", "#levers", f"sends job {failed} of deploy, failed, back to pending",
                lambda: queue.get(failed)["status"] == "failed")
        assert css(browser, "#flash").text == f"job {failed} is pending again"
        assert css(browser, "#status").text == "pending"
        assert queue.get(failed)["status"] == "pending"
        assert queue.events(failed)[-1]["actor"] == "ui"

        confirm(browser, "Cancel…", "#levers", f"cancels job {failed} of deploy, pending",
                lambda: queue.get(failed)["status"] == "pending")
        assert css(browser, "#status").text == "cancelled" and "cancelled" in css(browser, "#flash").text
        row = queue.get(failed)
        assert row["status"] == "cancelled" and queue.events(failed)[-1]["actor"] == "ui"

        queue.enqueue("deploy")
        confirm(browser, "Pause every row of deploy…", "#levers", "pauses all 1 pending row of deploy",
                lambda: queue.pauses() == [])
        assert "paused deploy" in css(browser, "#flash").text
        assert [b.text for b in all_css(browser, "#levers button")] == ["Retry…", "Resume"]
        [pause] = queue.pauses()
        assert (pause.job_name, pause.paused_by) == ("deploy", "ui")
        browser.get(ui.url)
        confirm(browser, "Pause everything…", "main", "pauses every job: all 1 pending row wait",
                lambda: len(queue.pauses()) == 1)
        assert "Everything is paused" in css(browser, "#everything-paused").text
        assert {p.job_name for p in queue.pauses()} == {None, "deploy"}
        click_button(browser, "Resume everything")
        assert {p.job_name for p in queue.pauses()} == {"deploy"}


def test_a_cap_change_asks_first_and_back_changes_nothing(browser, ui, queue):
    with screenshot_on_failure(browser, "cap"):
        queue.enqueue("deploy")
        queue.set_limit("deploy", 2)
        browser.get(ui.url)
        field = css(browser, "#per-job input[name=cap]")
        field.clear()
        field.send_keys("5")
        click_button(browser, "Set…", "#per-job")
        assert "sets the cap of deploy to 5 in flight (it has a cap of 2)" in css(browser, "#confirm-what").text
        css(browser, "#confirm-back").click()
        assert wait_for(lambda: css(browser, "h1").text == "Overview")
        assert queue.limit_of("deploy") == 2
        field = css(browser, "#per-job input[name=cap]")
        field.clear()
        field.send_keys("5")
        click_button(browser, "Set…", "#per-job")
        click_button(browser, "Set the cap to 5", "#confirm")
        assert queue.limit_of("deploy") == 5 and "deploy: at most 5 in flight" in css(browser, "#flash").text
        assert "2 → 5 by ui" in css(browser, "#cap-changes").text


def test_cancel_a_running_build_from_its_page(browser, ui, queue, jenkins):
    with screenshot_on_failure(browser, "cancel-running"):
        job_id = queue.enqueue("deploy", {"EMULATOR_DURATION": "30"}).id
        run_pass(dispatch_settings(jenkins.base_url))
        assert wait_for(lambda: jenkins.builds("deploy"))
        browser.get(f"{ui.url}jobs/{job_id}")
        assert css(browser, "#status").text == "processing"
        confirm(browser, "Cancel…", "#levers", "it is in Jenkins: its queue item is cancelled or its build stopped",
                lambda: queue.get(job_id)["status"] == "processing")
        assert css(browser, "#status").text == "cancelled"
        assert wait_for(lambda: jenkins.builds("deploy")[0].result == "ABORTED")
        assert queue.get(job_id)["status"] == "cancelled"


def test_bulk_retry_confirms_the_count_first(browser, ui, queue, db):
    with screenshot_on_failure(browser, "bulk"):
        ids = [put(queue, db, "deploy", "failed", "Jenkins timeout") for _ in range(3)]
        browser.get(f"{ui.url}jobs?status=failed")
        css(browser, "a.button[href^='/bulk?']").click()
        assert wait_for(lambda: "3 jobs match" in css(browser, "#bulk-count").text)
        assert [queue.get(i)["status"] for i in ids] == ["failed"] * 3  # nothing yet
        click_button(browser, "Retry 3 jobs", "#bulk-confirm")
        assert css(browser, "#bulk-summary").text.startswith("retried 3 of 3 jobs")
        assert [queue.get(i)["status"] for i in ids] == ["pending"] * 3


def test_html_in_parameters_and_errors_renders_as_text_and_runs_nothing(browser, ui, queue, db):
    with screenshot_on_failure(browser, "escaping"):
        job_id = put(queue, db, "deploy", "failed", f"boom {FLAG_PAYLOAD} {PAYLOAD}",
                     {"ENV": PAYLOAD, "FLAG": FLAG_PAYLOAD})
        named = put(queue, db, FLAG_PAYLOAD, "failed", PAYLOAD, {"ENV": FLAG_PAYLOAD})
        db.run("UPDATE jenkins_jobs_queue SET started_at = created_at WHERE id = :id", id=named)
        for path in (f"jobs/{job_id}", "jobs", "jobs?status=failed", "", "time", f"jobs/{named}"):
            browser.get(ui.url + path)
            assert no_alert(browser), path
            assert browser.execute_script("return window.__xss === undefined"), path
            assert all_css(browser, "main img") == [], path
        browser.get(f"{ui.url}jobs/{job_id}")
        values = {row.find_element("css selector", "th").text: row.find_element("css selector", "td").text
                  for row in all_css(browser, "#parameters tr")}
        assert values == {"ENV": PAYLOAD, "FLAG": FLAG_PAYLOAD}
        assert f"boom {FLAG_PAYLOAD} {PAYLOAD}" in css(browser, "#fields").text


def test_the_list_reloads_itself_while_open(browser, make_ui, queue):
    with screenshot_on_failure(browser, "refresh"):
        server = make_ui(refresh_seconds=1)
        browser.get(server.url + "jobs")
        assert css(browser, "#no-jobs")
        job_id = queue.enqueue("deploy").id
        assert wait_for(lambda: listed_ids(browser) == [job_id], timeout=8)


def test_screenshots_of_the_overview_a_job_and_time(browser, make_ui, make_jenkins, queue, db, jenkins):
    """docs/operating.md's pictures, from a queue with some of everything in it: two controllers (the overview's
    controllers table) and a week of finishes (the time page's charts and timings)."""
    with screenshot_on_failure(browser, "readme"):
        eu = make_jenkins()
        settings = dispatch_settings(jenkins.base_url, JENKINS_CONTROLLERS=json.dumps(
            {"eu": {"url": eu.base_url, "user": "admin", "api_token": "admin-token", "max_in_flight": 3}}))
        ui = make_ui(settings, refresh_seconds=60)
        heartbeat = Heartbeat("serve", dispatcher_id="serve@ops-1:4242")
        finished_over_the_week(queue, db)
        for n in range(3):
            queue.enqueue("team/app/deploy", {"VERSION": f"1.4.{n}", "ENV": "prod"}, priority=10)
        queue.enqueue("deploy", {"ENV": "staging", "EMULATOR_DURATION": "30"})
        for _ in range(2):
            queue.enqueue("deploy", {"ENV": "eu-prod", "EMULATOR_DURATION": "30"}, controller="eu")
        queue.set_limit("team/app/deploy", 2)
        run_pass(settings, heartbeat=heartbeat)
        queue.enqueue("nightly", scheduled_at=datetime.now(UTC) + timedelta(hours=2))
        queue.enqueue("deploy", {"ENV": "eu-test"}, controller="eu", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
        put(queue, db, "reports/weekly", "failed", "Jenkins has no job 'reports/weekly' (404): check the job path")
        put(queue, db, "deploy", "completed")
        queue.pause("nightly", reason="release freeze", paused_by="ui")
        queue.gauges()  # the depth chart's current five minutes, as a dispatcher's pass leaves it
        shots = {"ui-overview.png": ui.url}
        job = queue.list_jobs(job_name="team/app/deploy", status="processing", limit=1)[0]["id"]
        shots["ui-job.png"] = f"{ui.url}jobs/{job}"
        shots["ui-time.png"] = f"{ui.url}time"
        target = DOCS if os.environ.get("JD_UI_SCREENSHOTS_TO_DOCS") == "1" else browser.screenshots
        for name, url in shots.items():
            browser.set_window_size(1280, 600)  # short first: a page's scrollHeight is at least the window's
            browser.get(url)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(1280, min(max(height + 160, 600), 2000))
            assert browser.save_screenshot(str(target / name))
            assert (target / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            if target == DOCS and shutil.which("pngquant"):  # a third of the size, for the repository's sake
                subprocess.run(["pngquant", "--quality", "70-95", "--speed", "1", "--strip", "--force",
                                "--output", str(target / name), str(target / name)], check=False, timeout=60)
        browser.set_window_size(1280, 1000)
        assert "team/app/deploy" in css(browser, "main").text  # the time page's per-job timings


def finished_over_the_week(queue, db) -> None:
    """Finishes spread over the last week, more of them recently, through the trigger that keeps the time page's
    aggregates (a row's finished_at set, as a settle sets it): queue waits of seconds, builds of minutes."""
    rng = random.Random(25)
    now = datetime.now(UTC)
    ages = [rng.uniform(0, 3600) for _ in range(25)] + [rng.uniform(3600, 86_400) for _ in range(60)]
    ages += [rng.uniform(86_400, 7 * 86_400) for _ in range(80)]
    for age in ages:
        job = rng.choice(["team/app/deploy", "team/app/deploy", "deploy", "reports/weekly", "nightly"])
        status = rng.choices(["completed", "failed", "cancelled"], weights=[8, 2, 1])[0]
        finished = now - timedelta(seconds=age)
        started = finished - timedelta(seconds=rng.uniform(20, 600))
        job_id = queue.enqueue(job, {}).id
        db.run("UPDATE jenkins_jobs_queue SET status = :status, attempts = 1, created_at = :created, "
               "started_at = :started, finished_at = :finished, updated_at = :finished WHERE id = :id", id=job_id,
               status=status, created=started - timedelta(seconds=rng.expovariate(1 / 20)), started=started,
               finished=finished)


def tick(browser, selector: str) -> None:
    """Tick a box of the live list. Until one is ticked the list may swap its rows in (every second here), and a
    box found just before a swap is gone when clicked: find it again then. Once one is ticked the list holds still."""
    from selenium.common.exceptions import StaleElementReferenceException

    def ticked() -> bool:
        try:
            box = css(browser, selector)
            if not box.is_selected():
                box.click()
            return css(browser, selector).is_selected()
        except StaleElementReferenceException:
            return False

    assert wait_for(ticked, timeout=10)


def test_the_list_refreshes_its_rows_in_place_and_picks_feed_the_bulk_confirmation(browser, make_ui, queue, db):
    with screenshot_on_failure(browser, "live"):
        server = make_ui(refresh_seconds=1)
        ids = [put(queue, db, "deploy", "failed", "boom") for _ in range(3)]
        browser.get(server.url + "jobs")
        browser.execute_script("window.__same_page = true")
        late = queue.enqueue("deploy").id
        assert wait_for(lambda: listed_ids(browser)[:1] == [late], timeout=8)
        assert browser.execute_script("return window.__same_page === true")  # swapped in place, not reloaded
        for job_id in ids[:2]:
            tick(browser, f"input[name=id][value='{job_id}']")
        click_button(browser, "Retry ticked…", "#pick")
        assert "2 jobs match" in css(browser, "#bulk-count").text
        assert [queue.get(i)["status"] for i in ids] == ["failed"] * 3
        click_button(browser, "Retry 2 jobs", "#bulk-confirm")
        assert [queue.get(i)["status"] for i in ids] == ["pending", "pending", "failed"]
        assert all(queue.events(i)[-1]["actor"] == "ui" for i in ids[:2])


def test_time_charts_render_from_the_page_itself(browser, ui, queue, db):
    with screenshot_on_failure(browser, "time"):
        for status in ("completed", "completed", "failed"):
            put(queue, db, "deploy", status)
        browser.get(ui.url + "time")
        assert len(all_css(browser, "svg.chart polyline")) == 18  # per window: started, completed, failed, cancelled, and pending, processing (queue depth)
        assert "completed 2" in css(browser, "#chart-hour figcaption").text
        sources = browser.execute_script(
            "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
        assert all(s.startswith(ui.url) for s in sources), sources  # nothing fetched from elsewhere


def controller_row(browser, name: str) -> str:
    """The text of controller ``name``'s row of the overview, read in one script."""
    return browser.execute_script(
        "var name = arguments[0], r = Array.from(document.querySelectorAll('#controllers tbody tr'))"
        ".find(function (tr) { return tr.cells[0].textContent.trim() === name; });"
        "return r ? r.textContent.replace(/\\s+/g, ' ').trim() : null;", name)


def test_pause_and_resume_a_whole_controller_from_the_overview(browser, make_ui, queue, db, engine):
    with screenshot_on_failure(browser, "controllers"), rows_naming(db, engine, FLAG_PAYLOAD):
        server = make_ui(plain_settings(JENKINS_CONTROLLERS=CONTROLLERS), refresh_seconds=60)
        for _ in range(2):
            queue.enqueue("deploy", controller="eu")
        browser.get(server.url)
        assert no_alert(browser) and browser.execute_script("return window.__xss === undefined")
        assert all_css(browser, "main img") == []
        assert controller_row(browser, FLAG_PAYLOAD).startswith(f"{FLAG_PAYLOAD} 1 1 0 / - controller {FLAG_PAYLOAD} is not configured")
        assert controller_row(browser, "eu").startswith("eu 2 2 0 / 3 ok")
        confirm(browser, "Pause controller eu…", "#controllers", "pauses every row of controller eu: 2 pending rows",
                lambda: queue.pauses() == [])
        assert "paused controller eu: 2 pending job(s) wait" in css(browser, "#flash").text
        [pause] = queue.pauses()
        assert (pause.job_name, pause.controller, pause.paused_by) == (None, "eu", "ui")
        assert "eu 2 2 0 / 3 paused since" in controller_row(browser, "eu")
        assert "by ui" in controller_row(browser, "eu")
        click_button(browser, "Resume controller eu", "#controllers")
        assert "resumed controller eu" in css(browser, "#flash").text and queue.pauses() == []
        assert controller_row(browser, "eu").startswith("eu 2 2 0 / 3 ok")


def test_the_controllers_table_refreshes_in_place(browser, make_ui, queue):
    with screenshot_on_failure(browser, "controllers-live"):
        server = make_ui(plain_settings(JENKINS_CONTROLLERS=CONTROLLERS), refresh_seconds=1)
        queue.enqueue("deploy", controller="eu")
        browser.get(server.url)
        browser.execute_script("window.__same_page = true")
        assert controller_row(browser, "eu").startswith("eu 1 1 0 / 3 ok")
        queue.enqueue("deploy", controller="eu")
        queue.pause(None, controller="eu", paused_by="alice")
        assert wait_for(lambda: (controller_row(browser, "eu") or "").startswith("eu 2 2 0 / 3 paused since"),
                        timeout=8)
        assert browser.execute_script("return window.__same_page === true")  # swapped in place, not reloaded


LONG_JOB = "platform/payments/deploy-production-eu-west-1"
LONG_ERROR = ("Jenkins answered 500 to buildWithParameters: java.lang.IllegalStateException: no executor available "
              "on any node labelled linux-large-with-a-very-long-label-name")


@pytest.mark.parametrize("width", [1280, 390])
def test_no_page_is_wider_than_the_window(browser, make_ui, queue, db, width):
    """Issue 36: at 1,400 px the overview was 1,520 px wide (its jobs table ran off the right edge, the Pause
    buttons cut). With two controllers, long job names, long errors and every lever shown, no page scrolls
    sideways at a desktop's 1,280 px nor at a phone's 390 px: wide tables scroll inside their own box."""
    with screenshot_on_failure(browser, f"width-{width}"):
        server = make_ui(plain_settings(JENKINS_CONTROLLERS=CONTROLLERS), refresh_seconds=60)
        for n in range(4):
            queue.enqueue(LONG_JOB, {"VERSION": f"v1.4.{n}", "ENV": "production-eu-west-1"}, controller="eu")
        failed = put(queue, db, LONG_JOB, "failed", LONG_ERROR, {"ENV": "x" * 120})
        queue.set_limit(LONG_JOB, 2)
        queue.set_limit(LONG_JOB, 3, controller="eu")
        try:
            browser.set_window_size(width, 900)
            for path in ("", "jobs", f"jobs/{failed}", "time", f"bulk?action=cancel&job={LONG_JOB}"):
                browser.get(server.url + path)
                wide = browser.execute_script(
                    "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
                assert wide[0] <= wide[1], (path or "/", wide)
        finally:
            browser.set_window_size(1280, 1000)
