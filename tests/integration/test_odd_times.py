"""scheduled_at and times Python cannot hold (issue 21 #7): the table refuses a scheduled_at past 9999-12-31 (and
MySQL's zero dates) in one line naming the rule, and every reader shows a row that holds one anyway (written
before the rule, or a time the driver hands over as text: pg8000 for years past 9999 and BC dates, PyMySQL for
zero dates) without a traceback: `ls`, `show`, `--json`, `stats` as the user runs them, and the web page."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.store.db import DatabaseError

from ..cli_process import run_cli
from ..ui_helpers import *  # noqa: F401,F403 - the fixtures make_ui, ui, client
from ..ui_helpers import UiClient, plain_settings

pytestmark = pytest.mark.both_engines

BOUND = "jenkins_jobs_queue_scheduled_at_at_most_9999_12_31"


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return run_cli(list(argv), dict(os.environ))


def test_a_scheduled_at_past_9999_is_refused_in_one_line_naming_the_rule(db, queue, engine):
    """On main PostgreSQL took year 10000 (only infinity was refused); MySQL's DATETIME cannot hold it at all."""
    if engine == "postgresql":
        with pytest.raises(DatabaseError) as refused:
            db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('a', '10000-01-01 00:00:00+00')")
        assert BOUND in str(refused.value) and "\n" not in str(refused.value)
        with pytest.raises(DatabaseError, match=BOUND):  # the last day itself: only up to its first moment
            db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('a', '9999-12-31 12:00:00+00')")
        db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('a', '9999-12-31 00:00:00+00')")
    with pytest.raises(InvalidInput) as refused:  # through the queue: the rule in words
        queue.enqueue("b", scheduled_at="10000-01-01T00:00:00+00:00")
    assert "\n" not in str(refused.value) and "scheduled_at" in str(refused.value)
    assert [r["job_name"] for r in queue.list_jobs()] == (["a"] if engine == "postgresql" else [])


def test_enqueue_past_the_bound_exits_2_in_one_line_and_writes_nothing(db, queue):
    proc = _cli("enqueue", "deploy", "--at", "9999-12-31T12:00:00Z")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "scheduled_at" in proc.stderr and "Traceback" not in proc.stderr
    assert queue.list_jobs() == []


def _lax(db, sql: str, **params) -> None:
    """``sql`` from an application session that allows zero dates (MariaDB's default sql_mode does)."""
    db.run(f"SET SESSION sql_mode = '';\n{sql}", **params)


@pytest.mark.parametrize("when", ["0000-00-00 00:00:00", "2024-00-10 00:00:00", "9999-12-31 12:00:00"])
def test_mysql_refuses_zero_dates_and_the_last_days_hours_from_a_lax_session(db, queue, engine, when):
    """An application's UPDATE from such a session (an INSERT goes through the UTC trigger, which is strict)."""
    if engine != "mysql":
        pytest.skip("zero dates exist only on MySQL")
    job_id = queue.enqueue("a").id
    with pytest.raises(DatabaseError, match="scheduled_at"):
        _lax(db, "UPDATE jenkins_jobs_queue SET scheduled_at = :t WHERE id = :id", t=when, id=job_id)
    assert queue.get(job_id)["scheduled_at"].year > 2000


def _odd_rows(db, engine) -> dict[str, int]:
    """Pending rows holding times Python cannot read, written as before the rule (its checks dropped here)."""
    if engine == "postgresql":
        db.run(f"ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT IF EXISTS {BOUND}")
        db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at) VALUES ('far', '10000-01-01 00:00:00+00'), "
               "('ancient', '0044-03-15 00:00:00+00 BC')")
        db.run("INSERT INTO jenkins_jobs_queue (job_name, scheduled_at, created_at) "
               "VALUES ('odd-created', now(), '12000-06-01 00:00:00+00')")
    else:
        for name in (BOUND, "jenkins_jobs_queue_scheduled_at_check"):
            found = db.run("SELECT COUNT(*) AS n FROM information_schema.table_constraints WHERE "
                           "constraint_schema = DATABASE() AND constraint_name = :name", name=name)[0]["n"]
            if found:
                db.run_script(f"ALTER TABLE jenkins_jobs_queue DROP CONSTRAINT {name}")
        db.run("INSERT INTO jenkins_jobs_queue (job_name) VALUES ('far'), ('ancient'), ('odd-created')")
        _lax(db, "UPDATE jenkins_jobs_queue SET scheduled_at = '9999-12-31 23:59:59' WHERE job_name = 'far'")
        _lax(db, "UPDATE jenkins_jobs_queue SET scheduled_at = '0000-00-00 00:00:00' WHERE job_name = 'ancient'")
        _lax(db, "UPDATE jenkins_jobs_queue SET created_at = '2024-00-10 00:00:00' WHERE job_name = 'odd-created'")
    return {r["job_name"]: r["id"] for r in db.run("SELECT id, job_name FROM jenkins_jobs_queue")}


def _restore_rules(db, engine) -> None:
    db.run("DELETE FROM jenkins_jobs_queue")
    from jenkins_dispatch.store.migrations import migration_files

    if engine == "postgresql":
        db.run(f"ALTER TABLE jenkins_jobs_queue ADD CONSTRAINT {BOUND} "
               "CHECK (scheduled_at <= '9999-12-31 00:00:00+00') NOT VALID")
        return
    last = migration_files("mysql")[-1][2]
    db.run_script(last.read_text())  # written to be run again: adds back what it finds missing


@pytest.fixture
def odd(db, engine):
    ids = _odd_rows(db, engine)
    yield ids
    _restore_rules(db, engine)


def test_ls_show_json_and_stats_show_rows_with_unreadable_times(odd, engine):
    for argv in (["ls"], ["ls", "--json"], ["stats"], ["stats", "--json"],
                 *[["show", str(i)] for i in odd.values()], *[["show", str(i), "--json"] for i in odd.values()]):
        proc = _cli(*argv)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])
        if "--json" in argv:
            json.loads(proc.stdout)
    shown = _cli("show", str(odd["far"])).stdout
    assert ("10000-01-01" if engine == "postgresql" else "9999-12-31 23:59:59") in shown
    assert "never taken" in shown or "not due" in shown
    listed = _cli("ls").stdout
    assert ("0044-03-15" if engine == "postgresql" else "0000-00-00") in listed


def test_the_page_shows_rows_with_unreadable_times(odd, make_ui):
    client = UiClient(make_ui(plain_settings(), refresh_seconds=60).url)
    for path in ("/", "/jobs", *[f"/jobs/{i}" for i in odd.values()]):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text[-500:])
