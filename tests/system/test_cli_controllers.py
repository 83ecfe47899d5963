"""The operators' commands with several controllers, as subprocesses (issue 23): stats per controller, caps per
controller from `limits`, and `retry`/`cancel` selecting one controller's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ..cli_process import run_cli

CONTROLLERS = json.dumps({"default": {"url": "http://127.0.0.1:9/", "user": "u", "api_token": "t"},
                          "eu": {"url": "http://127.0.0.2:9/", "user": "u", "api_token": "t", "max_in_flight": 3}})


def cli(*argv: str, database_url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JENKINS_")}
    return run_cli(list(argv), dict(env, DATABASE_URL=database_url, JENKINS_CONTROLLERS=CONTROLLERS))


def test_stats_shows_each_controller_with_its_cap_and_state(queue, database_url):
    for controller in ("default", "eu", "eu", "gone"):
        queue.enqueue("deploy", controller=controller)
    queue.pause(None, controller="eu")
    doc = json.loads(cli("stats", "--json", database_url=database_url).stdout)
    assert [(c["controller"], c["pending"], c["due"], c["in_flight"], c["cap"], c["state"])
            for c in doc["controllers"]] == [("default", 1, 1, 0, None, "ok"), ("eu", 2, 2, 0, 3, "paused"),
                                             ("gone", 1, 1, 0, None, "not configured")]
    out = cli("stats", database_url=database_url).stdout
    lines = [line.split() for line in out.splitlines()]
    # No dispatcher has run: the controllers' breakers are unknown ("-").
    assert ["eu", "2", "2", "0/3", "paused", "-"] in lines and ["gone", "1", "1", "0/-", "not", "configured", "-"] in lines
    assert doc["controllers"][0]["jenkins"]["status"] == "unknown"


def test_limits_set_and_rm_per_controller(queue, database_url):
    done = cli("limits", "set", "deploy", "2", "--controller", "eu", database_url=database_url)
    assert done.returncode == 0 and done.stdout.strip() == "deploy on eu: at most 2 in flight"
    assert queue.limit_of("deploy", "eu") == 2 and queue.limit_of("deploy") is None
    listed = json.loads(cli("limits", "ls", "--json", database_url=database_url).stdout)
    assert [(r["job_name"], r["controller"], r["max_in_flight"]) for r in listed] == [("deploy", "eu", 2)]
    none_here = cli("limits", "rm", "deploy", database_url=database_url)
    assert none_here.stdout.strip() == "deploy had no cap or rate; nothing changed" and queue.limit_of("deploy", "eu") == 2
    removed = cli("limits", "rm", "deploy", "--controller", "eu", database_url=database_url)
    assert removed.stdout.strip() == "deploy on eu: no cap now" and queue.limit_of("deploy", "eu") is None


def test_cancel_and_retry_select_one_controllers_rows(queue, database_url):
    ids = {c: queue.enqueue("deploy", controller=c).id for c in ("default", "eu")}
    dry = cli("cancel", "--controller", "eu", database_url=database_url)
    assert dry.returncode == 0 and f"1 job matches (id {ids['eu']})" in dry.stdout
    done = cli("cancel", "--controller", "eu", "--yes", database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert (queue.get(ids["eu"])["status"], queue.get(ids["default"])["status"]) == ("cancelled", "pending")
    again = cli("retry", "--controller", "eu", "--yes", database_url=database_url)
    assert again.returncode == 0, again.stderr
    assert queue.get(ids["eu"])["status"] == "pending"
    assert "no jobs match" in cli("retry", "--controller", "default", database_url=database_url).stdout


def test_dispatch_answers_for_every_lane_and_exits_1_naming_the_one_that_failed(make_jenkins, queue, database_url):
    """`dispatch` with a lane the database holds up (eu's own cap takes the caps lock another session holds): the
    default controller's row is sent and counted in the summary; the command names eu's failure and exits 1."""
    from jenkins_dispatch.config import parse_database_url
    from jenkins_dispatch.store import statements
    from jenkins_dispatch.store.db import Database

    default, eu = make_jenkins(), make_jenkins()
    queue.enqueue("deploy")
    queue.enqueue("deploy", controller="eu")
    controllers = {"default": {"url": default.base_url, "user": "admin", "api_token": "admin-token"},
                   "eu": {"url": eu.base_url, "user": "admin", "api_token": "admin-token", "max_in_flight": 3}}
    env = {k: v for k, v in os.environ.items() if not k.startswith("JENKINS_")}
    with Database(parse_database_url(database_url), application_name="jd-tests") as holder, holder.transaction():
        holder.run(statements.load(holder.dialect)["lock_caps"])
        done = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "dispatch"], capture_output=True,
                              text=True, timeout=60, env=dict(env, DATABASE_URL=database_url,
                                                              JENKINS_CONTROLLERS=json.dumps(controllers)))
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["controllers"]["default"]["triggered"] == 1 and "eu" in summary["controller_errors"]
    assert [line for line in done.stderr.splitlines() if line.startswith("jenkins-dispatch: error")] == [
        f"jenkins-dispatch: error: controller eu: {summary['controller_errors']['eu']}"]
