"""The keys' commands as users run them, with two controllers configured: `keys derive|ls|rm`, `enqueue --key
--fair`, `limits set|ls|rm --key` and `show`, each a process of its own (tests/cli_process.py), beside the
application's plain INSERT; bad input is one line on stderr, exit 2, and changes nothing."""

from __future__ import annotations

import json

import pytest

from .test_cli_controllers import cli

pytestmark = pytest.mark.both_engines


def test_a_rule_a_cap_and_an_enqueue_through_the_commands_on_either_controller(queue, db, database_url):
    derived = cli("keys", "derive", "deploy", "--key", "deploy:{ENV}", "--fair", "team-{TEAM}",
                  database_url=database_url)
    assert derived.returncode == 0, derived.stderr
    assert [(r["job_name"], r["concurrency_template"], r["fairness_template"])
            for r in json.loads(cli("keys", "ls", "--json", database_url=database_url).stdout)] == [
        ("deploy", "deploy:{ENV}", "team-{TEAM}")]
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
           "VALUES ('deploy', '{\"ENV\": \"prod\", \"TEAM\": \"web\"}', 'eu')")
    [plain] = db.run("SELECT id, concurrency_key, fairness_key FROM jenkins_jobs_queue")
    assert (plain["concurrency_key"], plain["fairness_key"]) == ("deploy:prod", "team-web")
    capped = cli("limits", "set", "--key", "deploy:prod", "1", database_url=database_url)
    assert capped.returncode == 0, capped.stderr
    given = json.loads(cli("enqueue", "deploy", "--controller", "default", "--key", "deploy:prod", "--fair", "ops",
                           "--json", database_url=database_url).stdout)
    shown = json.loads(cli("show", str(given["id"]), "--json", database_url=database_url).stdout)["job"]
    assert (shown["concurrency_key"], shown["fairness_key"], shown["controller"]) == ("deploy:prod", "ops", "default")
    keys = [r for r in json.loads(cli("limits", "ls", "--json", database_url=database_url).stdout)
            if "concurrency_key" in r]
    assert [(k["concurrency_key"], k["max_in_flight"], k["pending"]) for k in keys] == [("deploy:prod", 1, 2)]
    assert cli("keys", "rm", "deploy", database_url=database_url).stdout.strip() == "deploy: no key rule now"
    assert cli("limits", "rm", "--key", "deploy:prod", database_url=database_url).stdout.strip() == (
        "key deploy:prod: no cap now")
    assert queue.key_rules() == [] and queue.key_limits() == []


@pytest.mark.parametrize("argv, says", [
    (["keys", "derive", "deploy", "--key", "deploy:{ENV"], "each { opens a parameter's name"),
    (["keys", "derive", "deploy"], "give --key TEMPLATE, --fair TEMPLATE or both"),
    (["limits", "set", "--key", "deploy:prod", "many"], "many"),
    (["enqueue", "deploy", "--key", "bad\tkey"], "concurrency key"),
])
def test_bad_key_input_is_one_line_exit_2_and_changes_nothing(queue, db, database_url, argv, says):
    refused = cli(*argv, database_url=database_url)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and says in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    assert queue.key_rules() == [] and queue.key_limits() == []
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"] == 0
