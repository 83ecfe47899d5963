"""Why a pending job waits: the pure decision, table-driven; then `show` and `ls` saying it (real database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.queue import Pause
from jenkins_dispatch.waiting import JenkinsOutage, duration, why_waiting

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=12)
EARLIER = NOW - timedelta(minutes=3)
JOB_PAUSE = Pause("deploy", NOW - timedelta(hours=1), "alice", "release freeze")
ALL_PAUSE = Pause(None, NOW - timedelta(minutes=5), "bob", None)
OUTAGE = JenkinsOutage(NOW - timedelta(minutes=2), "Jenkins answered 503")


def row(status="pending", scheduled_at=EARLIER, attempts=0, last_error=None):
    return {"job_name": "deploy", "status": status, "scheduled_at": scheduled_at, "attempts": attempts,
            "max_attempts": 3, "last_error": last_error}


FREE = dict(job_cap=None, job_in_flight=0, global_cap=None, total_in_flight=0, pause=None)

CASES = [
    # (what, row, conditions, code, text)
    ("not pending", row(status="processing"), dict(FREE, pause=JOB_PAUSE), None, None),
    ("nothing holds it", row(), FREE, "due", "due for 3m: the next dispatcher pass takes it"),
    ("job paused", row(), dict(FREE, pause=JOB_PAUSE), "paused",
     "paused since 2026-11-30 11:00:00 UTC by alice: release freeze (`jenkins-dispatch resume deploy` lifts it)"),
    ("everything paused", row(), dict(FREE, pause=ALL_PAUSE), "paused",
     "everything is paused since 2026-11-30 11:55:00 UTC by bob (`jenkins-dispatch resume` lifts it)"),
    ("paused beats not due, caps, Jenkins", row(scheduled_at=LATER),
     dict(job_cap=1, job_in_flight=1, global_cap=1, total_in_flight=1, pause=JOB_PAUSE, jenkins_unavailable=OUTAGE),
     "paused", None),
    ("not due", row(scheduled_at=LATER), FREE, "not_due", "not due until 2026-11-30 12:12:00 UTC (in 12m)"),
    ("not due beats a full cap", row(scheduled_at=LATER), dict(FREE, job_cap=1, job_in_flight=1), "not_due", None),
    ("backing off", row(scheduled_at=NOW + timedelta(seconds=40), attempts=2, last_error="Jenkins answered 500"),
     FREE, "backing_off",
     "backing off until 2026-11-30 12:00:40 UTC (in 40s) after attempt 2 of 3: Jenkins answered 500"),
    ("backing off beats caps and Jenkins", row(scheduled_at=LATER, attempts=1),
     dict(FREE, global_cap=2, total_in_flight=2, jenkins_unavailable=OUTAGE), "backing_off", None),
    ("job cap full", row(), dict(FREE, job_cap=3, job_in_flight=3), "job_cap", "job cap full (3/3 in flight)"),
    ("job cap of 0", row(), dict(FREE, job_cap=0), "job_cap", None),
    ("job cap with room", row(), dict(FREE, job_cap=3, job_in_flight=2), "due", None),
    ("job cap beats global cap", row(), dict(FREE, job_cap=1, job_in_flight=1, global_cap=1, total_in_flight=1),
     "job_cap", None),
    ("global cap full", row(), dict(FREE, global_cap=8, total_in_flight=8), "global_cap",
     "global cap full (8/8 in flight, MAX_IN_FLIGHT)"),
    ("global cap beats Jenkins", row(), dict(FREE, global_cap=8, total_in_flight=9, jenkins_unavailable=OUTAGE),
     "global_cap", None),
    ("Jenkins unavailable", row(), dict(FREE, jenkins_unavailable=OUTAGE), "jenkins_unavailable",
     "Jenkins unavailable since 2026-11-30 11:58:00 UTC: Jenkins answered 503"),
    ("released earlier, due again", row(attempts=0, last_error="not sent: the pass stopped"), FREE, "due", None),
]


@pytest.mark.parametrize(("what", "the_row", "conditions", "code", "text"), CASES, ids=[c[0] for c in CASES])
def test_why_waiting(what, the_row, conditions, code, text):
    waiting = why_waiting(the_row, NOW, **conditions)
    if code is None:
        assert waiting is None
        return
    assert waiting.code == code, waiting
    if text is not None:
        assert waiting.text == text


def test_a_wait_until_a_time_says_the_time():
    assert why_waiting(row(scheduled_at=LATER), NOW, **FREE).until == LATER
    assert why_waiting(row(), NOW, **FREE).until is None


@pytest.mark.parametrize(("seconds", "text"), [(-5, "0s"), (45, "45s"), (119, "119s"), (720, "12m"),
                                               (3 * 3600 + 300, "3h05m"), (2 * 86400 + 4 * 3600, "2d04h")])
def test_duration(seconds, text):
    assert duration(seconds) == text


# --------------------------------------------------------------------------- show and ls say it


def cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_show_and_ls_say_why_each_pending_job_waits(queue, capsys, monkeypatch):
    monkeypatch.setenv("MAX_IN_FLIGHT", "5")
    held = queue.enqueue("deploy").id
    later = queue.enqueue("build", scheduled_at=datetime.now(UTC) + timedelta(hours=1)).id
    capped = queue.enqueue("migrate").id
    queue.set_limit("migrate", 0)
    queue.pause("deploy", reason="release freeze", paused_by="alice")
    running = queue.enqueue("lint").id
    [job] = queue.claim_batch(1)
    assert job.id == running

    details = cli_json(capsys, "show", str(held))
    assert details["waiting"]["code"] == "paused" and "release freeze" in details["waiting"]["text"]
    assert cli_json(capsys, "show", str(running))["waiting"] is None

    code = main(["show", str(held)])
    out = capsys.readouterr().out
    assert code == 0
    assert any(line.startswith("waiting") and "paused since" in line and "alice" in line for line in out.splitlines())

    rows = {r["id"]: r for r in cli_json(capsys, "ls")}
    assert rows[held]["waiting"]["code"] == "paused"
    assert rows[later]["waiting"]["code"] == "not_due"
    assert rows[capped]["waiting"]["code"] == "job_cap"
    assert rows[running]["waiting"] is None

    assert main(["ls"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "WAITING" in table[0].split()
    line_of = {int(line.split()[0]): line for line in table[1:]}
    assert "paused since" in line_of[held] and "not due until" in line_of[later]
    assert "job cap full (0/0)" in line_of[capped]


def test_ls_reads_why_rows_wait_in_one_statement_for_the_whole_page(queue, db, capsys):
    for n in range(30):
        queue.enqueue(f"job-{n % 7}")
    queue.pause("job-1")
    before = db.statements
    from jenkins_dispatch.operator import list_jobs_waiting

    rows = list_jobs_waiting(queue, None, limit=50)
    assert len(rows) == 30 and db.statements - before == 2  # the page, then one for every row's reason
    assert {r["waiting"]["code"] for r in rows if r["job_name"] == "job-1"} == {"paused"}


def test_a_due_job_waits_for_jenkins_when_the_live_dispatchers_found_it_unavailable(queue, capsys):
    job = queue.enqueue("deploy").id

    def heartbeat(jenkins_ok, reason=None):
        queue.record_heartbeat(dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1,
                               started_at=datetime.now(UTC), stale_after_seconds=300, outcome="ok", detail=None,
                               passes=1, jenkins_ok=jenkins_ok, jenkins_reason=reason)

    heartbeat(False, "Jenkins rejected the credentials of user dispatch")
    waiting = cli_json(capsys, "show", str(job))["waiting"]
    assert waiting["code"] == "jenkins_unavailable"
    assert "since" in waiting["text"] and "rejected the credentials" in waiting["text"]
    assert cli_json(capsys, "ls")[0]["waiting"]["code"] == "jenkins_unavailable"

    heartbeat(True)  # Jenkins answers again
    assert cli_json(capsys, "show", str(job))["waiting"]["code"] == "due"
