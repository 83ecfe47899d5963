"""The operator CLI against the real database: tables, --json parsed back, bad input → exit 2, one line."""

import json
import re

import pytest

from jenkins_dispatch.cli import main

from ..cli_helpers import exit_code


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_enqueue_ls_show_retry_cancel_round_trip(capsys, queue):
    created = run_json(capsys, "enqueue", "team/app/deploy", "-p", "ENV=prod", "-p", "REF=v1.2",
                       "--priority", "5", "--dedupe-key", "rel-1")
    assert created["created"] is True
    again = run_json(capsys, "enqueue", "team/app/deploy", "--dedupe-key", "rel-1")
    assert again == {"id": created["id"], "created": False}
    jid = created["id"]

    [row] = run_json(capsys, "ls", "--status", "pending")
    assert (row["id"], row["job_name"], row["priority"]) == (jid, "team/app/deploy", 5)
    details = run_json(capsys, "show", str(jid))
    assert details["job"]["parameters"] == {"ENV": "prod", "REF": "v1.2"}
    assert [e["event"] for e in details["history"]] == ["enqueued"]
    assert details["story"].startswith("waiting for ")  # issue 36: the job's story, as its page opens with
    code, out, _ = run(capsys, "show", str(jid))
    assert code == 0 and re.search(r"^story +waiting for \d+s$", out, re.M), out

    code, out, _ = run(capsys, "ls")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ID", "JOB_NAME", "STATUS"]
    assert "team/app/deploy" in out

    assert run_json(capsys, "cancel", str(jid))["status"] == "cancelled"
    assert run_json(capsys, "retry", str(jid))["status"] == "pending"
    code, out, _ = run(capsys, "show", str(jid))
    assert code == 0 and "retried" in out and "cancelled" in out


def test_enqueue_parameters_from_json_and_time(capsys, queue):
    jid = run_json(capsys, "enqueue", "build", "--params", '{"N": 3, "DRY": true}', "--at", "+1h")["id"]
    job = queue.get(jid)
    assert job["parameters"] == {"N": "3", "DRY": True}  # numbers as written: JsonNumber, its digits
    assert queue.claim_batch(5) == []  # scheduled an hour out


@pytest.fixture
def controllers(monkeypatch):
    """Controllers default and eu configured: caps are stored only for a controller configured here."""
    monkeypatch.setenv("JENKINS_CONTROLLERS", json.dumps({
        "default": {"url": "http://127.0.0.1:9/", "user": "u", "api_token": "t"},
        "eu": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t"}}))


def test_limits_and_stats(capsys, queue, controllers):
    assert run_json(capsys, "limits", "set", "deploy", "2") == {"job_name": "deploy", "controller": "default",
                                                                 "max_in_flight": 2, "per_minute": None,
                                                                 "changed": True, "cap_changed": True}
    assert run_json(capsys, "limits", "ls") == [{"controller": "default", "job_name": "deploy", "max_in_flight": 2,
                                                 "in_flight": 0, "per_minute": None, "started_last_minute": 0}]
    queue.enqueue("deploy")
    stats = run_json(capsys, "stats")
    assert stats["totals"]["pending"] == 1
    assert stats["jobs"] == [{"job_name": "deploy", "pending": 1, "in_flight": 0, "cap": 2, "completed_last_hour": 0,
                              "failed_last_hour": 0, "oldest_pending_seconds": stats["jobs"][0]["oldest_pending_seconds"],
                              "paused": False, "paused_at": None, "pause_reason": None, "paused_on": []}]
    code, out, _ = run(capsys, "stats")
    assert "0/2" in out
    assert run_json(capsys, "limits", "rm", "deploy")["removed"] is True


def test_limits_rate_beside_the_cap(capsys, queue, controllers):
    assert run_json(capsys, "limits", "set", "deploy", "2", "--per-minute", "10")["per_minute"] == 10
    code, out, _ = run(capsys, "limits", "set", "deploy", "--per-minute", "5")  # the cap stays
    assert code == 0 and "at most 5 started in any minute" in out and "in flight" not in out
    (row,) = run_json(capsys, "limits", "ls")
    assert (row["max_in_flight"], row["per_minute"], row["started_last_minute"]) == (2, 5, 0)
    assert run_json(capsys, "limits", "rm", "deploy", "--per-minute") == {
        "job_name": "deploy", "controller": "default", "removed": True, "changed": True, "rate_removed": True}
    assert [(r["max_in_flight"], r["per_minute"]) for r in run_json(capsys, "limits", "ls")] == [(2, None)]
    code, out, _ = run(capsys, "limits", "rm", "deploy", "--per-minute")
    assert code == 0 and out.strip() == "deploy had no rate; nothing changed"
    code, out, _ = run(capsys, "limits", "rm", "deploy")
    assert code == 0 and out.strip() == "deploy: no cap now"
    code, _, err = run(capsys, "limits", "set", "deploy")
    assert code == 2 and "--per-minute" in err
    with pytest.raises(SystemExit) as exited:  # argparse's own refusal: exit 2, one line
        run(capsys, "limits", "set", "deploy", "--per-minute", "0")
    assert exited.value.code == 2 and "expected a whole number from 1 to" in capsys.readouterr().err
    run_json(capsys, "limits", "set", "deploy", "--per-minute", "3", "--controller", "eu")
    assert [(r["controller"], r["per_minute"]) for r in run_json(capsys, "limits", "ls")] == [("eu", 3)]


def test_prune_and_migrate(capsys, queue, db):
    jid = queue.enqueue("x").id
    [job] = queue.claim_batch(1)
    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    db.run("UPDATE jenkins_jobs_queue SET finished_at = now() - interval '40 days'")
    # The time page's aggregates: a bucket older than its longest window (a week) goes, today's stay.
    db.run("INSERT INTO jenkins_queue_depth VALUES (now() - interval '8 days', 1, 0)")
    kept = db.run("SELECT count(*) AS n FROM jenkins_job_stats")[0]["n"]
    assert run_json(capsys, "prune", "--older-than", "30") == {"deleted": 1, "aggregates_deleted": 1}
    assert db.run("SELECT count(*) AS n FROM jenkins_job_stats")[0]["n"] == kept > 0
    assert run_json(capsys, "migrate") == {"applied": []}
    assert queue.list_jobs() == [] and jid


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show", "424242"], "no job with id 424242"),
        (["show", "abc"], "expected a whole number"),
        (["enqueue", "deploy", "-p", "NOEQUALS"], "expected KEY=VALUE"),
        (["enqueue", "deploy", "--at", "next tuesday"], "bad time"),
        (["enqueue", "deploy", "--params", "[1]"], "must be a JSON object"),
        (["enqueue", "  "], "job name must not be empty"),
        (["cancel", "1"], "only pending or processing jobs can be cancelled"),
        (["limits", "set", "deploy", "-1"], "argument N: expected a whole number from 0 to 2147483647"),
        (["ls", "--status", "done"], "invalid choice"),
        (["prune"], "required"),
        (["enqueue", "deploy", "--at", "+999999999d"], "too far in the future"),
        (["enqueue", "deploy", "--params", '{"a": "\\u0000"}'], "SQLSTATE"),
        (["enqueue", "a//b"], "single '/'"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_changes_nothing(capsys, queue, db, argv, message):
    jid = queue.enqueue("seed").id
    if argv[0] == "cancel":  # a finished job cannot be cancelled (a cancelled one is already so: exit 0)
        [job] = queue.claim_batch(1)
        queue.settle(jid, job.dispatch_id, "completed", result="SUCCESS")
    before = db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id")
    code = exit_code(argv)
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert db.run("SELECT * FROM jenkins_jobs_queue ORDER BY id") == before


def test_since_means_that_long_ago(capsys, queue, db):
    """Issue 12 #5: `--since 1h` meant one hour in the FUTURE and matched nothing; `-1h` was refused."""
    old = queue.enqueue("deploy").id
    db.run("UPDATE jenkins_jobs_queue SET updated_at = now() - interval '3 hours', "
           "created_at = now() - interval '3 hours' WHERE id = :id", id=old)
    new = queue.enqueue("deploy").id
    for since in ("1h", "-1h", "90m", "60min"):
        assert main(["ls", f"--since={since}", "--json"]) == 0
        ids = [r["id"] for r in json.loads(capsys.readouterr().out)]
        assert ids == [new], (since, ids)
    assert main(["ls", "--since", "1d", "--json"]) == 0
    assert sorted(r["id"] for r in json.loads(capsys.readouterr().out)) == [old, new]
