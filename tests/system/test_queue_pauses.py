"""Pause and resume from the command line (a subprocess), and `serve` holding a paused job then sending it
within a second of resume."""

from __future__ import annotations

import json
import os
import subprocess

from ..cli_process import run_cli
from ..integration.test_queue_pauses import _wait


def cli(*argv: str, database_url: str, **env: str) -> subprocess.CompletedProcess:
    return run_cli(list(argv), dict(os.environ, DATABASE_URL=database_url, **env))


def test_pause_and_resume_from_the_command_line(queue, database_url):
    queue.enqueue("deploy")
    queue.enqueue("deploy")
    paused = cli("pause", "deploy", "--reason", "release freeze", database_url=database_url)
    assert paused.returncode == 0 and paused.stderr == ""
    assert "paused deploy: 2 pending jobs wait" in paused.stdout and "already in Jenkins continue" in paused.stdout
    again = cli("pause", "deploy", "--json", database_url=database_url)
    doc = json.loads(again.stdout)
    assert again.returncode == 0 and doc["created"] is False and doc["reason"] == "release freeze"
    assert doc["paused_by"]  # who paused it is on record

    stats = cli("stats", database_url=database_url).stdout
    assert "paused: deploy since" in stats and "release freeze" in stats
    assert any(line.split()[:4] == ["deploy", "2", "0/-", "paused"] for line in stats.splitlines())
    assert json.loads(cli("stats", "--json", database_url=database_url).stdout)["jobs"][0]["paused"] is True

    early = cli("pause", "nightly", database_url=database_url)
    assert early.returncode == 0 and "no pending jobs of nightly now" in early.stdout

    everything = cli("pause", database_url=database_url)
    assert everything.returncode == 0 and "paused everything" in everything.stdout
    assert "EVERYTHING IS PAUSED" in cli("stats", database_url=database_url).stdout

    lifted = cli("resume", "--json", database_url=database_url)
    doc = json.loads(lifted.stdout)
    assert doc["resumed"] is True and doc["everything"] is True
    assert sorted(p["job_name"] for p in doc["still_paused"]) == ["deploy", "nightly"]
    resumed = cli("resume", "deploy", database_url=database_url)
    assert resumed.returncode == 0 and "resumed deploy: 2 pending jobs may be dispatched again" in resumed.stdout
    not_paused = cli("resume", "deploy", database_url=database_url)
    assert not_paused.returncode == 0 and "deploy was not paused; nothing changed" in not_paused.stdout
    assert [p.job_name for p in queue.pauses()] == ["nightly"]


def test_pause_refuses_the_reserved_name_in_one_line(queue, database_url):
    for argv in (["pause", "*"], ["resume", "*"]):
        proc = cli(*argv, database_url=database_url)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "reserved" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert queue.pauses() == []


def test_the_help_explains_pause_and_what_a_cap_of_zero_does(database_url):
    assert "until `resume`" in cli("pause", "--help", database_url=database_url).stdout
    assert "pause JOB" in cli("limits", "set", "--help", database_url=database_url).stdout


def test_serve_holds_a_paused_job_and_sends_it_when_woken_by_the_resume(jenkins, queue, database_url, tmp_path):
    from ..serve_helpers import serve_env, start_serve

    queue.pause("deploy")
    queue.enqueue("deploy")
    # Its periodic pass and lease far beyond the waits below: only the resume's wake-up can send the row.
    served = start_serve(serve_env(database_url, jenkins.base_url, LEASE_SECONDS="600"), tmp_path / "serve.log",
                         "--interval", "600")
    try:
        assert _wait(lambda: served.health()[1]["passes"] >= 1, timeout=20)  # a pass found nothing it may send
        assert jenkins.counters()["trigger_requests"] == 0
        queue.resume("deploy")
        assert _wait(lambda: jenkins.counters()["trigger_requests"] >= 1, timeout=20), served.log()[-2000:]
    finally:
        assert served.stop() == 0


def test_pause_and_resume_one_controller_from_the_command_line(queue, database_url):
    queue.enqueue("deploy", controller="b")
    queue.enqueue("deploy")
    # A controller is paused only where it is configured (its rows fail at their first pass anywhere else).
    b = {"JENKINS_CONTROLLERS": json.dumps({"b": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t"}})}
    on_b = cli("pause", "deploy", "--controller", "b", database_url=database_url, **b)
    assert on_b.returncode == 0 and "paused deploy on b: 1 pending job wait" in on_b.stdout
    assert "`jenkins-dispatch resume deploy --controller b`" in on_b.stdout
    whole = cli("pause", "--controller", "b", "--reason", "upgrade", database_url=database_url, **b)
    assert whole.returncode == 0 and "paused controller b: 1 pending job wait" in whole.stdout
    stats = cli("stats", database_url=database_url).stdout
    assert "CONTROLLER b IS PAUSED" in stats and "upgrade" in stats and "paused: deploy on b since" in stats
    assert "EVERYTHING IS PAUSED" not in stats
    doc = json.loads(cli("stats", "--json", database_url=database_url).stdout)
    assert sorted((p["job_name"], p["controller"]) for p in doc["pauses"] if p["job_name"]) == [("deploy", "b")]

    lifted = cli("resume", "deploy", "--controller", "b", database_url=database_url)
    assert lifted.returncode == 0 and "resumed deploy on b" in lifted.stdout
    assert "controller b is still paused" in lifted.stdout and "resume --controller b`" in lifted.stdout
    not_paused = cli("resume", "deploy", database_url=database_url)
    assert "deploy was not paused; nothing changed" in not_paused.stdout
    bad = cli("pause", "--controller", "Bad Name", database_url=database_url)
    assert bad.returncode == 2 and "controller name" in bad.stderr and len(bad.stderr.splitlines()) == 1
