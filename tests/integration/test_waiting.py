"""`show` and `ls` saying why each pending job waits, read from the real database in one statement."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.operating.waiting import JenkinsOutage
from jenkins_dispatch.store.queue import Pause

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=12)
JOB_PAUSE = Pause("deploy", NOW - timedelta(hours=1), "alice", "release freeze")
ALL_PAUSE = Pause(None, NOW - timedelta(minutes=5), "bob", None)
OUTAGE = JenkinsOutage(NOW - timedelta(minutes=2), "Jenkins answered 503")

pytestmark = pytest.mark.both_engines


# --------------------------------------------------------------------------- show and ls say it


def a_live_dispatcher(queue) -> None:
    """A dispatcher that passed a moment ago: without one, a due row is said to wait for a dispatcher to start."""
    queue.record_heartbeat(dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=datetime.now(UTC),
                           stale_after_seconds=300, outcome="ok", detail=None, passes=1)


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


def test_a_row_held_back_only_by_its_own_controllers_pause_is_explained_as_paused(queue, capsys):
    a_live_dispatcher(queue)
    deploy_b = queue.enqueue("deploy", controller="b").id
    deploy_default = queue.enqueue("deploy").id
    build_c = queue.enqueue("build", controller="c").id
    build_b = queue.enqueue("build", controller="b").id
    queue.pause("Deploy", controller="b", reason="b is upgraded", paused_by="alice")  # another spelling of the job
    queue.pause(None, controller="c", paused_by="bob")
    rows = {r["id"]: r["waiting"] for r in cli_json(capsys, "ls")}
    assert rows[deploy_b]["code"] == "paused", rows[deploy_b]
    assert rows[deploy_b]["text"].startswith("paused on b since") and "alice: b is upgraded" in rows[deploy_b]["text"]
    assert "`jenkins-dispatch resume Deploy --controller b`" in rows[deploy_b]["text"]
    assert rows[build_c]["code"] == "paused" and rows[build_c]["text"].startswith("controller c is paused since")
    assert "`jenkins-dispatch resume --controller c`" in rows[build_c]["text"]
    # The other controllers' rows of the same jobs are not held back.
    assert rows[deploy_default]["code"] == "due" and rows[build_b]["code"] == "due"
    assert cli_json(capsys, "show", str(deploy_b))["waiting"] == rows[deploy_b]
    # A pause of every controller says most: it wins over the controller's own.
    queue.pause("deploy")
    text = cli_json(capsys, "show", str(deploy_b))["waiting"]["text"]
    assert text.startswith("paused since") and "`jenkins-dispatch resume deploy`" in text


def test_stats_per_job_says_on_which_controllers_a_job_is_paused(queue, capsys):
    queue.enqueue("deploy", controller="b")
    queue.enqueue("deploy")
    queue.enqueue("lint", controller="b")
    queue.pause("Deploy", controller="b")
    queue.pause("deploy", controller="c")
    queue.pause("nightly", controller="b")  # no rows: listed all the same, as a job paused everywhere is
    jobs = {j["job_name"].lower(): j for j in cli_json(capsys, "stats")["jobs"]}
    assert (jobs["deploy"]["paused"], jobs["deploy"]["paused_on"]) == (False, ["b", "c"])
    assert jobs["nightly"]["paused_on"] == ["b"] and jobs["lint"]["paused_on"] == []
    assert main(["stats"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    [deploy] = [line for line in lines if line[:1] in (["deploy"], ["Deploy"])]
    assert deploy[3:6] == ["paused", "on", "b,"] and deploy[6] == "c", deploy
    # A pause of every controller still reads "paused".
    queue.pause("deploy")
    jobs = {j["job_name"].lower(): j for j in cli_json(capsys, "stats")["jobs"]}
    assert (jobs["deploy"]["paused"], jobs["deploy"]["paused_on"]) == (True, ["b", "c"])


def test_ls_reads_why_rows_wait_in_one_statement_for_the_whole_page(queue, db, capsys):
    for n in range(30):
        queue.enqueue(f"job-{n % 7}")
    queue.pause("job-1")
    before = db.statements
    from jenkins_dispatch.operating.operator import Caps, list_jobs_waiting

    rows = list_jobs_waiting(queue, Caps(), limit=50)
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


def test_each_row_waits_for_its_own_controllers_jenkins(queue, capsys):
    """Several controllers: a row waits for Jenkins only while its own controller is down, as the live
    dispatchers' heartbeats recorded each one (the dispatcher's "Jenkins as a whole" is whichever lane spoke
    last)."""
    on_default = queue.enqueue("deploy").id
    on_b = queue.enqueue("deploy", controller="b").id
    down_since = (datetime.now(UTC) - timedelta(minutes=3)).isoformat(timespec="seconds")
    queue.record_heartbeat(dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=datetime.now(UTC),
                           stale_after_seconds=300, outcome="jenkins_unavailable", detail=None, passes=2,
                           jenkins_ok=False, jenkins_reason="Jenkins unavailable: HTTP 503 (b's lane)",
                           controllers={"default": {"status": "ok", "since": down_since, "reason": None},
                                        "b": {"status": "unavailable", "since": down_since,
                                              "reason": "Jenkins unavailable: HTTP 503"}})
    rows = {r["id"]: r["waiting"] for r in cli_json(capsys, "ls")}
    assert rows[on_default]["code"] == "due", rows[on_default]
    assert rows[on_b]["code"] == "jenkins_unavailable", rows[on_b]
    assert "controller b" in rows[on_b]["text"] and "HTTP 503" in rows[on_b]["text"]



def test_each_row_waits_for_its_own_controllers_caps_and_rates(queue, capsys, monkeypatch):
    a_live_dispatcher(queue)
    """A job's cap and rate are per controller, as the claim keeps them, and so is a controller's own
    max_in_flight: a row is explained by those of its own controller, counted over its controller's rows."""
    for name, value in {"JENKINS_URL": "http://127.0.0.1:9/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("JENKINS_CONTROLLERS", json.dumps(
        {"b": {"url": "http://127.0.0.1:9/b/", "user": "u", "api_token": "t"},
         "c": {"url": "http://127.0.0.1:9/c/", "user": "u", "api_token": "t", "max_in_flight": 1}}))
    queue.set_limit("deploy", 1)
    queue.set_limit("Deploy", 3, controller="b")
    queue.set_rate("lint", 1, controller="b")
    deploy_default = [queue.enqueue("deploy").id for _ in range(2)]
    deploy_b = [queue.enqueue("deploy", controller="b").id for _ in range(2)]
    lint_b = [queue.enqueue("lint", controller="b").id for _ in range(2)]
    lint_default = queue.enqueue("lint").id
    build_c = [queue.enqueue("build", controller="c").id for _ in range(2)]
    assert [j.id for j in queue.claim_batch(1, capped=True)] == deploy_default[:1]
    assert [j.id for j in queue.claim_batch(1, capped=True, controller="b")] == deploy_b[:1]
    assert [j.id for j in queue.claim_batch(5, capped=True, controller="b")] == [deploy_b[1], lint_b[0]]
    assert [j.id for j in queue.claim_batch(5, capped=True, controller="c", controller_max_in_flight=1)] == build_c[:1]

    rows = {r["id"]: r["waiting"] for r in cli_json(capsys, "ls", "--limit", "100")}
    assert rows[deploy_default[1]]["code"] == "job_cap"
    assert rows[deploy_default[1]]["text"] == "job cap full (1/1 in flight)"
    assert rows[lint_b[1]]["code"] == "rate_limit", rows[lint_b[1]]
    assert rows[lint_default]["code"] == "due", rows[lint_default]  # the rate is b's alone
    assert rows[build_c[1]]["code"] == "controller_cap", rows[build_c[1]]
    assert rows[build_c[1]]["text"] == "controller c's cap full (1/1 in flight, max_in_flight in JENKINS_CONTROLLERS)"
    assert cli_json(capsys, "show", str(build_c[1]))["waiting"] == rows[build_c[1]]
    # b's cap is 3 (two in flight there); the default's cap of 1 is not b's.
    queue.enqueue("deploy", controller="b")
    pending_b = max(r["id"] for r in cli_json(capsys, "ls", "--controller", "b", "--status", "pending"))
    assert cli_json(capsys, "show", str(pending_b))["waiting"]["code"] == "due"


def test_a_due_row_waits_for_a_dispatcher_when_none_is_live(queue, capsys):
    """Issue 33: "the next dispatcher pass takes it" is said only while some dispatcher is live."""
    job_id = queue.enqueue("deploy").id
    waiting = cli_json(capsys, "show", str(job_id))["waiting"]
    assert waiting["code"] == "no_dispatcher" and "no dispatcher is running" in waiting["text"], waiting
    queue.record_heartbeat(dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=datetime.now(UTC),
                           stale_after_seconds=300, outcome="stopped", detail="stop requested", passes=1)
    assert cli_json(capsys, "show", str(job_id))["waiting"]["code"] == "no_dispatcher"  # a stopped one is not live
    a_live_dispatcher(queue)
    waiting = cli_json(capsys, "show", str(job_id))["waiting"]
    assert waiting["code"] == "due" and waiting["text"].endswith("the next dispatcher pass takes it"), waiting


def test_a_row_is_said_to_wait_for_the_caps_the_dispatchers_keep_not_the_askers(queue, capsys, monkeypatch):
    """Issue 33: `show` run without MAX_IN_FLIGHT (or without JENKINS_CONTROLLERS) while serve runs with them said "due:
    the next dispatcher pass takes it" of a row the dispatchers held back, and "not configured" of a row of a
    controller they serve. The live dispatchers' heartbeats say which caps and controllers are in force."""
    monkeypatch.delenv("MAX_IN_FLIGHT", raising=False)
    monkeypatch.delenv("JENKINS_CONTROLLERS", raising=False)
    for name, value in {"JENKINS_URL": "http://127.0.0.1:9/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}.items():
        monkeypatch.setenv(name, value)
    for _ in range(3):
        queue.enqueue("deploy")
    assert len(queue.claim_batch(3)) == 3
    held, on_eu = queue.enqueue("deploy").id, queue.enqueue("lint", controller="eu").id
    queue.record_heartbeat(
        dispatcher_id="serve@ci:1", kind="serve", host="ci", pid=1, started_at=datetime.now(UTC),
        stale_after_seconds=300, outcome="ok", detail="cap reached", passes=1,
        controllers={name: {"status": "ok", "since": None, "reason": None, "max_in_flight": 3,
                            "own_max_in_flight": None} for name in ("default", "eu")})
    waiting = cli_json(capsys, "show", str(held))["waiting"]
    assert waiting["code"] == "global_cap" and waiting["text"].startswith("global cap full (3/3 in flight"), waiting
    assert cli_json(capsys, "show", str(on_eu))["waiting"]["code"] == "global_cap"  # eu is served, and full too
