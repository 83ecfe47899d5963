"""Issue 15: the web page over real HTTP, on the real database (both engines): every page, every lever (and
that each lands in the job's history with actor `ui`), the CSRF refusal, escaping, bad input, read-only."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.heartbeat import Heartbeat
from jenkins_dispatch.store.queue import FINAL_STATUSES

from ..dispatch_helpers import dispatch_settings, wait_for
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import DEFAULT_JENKINS, PAYLOAD, UiClient, plain_settings

pytestmark = pytest.mark.both_engines


def put(queue, db, job, status, error=None, parameters=None, hours_ago=0.0):
    """A row of `job` in `status` (final rows finished `hours_ago`), with `error` as last_error."""
    job_id = queue.enqueue(job, parameters or {}).id
    at = datetime.now(UTC) - timedelta(hours=hours_ago)
    db.run("UPDATE jenkins_jobs_queue SET status = :status, last_error = :error, finished_at = :finished_at, "
           "updated_at = :at WHERE id = :id",
           id=job_id, status=status, error=error, at=at, finished_at=at if status in FINAL_STATUSES else None)
    return job_id


def history(queue, job_id):
    return [(e["event"], e["from_status"], e["to_status"], e["actor"]) for e in queue.events(job_id)]


def ids_listed(page: str) -> list[int]:
    import re

    return [int(i) for i in re.findall(r'<td><a href="/jobs/(\d+)">', page)]


# --------------------------------------------------------------------------- pages


def test_every_answer_carries_the_security_headers(client):
    for path in ("/", "/jobs", "/jobs/12345", "/static/ui.css", "/nowhere"):
        answer = client.get(path)
        csp = answer.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Referrer-Policy"] == "no-referrer"
    cookie = client.get("/").headers.get("Set-Cookie") or ""
    fresh = UiClient(client.base_url).get("/").headers["Set-Cookie"]
    assert "HttpOnly" in fresh and "SameSite=Strict" in fresh and cookie == ""  # set once per session


def test_overview_shows_counts_caps_pauses_oldest_pending_and_recent_hours(client, queue, db):
    oldest = queue.enqueue("deploy", scheduled_at=datetime.now(UTC) - timedelta(minutes=5)).id
    queue.enqueue("build")
    put(queue, db, "deploy", "failed", "HTTP 404: no such job")
    put(queue, db, "deploy", "completed", hours_ago=2)
    queue.set_limit("deploy", 0)
    queue.pause("build", reason="release freeze", paused_by="alice")
    page = client.get("/")
    assert page.status_code == 200
    text = page.text
    assert 'id="counts"' in text and '<span class="n">2</span> pending' in text
    assert '<span class="n">1</span> failed' in text
    assert f'<a href="/jobs/{oldest}">#{oldest} deploy</a>' in text
    assert "a cap of 0 holds this job back" in text  # why the oldest waits
    assert "0 / 0" in text  # deploy: in flight / cap
    assert "release freeze" in text and "paused" in text
    assert "Jenkins: unknown" in text and "No dispatcher has passed" in text
    throughput = text.split('id="throughput"')[1].split("</table>")[0]
    assert throughput.count("<th>") == 1 + 12 + 3  # 12 hours, then completed, failed, cancelled
    assert '<td class="bad">1</td>' in throughput


def test_overview_shows_each_capped_key_in_flight_against_its_cap(client, queue, db):
    assert 'id="per-key"' not in client.get("/").text  # no key capped: no table
    queue.set_key_limit("deploy:prod", 1)
    queue.set_key_limit("deploy:dev", 2, supersede="running")
    for job in ("deploy", "db-migrate", "deploy"):
        queue.enqueue(job, concurrency_key="deploy:prod")
    queue.claim_batch(1, capped=queue.claim_plan(None).caps)
    keys = client.get("/").text.split('id="per-key"')[1].split("</table>")[0]
    rows = [row.split("</tr>")[0] for row in keys.split("<tr")[2:]]
    assert len(rows) == 2 and "deploy:dev" in rows[0] and "deploy:prod" in rows[1], rows
    assert "<td>0 / 2</td><td>0</td><td>yes, running ones stopped too</td>" in rows[0].replace("\n", "")
    assert "<td>1 / 1</td><td>2</td><td>-</td>" in rows[1].replace("\n", "")
    assert 'class="full"' in rows[1] and 'class="full"' not in rows[0]


def test_overview_names_live_dispatchers_and_jenkins_as_last_seen(client, queue, jenkins):
    heartbeat = Heartbeat("cli", dispatcher_id="ui-test-dispatcher")
    queue.enqueue("deploy")
    run_pass(dispatch_settings(jenkins.base_url), heartbeat=heartbeat)
    text = client.get("/").text
    assert "Jenkins: no outage reported by the live dispatchers (latest pass: ui-test-dispatcher)" in text
    assert "<td>ui-test-dispatcher</td><td>cli</td>" in text and "<td>yes</td>" in text  # live
    queue.enqueue("deploy")
    run_pass(dispatch_settings("http://127.0.0.1:9/"), heartbeat=heartbeat)  # nothing listens there
    text = client.get("/").text
    assert 'class="jenkins-down">' in text and "Jenkins unavailable since" in text


def test_jobs_filters_by_status_job_time_error_and_parameters(client, queue, db):
    timeout = put(queue, db, "deploy", "failed", "Jenkins timeout after 10 s", {"ENV": "prod"})
    missing = put(queue, db, "build", "failed", "HTTP 404: no such job", {"ENV": "dev"})
    old = put(queue, db, "deploy", "completed", None, {"ENV": "prod", "N": 5}, hours_ago=3)
    pending = queue.enqueue("deploy", {"ENV": "prod"}).id
    cases = {
        "": [pending, old, missing, timeout],
        "?status=failed": [missing, timeout],
        "?job=deploy": [pending, old, timeout],
        "?since=1h": [pending, missing, timeout],
        "?error=TIMEOUT": [timeout],
        "?param=ENV%3Dprod": [pending, old, timeout],
        "?param=ENV%3Dprod&param=N%3D5": [old],
        "?status=failed&job=deploy&since=1h&error=timeout&param=ENV%3Dprod": [timeout],
        "?error=50%25": [],
    }
    for query, expected in cases.items():
        page = client.get("/jobs" + query)
        assert page.status_code == 200, (query, page.text)
        assert ids_listed(page.text) == expected, query
    assert "why" not in client.get("/jobs?status=pending").text.split('id="jobs"')[0]  # the filters keep their values


def test_jobs_pages_by_id_newest_first(client, queue):
    ids = [queue.enqueue("deploy").id for _ in range(5)]
    first = client.get("/jobs?limit=2")
    assert ids_listed(first.text) == [ids[4], ids[3]]
    older = html.unescape(first.text.split('id="older"')[0].rsplit('href="', 1)[1].split('"')[0])
    assert older == f"/jobs?limit=2&before={ids[3]}"
    assert ids_listed(client.get(older).text) == [ids[2], ids[1]]
    assert ids_listed(client.get(f"/jobs?limit=2&before={ids[1]}").text) == [ids[0]]


def test_jobs_page_reloads_itself_with_the_self_served_script_only(make_ui):
    server = make_ui(refresh_seconds=7)
    page = UiClient(server.url).get("/jobs").text
    assert 'data-refresh="7"' in page and '<script src="/static/ui.js" defer></script>' in page
    assert page.count("<script") == 1 and "style=" not in page
    script = UiClient(server.url).get("/static/ui.js")
    assert script.headers["Content-Type"].startswith("text/javascript") and "data-live" in script.text
    assert "location.reload" not in script.text  # the changing parts only, never a full reload


def test_job_page_shows_fields_parameters_links_history_and_why_it_waits(client, queue, jenkins):
    job_id = queue.enqueue("team/app/deploy", {"VERSION": "1.2.3"}, priority=4,
                           scheduled_at=datetime.now(UTC) + timedelta(hours=1)).id
    text = client.get(f"/jobs/{job_id}").text
    assert "<th>VERSION</th><td>1.2.3</td>" in text
    assert "<th>priority</th><td>4</td>" in text and "<th>max_attempts</th><td>3</td>" in text
    assert re.search(r"<th>scheduled_at</th><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>", text)  # as history's
    assert 'id="waiting">Waiting: not due until' in text
    assert f'href="{jenkins.base_url}job/team/job/app/job/deploy/"' in text
    assert "<strong>enqueued</strong> ∅ → pending" in text and "by operator" in text


def test_job_page_links_the_jenkins_queue_item_once_triggered(client, queue, jenkins):
    job_id = queue.enqueue("waiting").id  # a 30 s quiet period: it stays in Jenkins's queue
    run_pass(dispatch_settings(jenkins.base_url))
    queue_id = queue.get(job_id)["jenkins_queue_id"]
    text = client.get(f"/jobs/{job_id}").text
    assert f'href="{jenkins.base_url}queue/item/{queue_id}/api/json"' in text
    assert "<strong>triggered</strong> processing → processing" in text and "by dispatcher" in text


def test_job_page_tells_its_story_first(client, queue, jenkins):
    """Issue 36: a job's page was its table's columns in storage order; it now opens with one sentence."""
    waiting = queue.enqueue("waiting").id  # a 30 s quiet period: it stays in Jenkins's queue
    run_pass(dispatch_settings(jenkins.base_url))
    text = client.get(f"/jobs/{waiting}").text
    assert re.search(r'id="story">Queued in Jenkins for \d+s, waited \d+s\.<', text), text[:3000]
    built = queue.enqueue("deploy").id
    [job] = [j for j in queue.claim_batch(5) if j.id == built]
    queue.mark_triggered(job, 100, build_number=72)
    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS", build_number=72)
    assert re.search(r'id="story">Built as #72, waited \d+s: SUCCESS\.<', client.get(f"/jobs/{built}").text)
    assert 'id="story">Waiting for ' in client.get(f"/jobs/{queue.enqueue('later').id}").text


def test_the_list_tells_apart_waiting_for_jenkins_queued_and_building_and_dates_relative(client, queue, db):
    """Issue 36: every row in flight read `processing`; and updated times were absolute only. Now each in-flight
    row says which of the three it is, each status is a badge, and each time is relative with the exact UTC time
    on hover."""
    ids = [queue.enqueue("deploy", {"N": n}).id for n in range(3)]
    claimed = {j.id: j for j in queue.claim_batch(3)}
    queue.mark_triggered(claimed[ids[1]], 201)
    queue.mark_triggered(claimed[ids[2]], 202, build_number=7)
    text = client.get("/jobs").text
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r'<tr class="status-\w+">\s*(?:<td>.*?</td>\s*)?'
                                                               r'<td><a href="/jobs/(\d+)">.*?</a></td>(.*?)</tr>',
                                                               text, re.S)}
    phases = {i: re.search(r'class="phase">([^<]+)<', rows[i]).group(1) for i in ids}
    assert phases == {ids[0]: "waiting for Jenkins", ids[1]: "queued in Jenkins", ids[2]: "building"}
    assert all('<span class="status status-processing">processing</span>' in rows[i] for i in ids)
    when = re.search(r'<time datetime="([^"]+)" title="([^"]+)">([^<]+)</time>', rows[ids[0]])
    assert when and when.group(2).endswith(" UTC") and re.fullmatch(r"\d+s ago", when.group(3)), rows[ids[0]]


def test_the_list_shows_parameters_at_a_glance_and_how_long_each_row_waited_and_ran(client, queue, db):
    """Issue 36: the list had no parameters and no durations: which deploy, and how long it took, needed a click."""
    done = queue.enqueue("deploy", {"ENV": "prod", "VERSION": "1.4.1"}).id
    db.run("UPDATE jenkins_jobs_queue SET status = 'completed', jenkins_result = 'SUCCESS', build_number = 3, "
           "created_at = :t0, scheduled_at = :t0, started_at = :t1, finished_at = :t2 WHERE id = :id",
           id=done, t0=datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC), t1=datetime(2026, 1, 1, 10, 0, 41, tzinfo=UTC),
           t2=datetime(2026, 1, 1, 10, 3, 53, tzinfo=UTC))
    text = client.get("/jobs").text
    row = text.split(f'<a href="/jobs/{done}">', 1)[1].split("</tr>", 1)[0]
    assert '<td class="params">ENV=prod VERSION=1.4.1</td>' in row, row
    assert '<td class="took">waited 41s, ran 3m12s</td>' in row, row


def test_user_data_renders_as_text(client, queue, db):
    job_id = put(queue, db, "deploy", "failed", f"boom {PAYLOAD}", {"ENV": PAYLOAD, PAYLOAD: "x"})
    escaped = html.escape(PAYLOAD, quote=False)
    for path in (f"/jobs/{job_id}", "/jobs", "/jobs?error=" + PAYLOAD):
        text = client.get(path).text
        assert PAYLOAD not in text and "<img" not in text, path
        assert escaped in text or html.escape(PAYLOAD) in text, path


# --------------------------------------------------------------------------- levers


def test_retry_sends_a_final_job_back_to_pending_as_ui(client, queue, db):
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    client.get(f"/jobs/{job_id}")
    asked = client.post(f"/jobs/{job_id}/retry")
    assert asked.status_code == 200 and 'id="confirm"' in asked.text
    assert f"sends job {job_id} of deploy, failed, back to pending" in asked.text
    assert queue.get(job_id)["status"] == "failed" and len(queue.events(job_id)) == 1  # asking changes nothing
    answer = client.post(f"/jobs/{job_id}/retry", {"confirm": "yes"})
    assert answer.status_code == 200 and answer.url.endswith(f"/jobs/{job_id}")
    assert f"job {job_id} is pending again" in answer.text
    assert queue.get(job_id)["status"] == "pending"
    assert history(queue, job_id)[-1] == ("retried", "failed", "pending", "ui")


def test_cancel_a_pending_job_as_ui(client, queue):
    job_id = queue.enqueue("deploy").id
    asked = client.post(f"/jobs/{job_id}/cancel")
    assert f"cancels job {job_id} of deploy, pending" in asked.text and queue.get(job_id)["status"] == "pending"
    answer = client.post(f"/jobs/{job_id}/cancel", {"confirm": "yes"})
    assert f"job {job_id} cancelled" in answer.text
    row = queue.get(job_id)
    assert row["status"] == "cancelled" and row["last_error"] == "cancelled from the web page"
    assert history(queue, job_id)[-1] == ("cancelled", "pending", "cancelled", "ui")


def test_cancel_a_running_job_stops_its_build_in_jenkins(client, queue, jenkins):
    job_id = queue.enqueue("deploy", {"EMULATOR_DURATION": "30"}).id
    run_pass(dispatch_settings(jenkins.base_url))
    assert wait_for(lambda: jenkins.builds("deploy"))
    answer = client.post(f"/jobs/{job_id}/cancel", {"confirm": "yes"})
    assert answer.status_code == 200 and f"job {job_id} cancelled" in answer.text
    assert wait_for(lambda: jenkins.builds("deploy")[0].result == "ABORTED")
    assert queue.get(job_id)["status"] == "cancelled"
    assert history(queue, job_id)[-1][2:] == ("cancelled", "ui")


def test_retrying_a_pending_job_says_already_pending_as_the_cli_does(client, queue, db):
    job_id = queue.enqueue("deploy").id
    for form in ({}, {"confirm": "yes"}):
        answer = client.post(f"/jobs/{job_id}/retry", form)
        assert answer.status_code == 200 and f"job {job_id} is already pending; nothing changed" in answer.text
    assert len(queue.events(job_id)) == 1
    assert [c.id for c in queue.claim_batch(1)] == [job_id]
    answer = client.post(f"/jobs/{job_id}/retry", {"confirm": "yes"})
    assert answer.status_code == 409 and "only completed, failed or cancelled jobs can be retried" in answer.text
    assert "Traceback" not in answer.text and len(queue.events(job_id)) == 2  # enqueued, claimed


def test_pause_and_resume_a_job_and_everything(client, queue):
    queue.enqueue("deploy")
    queue.enqueue("DEPLOY")
    asked = client.post("/pause", {"job": "deploy", "next": "/jobs"})
    assert "pauses all 2 pending rows of deploy" in asked.text and queue.pauses() == []
    answer = client.post("/pause", {"job": "deploy", "next": "/jobs", "confirm": "yes"})
    assert answer.url.endswith("/jobs") and "paused deploy: 2 pending job(s) wait" in answer.text
    [pause] = queue.pauses()
    assert (pause.job_name, pause.paused_by) == ("deploy", "ui")
    asked = client.post("/pause", {"next": "/"})
    assert "pauses every job: all 2 pending rows wait" in asked.text and len(queue.pauses()) == 1
    client.post("/pause", {"next": "/", "confirm": "yes"})
    assert {p.job_name for p in queue.pauses()} == {None, "deploy"}
    assert "Everything is paused" in client.get("/").text
    client.post("/resume", {})
    client.post("/resume", {"job": "deploy"})
    assert queue.pauses() == []


def test_schedules_are_listed_with_next_tick_last_row_and_state_and_pause_and_resume(client, queue, db):
    from datetime import timedelta

    from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
    from jenkins_dispatch.operating.scheduling import add_schedule
    from jenkins_dispatch.store.schedules import Schedules

    schedules = Schedules(db)
    assert "No schedules" in client.get("/").text
    add_schedule(schedules, "nightly", "deploy", cron="0 3 * * *", timezone="Europe/Berlin")
    add_schedule(schedules, "often", "build", cron="* * * * *")
    db.run("UPDATE jenkins_job_schedules SET next_tick = :t WHERE name = 'often'",
           t=schedules.now() - timedelta(seconds=1))
    enqueue_due_ticks(schedules)
    [row] = queue.list_jobs()
    page = client.get("/").text
    assert "nightly" in page and "Europe/Berlin" in page and f'href="/jobs/{row["id"]}"' in page
    answer = client.post("/schedules/pause", {"schedule": "nightly", "next": "/"})
    assert "schedule nightly paused" in answer.text and "paused" in answer.text
    assert schedules.get("nightly")["state"] == "paused" and schedules.get("nightly")["paused_by"] == "ui"
    answer = client.post("/schedules/resume", {"schedule": "nightly", "next": "/"})
    assert "schedule nightly resumed: next tick" in answer.text
    assert schedules.get("nightly")["state"] == "enabled"
    assert client.post("/schedules/pause", {"schedule": "ghost", "next": "/"}).status_code == 404


def test_edit_and_remove_a_cap_each_asked_first_and_kept_in_the_caps_history(client, queue):
    asked = client.post("/caps", {"job": "deploy", "cap": "3"})
    assert "sets the cap of deploy to 3 in flight (it has no cap)" in asked.text and queue.limits() == []
    client.post("/caps", {"job": "deploy", "cap": "3", "confirm": "yes"})
    assert [(r["job_name"], r["max_in_flight"]) for r in queue.limits()] == [("deploy", 3)]
    assert "deploy: the cap is already 3" in client.post("/caps", {"job": "deploy", "cap": "3"}).text
    asked = client.post("/caps", {"job": "deploy", "cap": ""})
    assert "removes the cap of deploy" in asked.text and len(queue.limits()) == 1
    answer = client.post("/caps", {"job": "deploy", "cap": "", "confirm": "yes"})
    assert "deploy: no cap" in answer.text and queue.limits() == []
    changes = [(c["job_name"], c["previous"], c["max_in_flight"], c["changed_by"]) for c in queue.limit_history()]
    assert changes == [("deploy", 3, None, "ui"), ("deploy", None, 3, "ui")]
    overview = client.get("/").text.split('id="cap-changes"')[1].split("</ol>")[0]
    assert "3 → no cap" in overview and "no cap → 3" in overview and "by ui" in overview


def test_rate_changes_show_in_the_caps_history_beside_the_cap_changes(client, queue):
    queue.set_rate("deploy", 5, changed_by="alice@ops")
    queue.set_limit("deploy", 2, changed_by="bob@ops")
    queue.remove_rate("deploy", changed_by="carol@ops")
    overview = client.get("/").text.split('id="cap-changes"')[1].split("</ol>")[0]
    items = [html.unescape(li.split("</time>")[1].split("</li>")[0]) for li in overview.split("<li>")[1:]]
    assert [" ".join(i.replace("<strong>", "").replace("</strong>", "").split()) for i in items] == [
        'deploy: 5 per minute → no rate <span class="actor">by carol@ops</span>',
        'deploy: no cap → 2 <span class="actor">by bob@ops</span>',
        'deploy: no rate → 5 per minute <span class="actor">by alice@ops</span>',
    ]


def test_bulk_retry_shows_the_count_then_acts_on_confirmation(client, queue, db):
    failed = [put(queue, db, "deploy", "failed", "Jenkins timeout") for _ in range(3)]
    other = put(queue, db, "build", "failed", "Jenkins timeout")
    preview = client.get("/bulk?action=retry&status=failed&job=deploy")
    assert preview.status_code == 200 and "3 jobs match" in preview.text
    assert 'data-refresh="0"' in preview.text  # a confirmation never reloads itself
    assert all(queue.get(i)["status"] == "failed" for i in failed)  # looking changes nothing
    done = client.post("/bulk", {"action": "retry", "status": "failed", "job": "deploy"})
    assert done.status_code == 200 and "retried 3 of 3 jobs" in done.text
    assert [queue.get(i)["status"] for i in failed] == ["pending"] * 3
    assert queue.get(other)["status"] == "failed"
    assert all(history(queue, i)[-1] == ("retried", "failed", "pending", "ui") for i in failed)


def test_bulk_cancel_of_a_filter(client, queue):
    ids = [queue.enqueue("deploy").id for _ in range(2)]
    keep = queue.enqueue("build").id
    assert "2 jobs match" in client.get("/bulk?action=cancel&job=deploy").text
    done = client.post("/bulk", {"action": "cancel", "job": "deploy"})
    assert "cancelled 2 of 2 jobs" in done.text
    assert [queue.get(i)["status"] for i in ids] == ["cancelled", "cancelled"]
    assert queue.get(keep)["status"] == "pending"
    assert history(queue, ids[0])[-1] == ("cancelled", "pending", "cancelled", "ui")


# --------------------------------------------------------------------------- refusals


def test_a_post_without_or_with_a_wrong_csrf_token_changes_nothing(client, make_ui, queue, db):
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    other_session = UiClient(client.base_url)
    other_session.get("/")
    for token in (None, "", "wrong", other_session.csrf):
        for path, form in ((f"/jobs/{job_id}/retry", {}), ("/pause", {}), ("/caps", {"job": "deploy", "cap": "1"}),
                           ("/bulk", {"action": "retry", "status": "failed"})):
            answer = client.post(path, form, csrf=token)
            assert answer.status_code == 403, (path, token)
            assert "form token is missing or wrong" in answer.text and "Nothing was changed" in answer.text
    assert queue.get(job_id)["status"] == "failed" and len(queue.events(job_id)) == 1
    assert queue.pauses() == [] and queue.limits() == []


@pytest.mark.parametrize(("path", "status", "message"), [
    ("/jobs/999999", 404, "no job with id 999999"),
    ("/jobs/abc", 404, "there is no job &#39;abc&#39;"),
    ("/jobs/0", 404, "there is no job"),
    ("/jobs?status=bogus", 400, "status: unknown status"),
    ("/jobs?since=yesterday-ish", 400, "bad time"),
    ("/jobs?param=no-equals-sign", 400, "param: expected KEY=VALUE"),
    ("/jobs?param=a%20b%3D1", 400, "param: expected KEY=VALUE"),
    ("/jobs?before=-3", 400, "before: expected a job id"),
    ("/jobs?limit=100000", 400, "limit: expected a whole number from 1 to 500"),
    ("/bulk?action=explode&status=failed", 400, "action: expected retry or cancel"),
    ("/bulk?action=cancel&status=completed", 400, "completed jobs are final and cannot be cancelled"),
    ("/bulk?action=retry", 400, "name job ids or select jobs"),
    ("/bulk?action=retry&id=1&status=failed", 400, "give job ids or filters, not both"),
    ("/bulk?action=retry&id=x", 400, "id: expected a job id"),
    ("/no/such/page", 404, "There is no page at /no/such/page"),
])
def test_bad_input_answers_a_clear_page(client, path, status, message):
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    assert message in answer.text and "Traceback" not in answer.text


@pytest.mark.parametrize("cap", ["-1", "many", "1.5", "99999999999"])
def test_a_bad_cap_answers_400_and_changes_nothing(client, queue, cap):
    answer = client.post("/caps", {"job": "deploy", "cap": cap, "confirm": "yes"})
    assert answer.status_code == 400 and "cap: expected a whole number" in answer.text
    assert queue.limits() == []


def test_read_only_hides_the_levers_and_refuses_every_post(make_ui, queue, db):
    server = make_ui(read_only=True)
    reader = UiClient(server.url)
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    for path in ("/", "/jobs?status=failed", f"/jobs/{job_id}"):
        text = reader.get(path).text
        assert 'method="post"' not in text and "read-only" in text, path
    for path, form in ((f"/jobs/{job_id}/retry", {}), ("/pause", {}), ("/caps", {"job": "deploy", "cap": "1"}),
                       ("/bulk", {"action": "retry", "status": "failed"})):
        answer = reader.post(path, form)
        assert answer.status_code == 403 and "--read-only" in answer.text, path
    assert reader.get("/bulk?action=retry&status=failed").status_code == 404
    assert queue.get(job_id)["status"] == "failed" and queue.pauses() == [] and queue.limits() == []


def test_loopback_without_a_token_answers_only_to_loopback_host_names(make_ui):
    server = make_ui()
    reader = UiClient(server.url)
    assert reader.get("/", headers={"Host": "evil.example:8081"}).status_code == 421
    assert reader.get("/", headers={"Host": "localhost:8081"}).status_code == 200


def test_with_a_token_the_login_form_sets_a_strict_http_only_cookie(make_ui, queue):
    server = make_ui(plain_settings(UI_TOKEN="s3cret-token"))
    browser = UiClient(server.url)
    first = browser.get("/")
    assert first.url.endswith("/login") and 'type="password"' in first.text
    assert browser.http.post(server.url + "pause", data={"csrf": browser.csrf}).status_code == 403
    wrong = browser.post("/login", {"token": "guess"})
    assert wrong.status_code == 403 and "not the one configured" in wrong.text and "s3cret" not in wrong.text
    right = browser.post("/login", {"token": "s3cret-token"}, allow_redirects=False)
    assert right.status_code == 303
    cookie = right.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = browser.get("/")
    assert page.status_code == 200 and "Overview" in page.text and "s3cret" not in page.text
    assert browser.post("/pause", {"confirm": "yes"}).status_code == 200 and queue.pauses()[0].paused_by == "ui"
    assert "s3cret" not in repr(server.app.settings)


def test_bulk_by_parameter_and_by_the_ids_ticked_in_the_list(client, queue, db):
    prod = [put(queue, db, "deploy", "failed", "boom", {"ENV": "prod"}) for _ in range(2)]
    dev = put(queue, db, "deploy", "failed", "boom", {"ENV": "dev"})
    assert "2 jobs match" in client.get("/bulk?action=retry&param=ENV%3Dprod").text
    done = client.post("/bulk", {"action": "retry", "param": "ENV=prod"})
    assert "retried 2 of 2 jobs" in done.text and queue.get(dev)["status"] == "failed"
    preview = client.get(f"/bulk?action=cancel&id={prod[0]}&id={prod[1]}")
    assert "2 jobs match" in preview.text and "ticked in the list" in preview.text
    assert [queue.get(i)["status"] for i in prod] == ["pending"] * 2
    done = client.post("/bulk", {"action": "cancel", "id": [str(i) for i in prod]})
    assert "cancelled 2 of 2 jobs" in done.text and [queue.get(i)["status"] for i in prod] == ["cancelled"] * 2


# --------------------------------------------------------------------------- who did it


def test_the_operator_a_trusted_proxy_names_is_recorded_everywhere(make_ui, queue, db):
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.0/8",
                                    **DEFAULT_JENKINS))
    proxy = UiClient(server.url)
    proxy.http.headers["X-Forwarded-User"] = "alice@example.com"
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    proxy.post(f"/jobs/{job_id}/retry", {"confirm": "yes"})
    proxy.post("/pause", {"job": "deploy", "confirm": "yes"})
    proxy.post("/caps", {"job": "deploy", "cap": "2", "confirm": "yes"})
    assert history(queue, job_id)[-1] == ("retried", "failed", "pending", "ui:alice@example.com")
    assert queue.pauses()[0].paused_by == "ui:alice@example.com"
    assert queue.limit_history()[0]["changed_by"] == "ui:alice@example.com"
    assert "by ui:alice@example.com" in proxy.get(f"/jobs/{job_id}").text


def test_the_same_header_from_an_untrusted_address_is_ignored(make_ui, queue, db):
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="10.9.8.0/24"))
    stranger = UiClient(server.url)
    stranger.http.headers["X-Forwarded-User"] = "mallory"
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    stranger.post(f"/jobs/{job_id}/retry", {"confirm": "yes"})
    stranger.post("/pause", {"job": "deploy", "confirm": "yes"})
    assert history(queue, job_id)[-1] == ("retried", "failed", "pending", "ui")
    assert queue.pauses()[0].paused_by == "ui"


def _post_with_headers(client: UiClient, path: str, form: dict, headers: list[tuple[str, str]]):
    """POST ``form`` with the page's token and cookie, sending ``headers`` line by line (a header may come twice,
    which requests cannot send): the status and the page."""
    import http.client
    from urllib.parse import urlencode, urlsplit

    client.get("/")
    body = urlencode({**form, "csrf": client.csrf}).encode()
    where = urlsplit(client.base_url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        connection.putrequest("POST", path)
        cookie = "; ".join(f"{c.name}={c.value}" for c in client.http.cookies)
        for name, value in [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", str(len(body))),
                            ("Cookie", cookie), *headers]:
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, html.unescape(answer.read().decode())
    finally:
        connection.close()


@pytest.mark.parametrize("headers", [
    [("X-Forwarded-User", "alice"), ("X-Forwarded-User", "mallory")],  # waitress joins them: "alice, mallory"
    [("X-Forwarded-User", "alice, mallory")],
], ids=["two-lines", "one-line-two-names"])
def test_a_trusted_header_naming_two_operators_refuses_the_lever(make_ui, queue, db, headers):
    """Issue 33: two values of UI_TRUSTED_USER_HEADER from a trusted proxy were merged and recorded as
    `ui:alice, mallory`. The lever is refused (400, one line, nothing changed); pages still show."""
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.0/8",
                                    **DEFAULT_JENKINS))
    proxy = UiClient(server.url)
    job_id = put(queue, db, "deploy", "failed", "HTTP 404")
    before = history(queue, job_id)
    for path, form in ((f"/jobs/{job_id}/retry", {"confirm": "yes"}), ("/pause", {"job": "deploy", "confirm": "yes"}),
                       ("/caps", {"job": "deploy", "cap": "2", "confirm": "yes"})):
        status, page = _post_with_headers(proxy, path, form, headers)
        assert status == 400, (path, page)
        assert "x-forwarded-user: the login proxy named more than one operator" in page.lower(), path
    assert history(queue, job_id) == before and queue.pauses() == [] and queue.limit_history() == []
    shown = proxy.http.get(f"{proxy.base_url}/jobs/{job_id}", headers={"X-Forwarded-User": "alice, mallory"},
                           timeout=30)
    assert shown.status_code == 200 and "HTTP 404" in shown.text  # a page records nothing: it still shows
    status, page = _post_with_headers(proxy, "/pause", {"job": "deploy", "confirm": "yes"},
                                      [("X-Forwarded-User", "alice")])
    assert status == 303 and queue.pauses()[0].paused_by == "ui:alice"


@pytest.mark.parametrize(("path", "form"), [
    ("/pause", {"job": "de\tploy"}),
    ("/caps", {"job": "de\tploy", "cap": "2"}),
    ("/rates", {"job": "de\tploy", "per_minute": "2"}),
    ("/caps", {"job": "j" * 1025, "cap": "2"}),
])
def test_a_lever_refuses_a_job_name_the_queue_cannot_take(client, queue, path, form):
    for confirm in ({}, {"confirm": "yes"}):
        answer = client.post(path, {**form, **confirm})
        assert answer.status_code == 400 and "job:" in answer.text, answer.text
    assert queue.pauses() == [] and queue.limits() == [] and queue.limit_history() == []


def test_html_in_an_operator_name_and_a_cap_change_renders_as_text(make_ui, queue, db):
    server = make_ui(plain_settings(UI_TRUSTED_USER_HEADER="X-Forwarded-User", UI_TRUSTED_PROXIES="127.0.0.1",
                                    **DEFAULT_JENKINS))
    proxy = UiClient(server.url)
    proxy.http.headers["X-Forwarded-User"] = PAYLOAD
    job_id = put(queue, db, PAYLOAD, "failed", PAYLOAD, {"ENV": PAYLOAD})
    for form in ({}, {"confirm": "yes"}):
        assert "<img" not in proxy.post(f"/jobs/{job_id}/retry", form).text
        assert "<img" not in proxy.post("/caps", {"job": PAYLOAD, "cap": "1", **form}).text
        assert "<img" not in proxy.post("/pause", {"job": PAYLOAD, **form}).text
    for path in ("/", "/jobs", f"/jobs/{job_id}"):
        assert "<img" not in proxy.get(path).text, path


def test_the_list_links_builds_and_consoles_and_offers_row_levers_and_picks(client, queue, db):
    job_id = queue.enqueue("deploy").id
    done = put(queue, db, "deploy", "failed", "boom")
    url = "https://ci.example.com/job/deploy/7/"
    db.run("UPDATE jenkins_jobs_queue SET build_url = :url, build_number = 7 WHERE id = :id", url=url, id=done)
    text = client.get("/jobs").text
    assert f'href="{url}" rel="noopener noreferrer" class="build-link"' in text
    assert f'href="{url.rstrip("/")}/console"' in text
    assert f'action="/jobs/{done}/retry"' in text and f'action="/jobs/{job_id}/cancel"' in text
    assert ">#7</a>" in text
    assert f'name="id" value="{done}" form="pick"' in text and 'id="pick"' in text
    asked = client.post(f"/jobs/{done}/retry", {"next": "/jobs?status=failed"})
    assert "back to pending" in asked.text and queue.get(done)["status"] == "failed"
    answer = client.post(f"/jobs/{done}/retry", {"next": "/jobs?status=failed", "confirm": "yes"})
    assert answer.url.endswith("/jobs?status=failed") and queue.get(done)["status"] == "pending"


def test_count_cards_link_to_their_filtered_lists(client):
    counts = client.get("/").text.split('id="counts"')[1].split("</section>")[0]
    for link in ("/jobs?status=pending", "/jobs?status=processing", "/jobs?status=completed&amp;since=1h",
                 "/jobs?status=failed&amp;since=1h", "/jobs?status=cancelled&amp;since=1h"):
        assert f'href="{link}"' in counts, link


def test_time_page_charts_and_timings_render_with_data_and_escape_names(client, queue, db):
    now = datetime.now(UTC)
    for n, (job, status) in enumerate([("deploy", "completed"), ("deploy", "failed"), (PAYLOAD, "completed")]):
        job_id = queue.enqueue(job, {}).id
        # Finished in one write, as the queue's own transitions do: the trigger counts the row as it finishes.
        db.run("UPDATE jenkins_jobs_queue SET status = :status, created_at = :c, started_at = :s, finished_at = :f "
               "WHERE id = :id", id=job_id, status=status, c=now - timedelta(seconds=100),
               s=now - timedelta(seconds=40 + n), f=now)
    queue.gauges()  # a dispatcher's pass records the queue's depth
    page = client.get("/time")
    assert page.status_code == 200
    text = page.text
    for window in ("hour", "day", "week"):
        assert f'id="chart-{window}"' in text and f'id="depth-{window}"' in text
    assert text.count("<polyline") == 18 and "completed 2</span>" in text and "failed 1</span>" in text
    assert "started 3</span>" in text and "pending up to 0</span>" in text
    # Issue 36: each point says its bucket and value on hover; the right edge is now.
    hour = text.split('id="chart-hour"', 1)[1].split("</figure>", 1)[0]
    # (The rows started 40 s before they finished: that may fall in the bucket before the one under way.)
    assert hour.count("<title>") == 12 and re.search(r"<title>\d\d:\d\d–now UTC: started \d, completed 2, failed 1, "
                                                      r"cancelled 0</title>", hour)
    assert ">now</text>" in hour
    timings = text.split('id="timings"')[1].split("</table>")[0]
    assert "<th>all jobs, last 24 h</th><td>3</td>" in timings and "deploy" in timings
    assert PAYLOAD not in text and html.escape(PAYLOAD) in text
    assert "<script" not in text.split("</head>")[1]  # server-drawn SVG: nothing to run
