"""Keys derived from a row's job and parameters (`keys derive JOB --key TEMPLATE --fair TEMPLATE`): an application's
plain INSERT gets its concurrency and fairness keys without a change to its SQL, in the INSERT's own transaction,
and the caps and fair share act on them as on keys the INSERT set."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.store.queue import CapsInForce
from jenkins_dispatch.store.schedules import Schedules

from ..cli_helpers import configure_default_controller

pytestmark = pytest.mark.both_engines


def _keys(db, job_id: int) -> tuple:
    [row] = db.run(f"SELECT concurrency_key, fairness_key FROM jenkins_jobs_queue WHERE id = {job_id}")
    return row["concurrency_key"], row["fairness_key"]


def _insert(db, job: str, parameters: dict, **columns) -> int:
    names = ", ".join(["job_name", "parameters", *columns])
    values = ", ".join([f"'{job}'", f"'{json.dumps(parameters)}'", *(f"'{v}'" for v in columns.values())])
    db.run(f"INSERT INTO jenkins_jobs_queue ({names}) VALUES ({values})")
    return db.run("SELECT max(id) AS id FROM jenkins_jobs_queue")[0]["id"]


def test_a_plain_insert_gets_the_keys_its_jobs_rule_derives(queue, db):
    queue.set_key_rule("deploy", concurrency_template="deploy:{ENV}", fairness_template="team-{TEAM}")
    queue.set_key_rule("nightly", concurrency_template="{job}")
    assert _keys(db, _insert(db, "deploy", {"ENV": "prod", "TEAM": "a"})) == ("deploy:prod", "team-a")
    assert _keys(db, _insert(db, "Deploy", {"ENV": "dev", "TEAM": 7})) == ("deploy:dev", "team-7")  # any spelling
    assert _keys(db, _insert(db, "deploy", {"TEAM": "b"})) == (None, "team-b")  # no ENV: no concurrency key
    assert _keys(db, _insert(db, "deploy", {"ENV": "prod"}, concurrency_key="mine")) == ("mine", None)
    assert _keys(db, _insert(db, "deploy", {"ENV": "x" * 300})) == (None, None)  # over 255: no key, still queued
    assert _keys(db, queue.enqueue("deploy", {"ENV": "a\nb"}).id) == (None, None)  # a control character: none
    assert _keys(db, _insert(db, "nightly", {})) == ("nightly", None)
    assert _keys(db, _insert(db, "other", {"ENV": "prod"})) == (None, None)  # no rule
    assert queue.remove_key_rule("DEPLOY") and not queue.remove_key_rule("deploy")
    assert _keys(db, _insert(db, "deploy", {"ENV": "prod", "TEAM": "a"})) == (None, None)


def test_enqueue_and_a_schedules_rows_get_derived_keys_too(capsys, queue, db, monkeypatch):
    queue.set_key_rule("deploy", concurrency_template="deploy:{ENV}")
    job = queue.enqueue("deploy", {"ENV": "prod"})
    assert _keys(db, job.id) == ("deploy:prod", None)
    configure_default_controller(monkeypatch)
    assert _cli(capsys, "schedule", "add", "nightly", "deploy", "--cron", "* * * * *", "-p", "ENV=dev")[0] == 0
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick", tick=Schedules(db).now() - timedelta(minutes=1))
    assert enqueue_due_ticks(Schedules(db)).enqueued == 1
    assert _keys(db, job.id + 1) == ("deploy:dev", None)


def test_a_derived_key_is_capped_as_a_given_one(queue, db):
    queue.set_key_rule("deploy", concurrency_template="deploy:{ENV}")
    queue.set_key_rule("db-migrate", concurrency_template="deploy:{ENV}")
    queue.set_key_limit("deploy:prod", 1)
    for job in ("deploy", "db-migrate", "deploy"):
        _insert(db, job, {"ENV": "prod"})
    _insert(db, "deploy", {"ENV": "dev"})
    claimed = queue.claim_batch(10, capped=queue.claim_plan(None).caps)
    assert sorted(_keys(db, j.id)[0] for j in claimed) == ["deploy:dev", "deploy:prod"]


def test_a_derived_fairness_key_takes_its_turn(queue, db):
    queue.set_key_rule("test", fairness_template="team-{TEAM}")
    for _ in range(30):
        _insert(db, "test", {"TEAM": "a"})
    _insert(db, "test", {"TEAM": "b"})
    plan = queue.claim_plan(None)
    assert plan.fair and plan.caps is CapsInForce.NONE
    taken = [_keys(db, j.id)[1] for j in queue.claim_batch(4, fair=plan.fair)]
    assert taken == ["team-a", "team-b", "team-a", "team-a"], taken


@pytest.mark.parametrize(("kwargs", "says"), [
    ({}, "give a concurrency key template, a fairness key template, or both"),
    ({"concurrency_template": "deploy:{ENV"}, "each { opens a parameter's name"),
    ({"fairness_template": "team-{}"}, "each { opens a parameter's name"),
    ({"concurrency_template": "x" * 256}, "at most 255 characters"),
])
def test_a_bad_rule_is_refused_in_one_line_and_stores_nothing(queue, db, kwargs, says):
    with pytest.raises(InvalidInput) as refused:
        queue.set_key_rule("deploy", **kwargs)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert queue.key_rules() == []


def _cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as refused:  # argparse's refusal of an argument
        code = refused.code
    out, err = capsys.readouterr()
    return code, out, err


def test_keys_derive_ls_and_rm_on_the_command_line(capsys, queue, db):
    code, out, _ = _cli(capsys, "keys", "derive", "deploy", "--key", "deploy:{ENV}", "--fair", "team-{TEAM}")
    assert code == 0 and "deploy: rows inserted without keys get concurrency key deploy:{ENV} and fairness key " \
                          "team-{TEAM}" in out
    code, out, _ = _cli(capsys, "keys", "ls")
    assert code == 0 and "deploy:{ENV}" in out and "team-{TEAM}" in out
    assert json.loads(_cli(capsys, "keys", "ls", "--json")[1])[0]["concurrency_template"] == "deploy:{ENV}"
    code, _, err = _cli(capsys, "keys", "derive", "deploy", "--key", "deploy:{ENV")
    assert code == 2 and "each { opens a parameter's name" in err and len(err.strip().splitlines()) == 1
    assert queue.key_rules()[0]["concurrency_template"] == "deploy:{ENV}"  # unchanged
    assert _cli(capsys, "keys", "rm", "deploy")[1].strip() == "deploy: no key rule now"
    assert _cli(capsys, "keys", "rm", "deploy")[1].strip() == "deploy had no key rule; nothing changed"
    assert "no key rules" in _cli(capsys, "keys", "ls")[1]
