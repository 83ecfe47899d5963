"""Issue 24's rate lever in a real browser (headless Chromium, as test_ui_browser.py drives it): the change is
asked first, naming the job's last minute, and nothing changes until it is confirmed."""

from __future__ import annotations

from ..dispatch_helpers import wait_for
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from .test_ui_browser import browser, click_button, css, screenshot_on_failure  # noqa: F401 - browser: a fixture


def test_a_rate_change_asks_first_naming_the_last_minute_and_back_changes_nothing(browser, ui, queue):  # noqa: F811
    with screenshot_on_failure(browser, "rate"):
        queue.set_rate("deploy", 5)
        for _ in range(3):
            queue.enqueue("deploy")
        assert len(queue.claim_batch(3, capped=queue.claim_plan(None).caps)) == 3  # three real starts
        browser.get(ui.url)
        assert "3 / 5 per minute" in css(browser, "#per-job td.rate").text
        field = css(browser, "#per-job input[name=per_minute]")
        field.clear()
        field.send_keys("10")
        click_button(browser, "Set rate…", "#per-job")
        assert css(browser, "#confirm-what").text == (
            "This limits deploy to 10 starts per minute: 3 started in the last minute (it has a rate of 5). "
            "Nothing has changed yet.")
        css(browser, "#confirm-back").click()
        assert wait_for(lambda: css(browser, "h1").text == "Overview")
        assert [r["per_minute"] for r in queue.limits()] == [5]
        field = css(browser, "#per-job input[name=per_minute]")
        field.clear()
        field.send_keys("10")
        click_button(browser, "Set rate…", "#per-job")
        click_button(browser, "Set the rate to 10 per minute", "#confirm")
        assert [r["per_minute"] for r in queue.limits()] == [10]
        assert "deploy: at most 10 started in any minute" in css(browser, "#flash").text
        assert "3 / 10 per minute" in css(browser, "#per-job td.rate").text
