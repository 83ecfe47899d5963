"""Issue #11, part 3: a job path with a ``.`` or ``..`` segment never reaches Jenkins.

``a/../b`` is sent as ``job/a/job/../job/b/``, which the HTTP library resolves to ``job/a/job/b/``: the row
would run job ``a/b`` outside ``a/b``'s per-job cap. Jenkins forbids such item names (``checkGoodName``), so the
path is refused: by ``enqueue``, and for a row written with plain SQL, at claim (that row fails, the rest runs).
"""

from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import dispatch_settings


def test_plain_sql_row_with_a_dot_dot_segment_fails_at_claim_and_never_runs_outside_the_cap(jenkins, queue, db):
    queue.set_limit("team/app/deploy", 1)
    legit = queue.enqueue("team/app/deploy", {"EMULATOR_DURATION": "5"}).id
    [bad] = db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('team/../app/deploy', '{}') RETURNING id")
    other = queue.enqueue("deploy").id

    summary = run_pass(dispatch_settings(jenkins.base_url))

    row = queue.get(bad["id"])
    assert row["status"] == "failed"
    assert "'.' and '..'" in row["last_error"] and "\n" not in row["last_error"]
    assert queue.get(legit)["status"] == "processing"
    assert queue.get(other)["status"] == "processing"
    assert summary["triggered"] == 2 and summary["failed"] == 1
    counters = jenkins.counters()
    assert counters["items_created"] == 2  # the legit row and "deploy": nothing was sent for the bad row
    assert jenkins.peak_in_flight("team/app/deploy") == 1


def test_show_of_such_a_row_names_no_jenkins_link_and_does_not_crash(jenkins, queue, db, capsys, monkeypatch):
    from jenkins_dispatch.cli import main

    for key, value in {"JENKINS_URL": jenkins.base_url, "JENKINS_USER": "admin", "JENKINS_API_TOKEN": "admin-token"}.items():
        monkeypatch.setenv(key, value)
    [bad] = db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('team/../app/deploy', '{}') RETURNING id")
    run_pass(dispatch_settings(jenkins.base_url))
    capsys.readouterr()
    assert main(["show", str(bad["id"])]) == 0
    out = capsys.readouterr().out
    assert "team/../app/deploy" in out and "job/team/job/app/job/deploy" not in out and "job/team/job/../" not in out


def test_plain_sql_row_whose_name_holds_a_control_character_fails_at_claim(jenkins, queue, db):
    """Issue 33: Jenkins refuses control characters in item names; such a row (written with plain SQL, the CLI and
    the queue refuse it) was sent as job/de%0Aploy/. It fails at claim, its error on one line, nothing sent."""
    [bad] = db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES (:name, '{}') RETURNING id",
                   name="de\nploy")
    summary = run_pass(dispatch_settings(jenkins.base_url))
    row = queue.get(bad["id"])
    assert row["status"] == "failed" and summary["failed"] == 1
    assert "control character (U+000A)" in row["last_error"] and "\n" not in row["last_error"]
    assert jenkins.counters()["items_created"] == 0
