"""Issue 25 #5: one rule for "already so", every command, as users run them (a subprocess on the real database):
already in the state asked for → exit 0 with a line saying so, nothing changed; a transition there is not (or a job
that does not exist) → exit 2 with one line on stderr, nothing changed. Cancelling twice exited 2 while pausing twice
exited 0.
Issue 33: `limits set deploy 2` when the cap already was 2 wrote a `2 → 2` history entry, and its `--json` had no
`changed`; every already-so answer now says `changed: false` in `--json`."""

import json
import os

import pytest

from ..cli_process import run_cli
from ..integration.test_bulk import put, snapshot

pytestmark = pytest.mark.both_engines

ALREADY, IMPOSSIBLE = 0, 2
CASES = [
    # (state before, command, exit code, what it says, whether it changes something)
    ("pending", ["cancel", "{id}"], 0, "cancelled (it was pending)", True),
    ("cancelled", ["cancel", "{id}"], ALREADY, "job {id} is already cancelled; nothing changed", False),
    ("completed", ["cancel", "{id}"], IMPOSSIBLE, "only pending or processing jobs can be cancelled", False),
    ("failed", ["cancel", "{id}"], IMPOSSIBLE, "only pending or processing jobs can be cancelled", False),
    ("failed", ["retry", "{id}"], 0, "job {id} is pending again", True),
    ("pending", ["retry", "{id}"], ALREADY, "job {id} is already pending; nothing changed", False),
    ("processing", ["retry", "{id}"], IMPOSSIBLE, "only completed, failed or cancelled jobs can be retried", False),
    ("paused", ["pause", "deploy"], ALREADY, "deploy was already paused", False),
    ("paused everything", ["pause"], ALREADY, "everything was already paused", False),
    ("pending", ["resume", "deploy"], ALREADY, "deploy was not paused; nothing changed", False),
    ("pending", ["resume"], ALREADY, "everything was not paused", False),
    ("pending", ["limits", "rm", "deploy"], ALREADY, "deploy had no cap or rate; nothing changed", False),
    ("capped", ["limits", "set", "deploy", "2"], ALREADY, "deploy: the cap is already 2; nothing changed", False),
    ("capped", ["limits", "set", "deploy", "3"], 0, "deploy: at most 3 in flight", True),
    ("rated", ["limits", "set", "deploy", "--per-minute", "5"], ALREADY,
     "deploy: the rate is already 5 per minute; nothing changed", False),
    ("capped", ["limits", "set", "deploy", "2", "--per-minute", "5"], 0, "deploy: at most 5 started", True),
    ("pending", ["cancel", "424242"], IMPOSSIBLE, "no job with id 424242", False),
    ("pending", ["retry", "424242"], IMPOSSIBLE, "no job with id 424242", False),
]


def everything(db):
    return snapshot(db), db.run("SELECT * FROM jenkins_job_pauses ORDER BY job_name"), \
        db.run("SELECT job_name, max_in_flight, per_minute FROM jenkins_job_limits ORDER BY job_name"), \
        db.run("SELECT * FROM jenkins_job_limit_events ORDER BY id"), \
        db.run("SELECT * FROM jenkins_job_schedules ORDER BY name")


def _cli(argv, database_url):
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL="http://127.0.0.1:9/", JENKINS_USER="a",
               JENKINS_API_TOKEN="b")
    return run_cli(argv, env)


def _prepare(queue, db, state):
    """A row of deploy in ``state`` (or pending, paused, capped, rated, ...); its id."""
    if state == "processing":
        job_id = queue.enqueue("deploy").id
        queue.claim_batch(1)
        return job_id
    job_id = put(queue, db, "deploy", state if state in ("completed", "failed", "cancelled") else "pending")
    if state == "paused":
        queue.pause("deploy")
    elif state == "paused everything":
        queue.pause(None)
    elif state == "capped":
        queue.set_limit("deploy", 2)
    elif state == "rated":
        queue.set_rate("deploy", 5)
    return job_id


@pytest.mark.parametrize(("state", "argv", "code", "says", "changes"), CASES,
                         ids=[f"{' '.join(c[1])}-on-{c[0]}" for c in CASES])
def test_already_so_exits_0_and_an_impossible_transition_exits_2(queue, db, database_url, state, argv, code, says,
                                                                   changes):
    job_id = _prepare(queue, db, state)
    before = everything(db)
    proc = _cli([a.format(id=job_id) for a in argv], database_url)
    assert proc.returncode == code, proc
    said = proc.stdout if code == 0 else proc.stderr
    assert says.format(id=job_id) in said, proc
    if code:
        assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    else:
        assert proc.stderr == ""
    assert (everything(db) != before) == changes


SCHEDULE = ["schedule", "add", "nightly", "deploy", "--cron", "0 3 * * *"]
ALREADY_SO = [
    # (state before, command asking for what already holds)
    ("cancelled", ["cancel", "{id}"]),
    ("pending", ["retry", "{id}"]),
    ("paused", ["pause", "deploy"]),
    ("pending", ["resume", "deploy"]),
    ("pending", ["resume"]),
    ("pending", ["limits", "rm", "deploy"]),
    ("capped", ["limits", "set", "deploy", "2"]),
    ("rated", ["limits", "set", "deploy", "--per-minute", "5"]),
    ("pending", ["schedule", "resume", "nightly"]),
    ("pending", ["schedule", "set", "nightly", "--cron", "0 3 * * *"]),
]


@pytest.mark.parametrize(("state", "argv"), ALREADY_SO, ids=[f"{' '.join(c[1])}-on-{c[0]}" for c in ALREADY_SO])
def test_every_already_so_answer_says_changed_false_in_json(queue, db, database_url, state, argv):
    job_id = _prepare(queue, db, state)
    assert _cli(SCHEDULE, database_url).returncode == 0
    before = everything(db)
    proc = _cli([a.format(id=job_id) for a in argv] + ["--json"], database_url)
    assert proc.returncode == 0, proc
    assert json.loads(proc.stdout)["changed"] is False, proc.stdout
    assert everything(db) == before
