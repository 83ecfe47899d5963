"""Issue 25 #5: one rule for "already so", every command, as users run them (a subprocess on the real database):
already in the state asked for → exit 0 with a line saying so, nothing changed; a transition there is not (or a job
that does not exist) → exit 2 with one line on stderr, nothing changed. Cancelling twice exited 2 while pausing twice
exited 0."""

import os
import subprocess
import sys

import pytest

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
    ("capped", ["limits", "set", "deploy", "2"], ALREADY, "deploy: at most 2 in flight", False),
    ("pending", ["cancel", "424242"], IMPOSSIBLE, "no job with id 424242", False),
    ("pending", ["retry", "424242"], IMPOSSIBLE, "no job with id 424242", False),
]


def everything(db):
    return snapshot(db), db.run("SELECT * FROM jenkins_job_pauses ORDER BY job_name"), \
        db.run("SELECT job_name, max_in_flight FROM jenkins_job_limits ORDER BY job_name")


@pytest.mark.parametrize(("state", "argv", "code", "says", "changes"), CASES,
                         ids=[f"{' '.join(c[1])}-on-{c[0]}" for c in CASES])
def test_already_so_exits_0_and_an_impossible_transition_exits_2(queue, db, database_url, state, argv, code, says,
                                                                   changes):
    if state == "processing":
        job_id = queue.enqueue("deploy").id
        queue.claim_batch(1)
    else:
        job_id = put(queue, db, "deploy", state if state in ("completed", "failed", "cancelled") else "pending")
    if state == "paused":
        queue.pause("deploy")
    elif state == "paused everything":
        queue.pause(None)
    elif state == "capped":
        queue.set_limit("deploy", 2)
    before = everything(db)
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL="http://127.0.0.1:9/", JENKINS_USER="a",
               JENKINS_API_TOKEN="b")
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *(a.format(id=job_id) for a in argv)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc
    said = proc.stdout if code == 0 else proc.stderr
    assert says.format(id=job_id) in said, proc
    if code:
        assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    else:
        assert proc.stderr == ""
    assert (everything(db) != before) == changes
