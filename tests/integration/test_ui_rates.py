"""Issue 24 on the web page: a job's rate (starts per minute) beside its cap, changed as the cap is (asked first
naming the change and the job's last minute, CSRF, refused under --read-only), on the real database (both
engines). The starts counted are real ones: rows claimed by the capped claim, as a dispatcher claims them."""

from __future__ import annotations

import pytest

from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import DEFAULT_JENKINS, PAYLOAD, UiClient, plain_settings

pytestmark = pytest.mark.both_engines


def start(queue, job: str, n: int) -> None:
    """``n`` rows of ``job`` started now: enqueued, then claimed as a dispatcher claims a limited job."""
    ids = [queue.enqueue(job).id for _ in range(n)]
    claimed = queue.claim_batch(n, capped=queue.claim_plan(None).caps)
    assert sorted(j.id for j in claimed) == sorted(ids)


def rate_of(queue, job: str) -> tuple[int | None, int | None]:
    """(cap, rate) of ``job`` on the default controller, None where it has none."""
    found = [r for r in queue.limits() if r["job_name"] == job and r["controller"] == "default"]
    return (found[0]["max_in_flight"], found[0]["per_minute"]) if found else (None, None)


def per_job_row(page: str, job: str) -> str:
    """The overview's per-job table row of ``job``."""
    table = page.split('id="per-job"')[1].split("</table>")[0]
    [row] = [r for r in table.split("<tr") if f">{job}</a>" in r]
    return row


def test_a_rate_is_asked_first_naming_the_last_minute_then_set_changed_and_removed(client, queue):
    queue.set_limit("deploy", 2)
    queue.set_rate("deploy", 5)
    start(queue, "deploy", 2)
    assert "2 / 5 per minute" in per_job_row(client.get("/").text, "deploy")

    asked = client.post("/rates", {"job": "deploy", "per_minute": "10"})
    assert asked.status_code == 200 and "Nothing has changed yet" in asked.text
    assert "limits deploy to 10 starts per minute: 2 started in the last minute (it has a rate of 5)" in asked.text
    assert rate_of(queue, "deploy") == (2, 5)  # asked only
    done = client.post("/rates", {"job": "deploy", "per_minute": "10", "confirm": "yes"})
    assert "deploy: at most 10 started in any minute" in done.text
    assert rate_of(queue, "deploy") == (2, 10)  # the cap stays
    assert "2 / 10 per minute" in per_job_row(done.text, "deploy")
    assert "the rate is already 10 per minute; nothing changed" in \
        client.post("/rates", {"job": "deploy", "per_minute": "10"}).text

    asked = client.post("/rates", {"job": "deploy", "per_minute": ""})
    assert "removes the rate of deploy (10 per minute: 2 started in the last minute)" in asked.text
    assert rate_of(queue, "deploy") == (2, 10)
    done = client.post("/rates", {"job": "deploy", "per_minute": "", "confirm": "yes"})
    assert "deploy: no rate" in done.text and rate_of(queue, "deploy") == (2, None)
    assert "deploy had no rate; nothing changed" in client.post("/rates", {"job": "deploy", "per_minute": ""}).text


def test_a_first_rate_on_a_job_without_limits_says_it_has_none(client, queue):
    queue.enqueue("build")
    asked = client.post("/rates", {"job": "build", "per_minute": "3"})
    assert "limits build to 3 starts per minute (it has no rate: its starts are counted from now)" in asked.text
    assert queue.limits() == []
    client.post("/rates", {"job": "build", "per_minute": "3", "confirm": "yes"})
    assert rate_of(queue, "build") == (None, 3)
    assert "0 / 3 per minute" in per_job_row(client.get("/").text, "build")


@pytest.mark.parametrize("rate", ["0", "-1", "many", "1.5", "99999999999"])
def test_a_bad_rate_answers_400_and_changes_nothing(client, queue, rate):
    answer = client.post("/rates", {"job": "deploy", "per_minute": rate, "confirm": "yes"})
    assert answer.status_code == 400 and "per_minute: expected a whole number from 1 to 2147483647" in answer.text
    assert queue.limits() == []


def test_a_rate_change_needs_the_form_token_and_is_refused_read_only(client, make_ui, queue):
    for token in (None, "", "wrong"):
        answer = client.post("/rates", {"job": "deploy", "per_minute": "4", "confirm": "yes"}, csrf=token)
        assert answer.status_code == 403 and "Nothing was changed" in answer.text
    reader = UiClient(make_ui(read_only=True).url)
    queue.set_rate("deploy", 7)
    page = reader.get("/").text
    assert "0 / 7 per minute" in per_job_row(page, "deploy") and 'action="/rates"' not in page
    answer = reader.post("/rates", {"job": "deploy", "per_minute": "4", "confirm": "yes"})
    assert answer.status_code == 403 and "--read-only" in answer.text
    assert rate_of(queue, "deploy") == (None, 7)


def test_html_in_a_job_name_and_an_operator_name_renders_as_text(make_ui, queue):
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.1",
                                    **DEFAULT_JENKINS))
    proxy = UiClient(server.url)
    proxy.http.headers["X-Forwarded-User"] = PAYLOAD
    queue.enqueue(PAYLOAD)
    for form in ({}, {"confirm": "yes"}):
        answer = proxy.post("/rates", {"job": PAYLOAD, "per_minute": "2", **form})
        assert answer.status_code == 200 and "<img" not in answer.text and "&lt;img" in answer.text
    assert rate_of(queue, PAYLOAD) == (None, 2)
    assert "<img" not in proxy.get("/").text


def test_the_operator_behind_a_trusted_proxy_is_recorded_in_the_caps_history(make_ui, queue):
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.1",
                                    **DEFAULT_JENKINS))
    proxy = UiClient(server.url)
    proxy.http.headers["X-Forwarded-User"] = "alice"
    proxy.post("/rates", {"job": "deploy", "per_minute": "6", "confirm": "yes"})
    proxy.post("/rates", {"job": "deploy", "per_minute": "", "confirm": "yes"})
    changes = [(c["kind"], c["previous_per_minute"], c["per_minute"], c["changed_by"]) for c in queue.limit_history()]
    assert changes == [("rate", 6, None, "ui:alice"), ("rate", None, 6, "ui:alice")]  # newest first
