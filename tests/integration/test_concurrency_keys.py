"""Concurrency keys and fairness keys on rows: set by plain SQL, by the producers' store and by `enqueue --key
--fair`; a key cap (`limits set --key K N`) holds exactly, whatever the job or controller, under racing claimers."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from datetime import timedelta

import pytest

from jenkins_dispatch.cli import main
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.dispatcher import run_pass
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.queue import CapsInForce
from jenkins_dispatch.store.schedules import Schedules

from ..child_processes import CHILDREN, drained, start_together, stop_all
from ..cli_helpers import configure_default_controller
from ..dispatch_helpers import dispatch_settings, wait_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines



def _keys(db, job_id: int) -> tuple:
    [row] = db.run(f"SELECT concurrency_key, fairness_key FROM jenkins_jobs_queue WHERE id = {job_id}")
    return row["concurrency_key"], row["fairness_key"]


def test_plain_sql_sets_both_keys_at_insert_and_leaves_them_null_otherwise(db):
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters, concurrency_key, fairness_key) "
           """VALUES ('deploy', '{"ENV":"prod"}', 'deploy:prod', 'team-a')""")
    db.run("""INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('deploy', '{"ENV":"dev"}')""")
    assert [_keys(db, 1), _keys(db, 2)] == [("deploy:prod", "team-a"), (None, None)]


def test_the_producers_store_records_the_keys(queue, db):
    created = queue.enqueue("deploy", {"ENV": "prod"}, concurrency_key="deploy:prod", fairness_key="team-a")
    assert _keys(db, created.id) == ("deploy:prod", "team-a")


@pytest.mark.parametrize(("field", "value", "says"), [
    ("concurrency_key", "deploy\nprod", "concurrency key 'deploy\\nprod' holds a control character"),
    ("fairness_key", "x" * 256, "a fairness key holds at most 255 characters, got 256"),
    ("concurrency_key", "", "a concurrency key is not empty"),
])
def test_a_bad_key_is_refused_in_one_line_and_adds_nothing(queue, db, field, value, says):
    with pytest.raises(InvalidInput) as refused:
        queue.enqueue("deploy", **{field: value})
    assert says in str(refused.value) and "\n" not in str(refused.value).replace("\\n", "")
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"] == 0


def test_enqueue_key_and_fair_on_the_command_line(capsys, db):
    assert main(["enqueue", "deploy", "-p", "ENV=prod", "--key", "deploy:prod", "--fair", "team-a", "--json"]) == 0
    job_id = json.loads(capsys.readouterr().out)["id"]
    assert _keys(db, job_id) == ("deploy:prod", "team-a")
    assert main(["show", str(job_id), "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert (job["concurrency_key"], job["fairness_key"]) == ("deploy:prod", "team-a")
    assert main(["show", str(job_id)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert [line.split() for line in shown if line.startswith(("concurrency_key", "fairness_key"))] == [
        ["concurrency_key", "deploy:prod"], ["fairness_key", "team-a"]]


KEY_CAPS = {"deploy:prod": 1, "deploy:dev": 1, "shared-db": 2}
JOBS = ("deploy", "db-migrate", "smoke")


def _claim_hold_settle(url, controller, seed, done, errors):
    """A dispatcher of one controller: claims (capped), holds its rows a while, then settles them. Right after each
    claim it counts the rows in flight under each key it took: a second row of a key capped at 1, claimed by anyone
    on any controller, shows there while this one is held."""
    rng = random.Random(seed)
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while not done.is_set():
                jobs = queue.claim_batch(3, capped=True, controller=controller)
                if not jobs:
                    time.sleep(0.002)
                    continue
                for row in db.run(
                        "SELECT concurrency_key AS k, count(*) AS n FROM jenkins_jobs_queue "
                        "WHERE status = 'processing' AND concurrency_key IS NOT NULL GROUP BY concurrency_key"):
                    if row["n"] > KEY_CAPS[row["k"]]:
                        errors.put(f"{row['n']} rows of key {row['k']} in flight, cap {KEY_CAPS[row['k']]}")
                time.sleep(rng.uniform(0.005, 0.02))
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")


def test_key_caps_hold_across_jobs_and_controllers_under_racing_claimers(db, database_url):
    """Rows of three jobs on two controllers share keys capped at 1, 1 and 2 (and one job cap beside them): six
    processes claiming at once never have more of a key in flight than its cap, and every row is claimed once."""
    keys = list(KEY_CAPS) + [None]
    values = ", ".join(
        f"('{JOBS[n % 3]}', '{('default', 'eu')[n % 2]}', {'NULL' if keys[n % 4] is None else repr(keys[n % 4])})"
        for n in range(120))
    db.run(f"INSERT INTO jenkins_jobs_queue (job_name, controller, concurrency_key) VALUES {values}")
    queue = Queue(db)
    for key, cap in KEY_CAPS.items():
        assert queue.set_key_limit(key, cap).changed
    queue.set_limit("smoke", 2)
    queue.set_limit("smoke", 2, "eu")

    done = CHILDREN.Event()
    errors = CHILDREN.Queue()
    workers = start_together(_claim_hold_settle, [(database_url, ("default", "eu")[s % 2], s, done, errors)
                                                  for s in range(6)])
    peaks: Counter = Counter()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            rows = db.run("SELECT concurrency_key AS k, count(*) AS n FROM jenkins_jobs_queue "
                          "WHERE status = 'processing' AND concurrency_key IS NOT NULL GROUP BY concurrency_key")
            for row in rows:
                peaks[row["k"]] = max(peaks[row["k"]], row["n"])
            if db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE status <> 'completed'")[0]["n"] == 0:
                break
    finally:
        done.set()
        stop_all(workers, timeout=30)
    assert drained(errors) == []
    claims = db.run("SELECT job_id, count(*) AS n FROM jenkins_job_events WHERE event = 'claimed' GROUP BY job_id")
    assert len(claims) == 120 and {r["n"] for r in claims} == {1}
    assert all(peaks[key] <= cap for key, cap in KEY_CAPS.items()), peaks
    assert peaks["shared-db"] == 2, peaks  # the caps were under pressure: the assertions above could fail


def test_an_uncapped_claim_leaves_rows_of_a_capped_key_to_the_capped_claim(queue, db):
    """A dispatcher that found no caps at its pass's start claims uncapped; a key capped meanwhile holds anyway."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES "
           "('deploy', 'deploy:prod'), ('db-migrate', 'deploy:prod'), ('deploy', NULL)")
    queue.set_key_limit("deploy:prod", 1)
    assert queue.claim_plan(None).caps
    assert [j.id for j in queue.claim_batch(10)] == [3]
    assert [j.id for j in queue.claim_batch(10, capped=True)] == [1]
    assert queue.claim_batch(10, capped=True) == []


def _cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


def test_limits_set_ls_and_rm_a_key_on_the_command_line(capsys, queue, db):
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod'), "
           "('db-migrate', 'deploy:prod')")
    assert _cli(capsys, "limits", "set", "--key", "deploy:prod", "1") == (
        0, "key deploy:prod: at most 1 in flight, whatever the job or controller\n", "")
    assert _cli(capsys, "limits", "set", "--key", "deploy:prod", "1")[1] == (
        "key deploy:prod: the cap is already 1; nothing changed\n")
    queue.claim_batch(5, capped=True)
    code, out, _ = _cli(capsys, "limits", "ls")
    assert code == 0 and out.splitlines()[-2:] == [
        "CONCURRENCY_KEY  MAX_IN_FLIGHT  SUPERSEDE  IN_FLIGHT  PENDING",
        "deploy:prod      1              no         1          1"], out
    code, out, _ = _cli(capsys, "limits", "ls", "--json")
    assert json.loads(out) == [{"concurrency_key": "deploy:prod", "max_in_flight": 1, "supersede": False,
                                "stop_running": False, "in_flight": 1, "pending": 1}]
    assert _cli(capsys, "limits", "set", "--key", "deploy:prod", "1", "--supersede")[:2] == (
        0, "key deploy:prod: at most 1 in flight, whatever the job or controller; newest wins: a newer row cancels "
           "the older ones waiting\n")
    assert [(k["supersede"], k["stop_running"]) for k in queue.key_limits()] == [(True, False)]
    assert _cli(capsys, "limits", "set", "--key", "deploy:prod", "1", "--supersede", "running")[1].endswith(
        "and stops those in flight in Jenkins\n")
    assert [(k["supersede"], k["stop_running"]) for k in queue.key_limits()] == [(True, True)]
    assert _cli(capsys, "limits", "ls")[1].splitlines()[-1].split()[:3] == ["deploy:prod", "1", "running"]
    assert _cli(capsys, "limits", "rm", "--key", "deploy:prod")[:2] == (0, "key deploy:prod: no cap now\n")
    assert _cli(capsys, "limits", "rm", "--key", "deploy:prod")[:2] == (
        0, "key deploy:prod had no cap; nothing changed\n")
    assert queue.key_limits() == []


@pytest.mark.parametrize(("argv", "says"), [
    (["limits", "set", "--key", "deploy:prod"], "give the cap: limits set --key K N"),
    (["limits", "set", "--key", "deploy:prod", "two"], "N: expected a whole number"),
    (["limits", "set", "--key", "deploy:prod", "1", "--per-minute", "3"], "a key has a cap only"),
    (["limits", "set", "--key", "", "1"], "a concurrency key is not empty"),
    (["limits", "rm", "deploy", "--key", "deploy:prod"], "give JOB or --key K, not both"),
    (["limits", "set", "deploy", "1", "--supersede"], "--supersede is a key's"),
])
def test_a_bad_key_limit_is_refused_in_one_line_and_changes_nothing(capsys, queue, argv, says):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert queue.key_limits() == []


def test_a_schedules_rows_carry_its_keys(capsys, db, queue, monkeypatch):
    configure_default_controller(monkeypatch)
    assert _cli(capsys, "schedule", "add", "nightly", "deploy", "--cron", "* * * * *", "--key", "deploy:prod",
                "--fair", "team-a")[0] == 0
    code, out, _ = _cli(capsys, "schedule", "ls", "--json")
    [listed] = json.loads(out)
    assert (listed["concurrency_key"], listed["fairness_key"]) == ("deploy:prod", "team-a")
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick", tick=Schedules(db).now() - timedelta(minutes=1))
    assert enqueue_due_ticks(Schedules(db)).enqueued == 1
    assert _keys(db, 1) == ("deploy:prod", "team-a")
    assert _cli(capsys, "schedule", "add", "other", "deploy", "--cron", "* * * * *", "--key", "")[0] == 2


def _status(db, job_id: int) -> tuple:
    [row] = db.run(f"SELECT status, last_error FROM jenkins_jobs_queue WHERE id = {job_id}")
    return row["status"], row["last_error"]


def test_newest_wins_older_pending_rows_of_a_superseding_key_end_cancelled_at_the_next_claim(queue, db):
    """One running, three arriving: the two middle ones are cancelled "superseded by #4" and never claimed, the
    newest is claimed once the first has finished. Keys without --supersede keep every row."""
    queue.set_key_limit("deploy:prod", 1, supersede=True)
    queue.set_key_limit("deploy:dev", 1)
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod')")
    [first] = queue.claim_batch(5, capped=True)
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod'), "
           "('db-migrate', 'deploy:prod'), ('deploy', 'deploy:prod'), ('deploy', 'deploy:dev'), "
           "('deploy', 'deploy:dev')")
    assert [j.id for j in queue.claim_batch(5, capped=True)] == [5]  # prod is at its cap; dev's first
    assert [_status(db, i) for i in (2, 3, 4, 6)] == [
        ("cancelled", "superseded by #4"), ("cancelled", "superseded by #4"), ("pending", None), ("pending", None)]
    assert [(e["event"], e["to_status"], e["detail"]) for e in queue.events(2)] == [
        ("cancelled", "cancelled", "superseded by #4")]
    assert queue.settle(first.id, first.dispatch_id, "completed", result="SUCCESS")
    assert [j.id for j in queue.claim_batch(5, capped=True)] == [4]


def _insert_successors(url, rows, done, errors):
    try:
        with Database(parse_database_url(url)) as db:
            for _ in range(rows):
                db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod')")
                time.sleep(0.003)
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")
    finally:
        done.set()


def _claim_settle_fast(url, controller, seed, done, errors):
    try:
        with Database(parse_database_url(url)) as db:
            queue = Queue(db, lease_seconds=300)
            while True:
                finished = done.is_set()
                jobs = queue.claim_batch(2, capped=True, controller=controller)
                for job in jobs:
                    queue.settle(job.id, job.dispatch_id, "completed", result="SUCCESS")
                if finished and not jobs:
                    return
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")


def test_a_row_claimed_as_its_successor_arrives_is_never_also_superseded(db, database_url):
    """Successors arrive while four processes claim: every row ends either built (claimed once, completed) or
    superseded (cancelled, never claimed), and the newest is built."""
    Queue(db).set_key_limit("deploy:prod", 1, supersede=True)
    done = CHILDREN.Event()
    errors = CHILDREN.Queue()
    workers = start_together(_insert_successors, [(database_url, 150, done, errors)])
    workers += start_together(_claim_settle_fast, [(database_url, ("default", "eu")[s % 2], s, done, errors)
                                                   for s in range(4)])
    stop_all(workers, timeout=120)
    assert drained(errors) == []
    rows = db.run("SELECT q.id, q.status, q.last_error, "
                  "(SELECT count(*) FROM jenkins_job_events e WHERE e.job_id = q.id AND e.event = 'claimed') AS claims "
                  "FROM jenkins_jobs_queue q ORDER BY q.id")
    assert len(rows) == 150
    outcomes = Counter((r["status"], r["claims"], (r["last_error"] or "")[:14]) for r in rows)
    assert set(outcomes) <= {("completed", 1, ""), ("cancelled", 0, "superseded by ")}, outcomes
    assert rows[-1]["status"] == "completed" and outcomes[("cancelled", 0, "superseded by ")] > 0, outcomes


def test_show_and_ls_say_a_row_waits_for_its_keys_cap_or_is_superseded(capsys, queue, db):
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod'), "
           "('db-migrate', 'deploy:prod'), ('deploy', 'deploy:dev'), ('deploy', 'deploy:dev'), "
           "('deploy', 'deploy:dev')")
    queue.set_key_limit("deploy:prod", 1)
    assert [j.id for j in queue.claim_batch(1, capped=True)] == [1]
    queue.set_key_limit("deploy:dev", 1, supersede=True)  # after the claim, which would have superseded rows 3 and 4
    assert _cli(capsys, "show", "2")[1].count("key deploy:prod at its cap (1/1 in flight, held by #1)") == 1
    code, out, _ = _cli(capsys, "ls", "--json")
    waiting = {r["id"]: (r["waiting"] or {}).get("code") for r in json.loads(out)}
    assert waiting == {1: None, 2: "key_cap", 3: "superseded", 4: "superseded", 5: "no_dispatcher"}, waiting
    assert "superseded by #5: the next dispatcher claim cancels it" in _cli(capsys, "show", "3")[1]


def test_supersede_running_stops_the_older_build_then_builds_the_newest(make_jenkins, db, queue):
    """A 60 s build of key deploy:prod (cap 1, newest wins, running ones too) is in Jenkins when a newer row of the
    key arrives: the next claim asks for the older one's cancel (its history says by whom), the reconciler stops
    its build in Jenkins (ABORTED) and settles it cancelled, and the newest is then built once."""
    jenkins = make_jenkins(notification=None)
    queue.set_key_limit("deploy:prod", 1, supersede="running")
    first = queue.enqueue("deploy", {"EMULATOR_DURATION": "60"}, concurrency_key="deploy:prod").id
    settings = dispatch_settings(jenkins.base_url)
    run_pass(settings)
    assert jenkins.wait_until(lambda: len(jenkins.builds("deploy")) == 1, timeout=10)
    newest = queue.enqueue("deploy", {"EMULATOR_DURATION": "0"}, concurrency_key="deploy:prod").id

    def the_newest_went_out() -> bool:
        run_pass(settings)
        return queue.get(newest)["status"] != "pending"

    assert wait_for(the_newest_went_out, timeout=30, interval=0.2), queue.events(first)
    row = queue.get(first)
    assert row["status"] == "cancelled", row
    assert ("cancel_requested", f"superseded by #{newest}") in [(e["event"], e["detail"]) for e in queue.events(first)]
    builds = jenkins.builds("deploy")
    assert [b.result for b in builds[:1]] == ["ABORTED"], [(b.number, b.result) for b in builds]
    assert jenkins.triggers_for(queue.get(newest)["dispatch_id"]) == 1


def test_stats_lists_the_keys_caps_with_their_rows(capsys, queue, db):
    assert "CONCURRENCY_KEY" not in _cli(capsys, "stats")[1]  # nothing said of keys when none is capped
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod'), "
           "('db-migrate', 'deploy:prod')")
    queue.set_key_limit("deploy:prod", 1)
    queue.claim_batch(5, capped=True)
    code, out, _ = _cli(capsys, "stats")
    assert code == 0 and out.splitlines()[-2:] == [
        "CONCURRENCY_KEY  MAX_IN_FLIGHT  IN_FLIGHT  PENDING  HELD_BACK",
        "deploy:prod      1              1          1        cap full"], out
    code, out, _ = _cli(capsys, "stats", "--json")
    assert json.loads(out)["keys"] == [{"concurrency_key": "deploy:prod", "max_in_flight": 1, "supersede": False,
                                        "stop_running": False, "in_flight": 1, "pending": 1}]


def test_a_pass_that_began_with_job_caps_only_leaves_a_key_capped_meanwhile_to_the_next(queue, db):
    """claim_plan picks the claim once a pass: the capped claim (no key capped then) leaves every row of a key
    capped since alone; the next pass's keyed claim holds the key to its cap."""
    db.run("INSERT INTO jenkins_jobs_queue (job_name, concurrency_key) VALUES ('deploy', 'deploy:prod'), "
           "('db-migrate', 'deploy:prod'), ('lint', NULL)")
    queue.set_limit("lint", 5)
    caps = queue.claim_plan(None).caps
    assert caps is CapsInForce.CAPPED
    queue.set_key_limit("deploy:prod", 1)
    assert [j.id for j in queue.claim_batch(10, capped=caps)] == [3]
    caps = queue.claim_plan(None).caps
    assert caps is CapsInForce.KEYED
    assert [j.id for j in queue.claim_batch(10, capped=caps)] == [1]
    assert queue.claim_batch(10, capped=caps) == []
