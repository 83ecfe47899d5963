"""Issue 25 #5, as users run them (the CLI as a subprocess on the real database, both engines): parameters printed
as written, `ls` within 120 columns with the error, the same filters as `retry`/`cancel` and the page, and
`ls --json` carrying everything `show --json` does."""

import json
import os

import pytest

from ..cli_process import run_cli

pytestmark = pytest.mark.both_engines


def cli(database_url, *argv, code=0):
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL="http://127.0.0.1:9/", JENKINS_USER="a",
               JENKINS_API_TOKEN="b", POWERTOOLS_LOG_LEVEL="ERROR")
    proc = run_cli(list(argv), env)
    assert proc.returncode == code, proc
    return proc.stdout


def test_parameters_print_as_written(database_url, queue):
    """`show` printed a number enqueued as 1.50 as 1.5, and 1e3 or 10 given as a float as 10.0 / 1000.0."""
    cli(database_url, "enqueue", "deploy", "--params", '{"N": 10, "F": 1.50, "A": 10.0, "S": "10", "L": [2.50]}',
        "-p", "V=10")
    shown = cli(database_url, "show", "1")
    [line] = [line for line in shown.splitlines() if line.startswith("parameters ")]
    for written in ('"N":10', '"F":1.50', '"A":10.0', '"S":"10"', '"L":[2.50]', '"V":"10"'):
        assert written in line, line
    as_json = cli(database_url, "show", "1", "--json")
    for written in ('"N": 10', '"F": 1.50', '"A": 10.0', '"S": "10"', '"V": "10"'):
        assert written in as_json, as_json
    assert json.loads(as_json)["job"]["parameters"]["F"] == 1.5  # and a JSON number, not a string


LONG_ERROR = ("Jenkins answered 500 to buildWithParameters: java.lang.IllegalStateException: no executor available "
              "on any node labelled linux-large")
JOBS = ["team/app/deploy", "platform/payments/deploy-production-eu-west-1", "team/checkout-service/integration-tests"]


def realistic(queue):
    """Rows as a busy queue has them: long job names, every status, dispatch ids, builds, long errors."""
    for n in range(30):
        queue.enqueue(JOBS[n % 3], {"VERSION": f"v1.4.{n}", "ENV": "prod" if n % 2 else "staging"}, priority=n % 3)
    claimed = queue.claim_batch(12)
    for n, job in enumerate(claimed[:4]):
        queue.mark_triggered(job, 100 + n, build_number=4000 + n)
    for n, job in enumerate(claimed[4:]):
        queue.settle(job.id, job.dispatch_id, ("completed", "failed")[n % 2], result=("SUCCESS", "FAILURE")[n % 2],
                     error=None if n % 2 == 0 else f"{LONG_ERROR} (job {job.id})", build_number=5000 + n)
    return [job.id for job in claimed[4:]][1::2]  # the failed ones


def test_ls_fits_120_columns_and_shows_the_error(database_url, queue):
    """`ls` was about 180 columns wide and had no LAST_ERROR column; `-w` shows every column whole."""
    failed = realistic(queue)
    out = cli(database_url, "ls")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    assert lines[0].split()[-1] == "LAST_ERROR"
    row = next(line for line in lines if line.startswith(f"{failed[0]} "))
    assert "Jenkins answered 500" in row and row.endswith("…")
    wide = cli(database_url, "ls", "--wide").splitlines()
    assert "DISPATCH_ID" in wide[0].split() and "PRIORITY" in wide[0].split()
    assert f"{LONG_ERROR} (job {failed[0]})" in next(line for line in wide if line.startswith(f"{failed[0]} "))
    # The same columns (their widths follow the longest cell, and a waiting row's age may have grown a digit).
    assert cli(database_url, "ls", "-w").splitlines()[0].split() == wide[0].split()


def test_ls_filters_as_retry_and_cancel_do(database_url, queue):
    """`ls` lacked --error-like and --param, which the page has; retry and cancel lacked --param."""
    failed = realistic(queue)
    shown = json.loads(cli(database_url, "ls", "--error-like", "NO EXECUTOR", "--json"))
    assert sorted(r["id"] for r in shown) == sorted(failed)
    first = queue.get(failed[0])
    selected = json.loads(cli(database_url, "ls", "--error-like", "executor", "--param",
                              f"VERSION={first['parameters']['VERSION']}", "--json"))
    assert [r["id"] for r in selected] == [failed[0]]
    assert cli(database_url, "ls", "--param", "VERSION=v9", "--param", "ENV=prod").strip() == "no jobs match"
    dry = json.loads(cli(database_url, "retry", "--param", f"VERSION={first['parameters']['VERSION']}", "--json"))
    assert dry["matched"] == 1 and dry["ids"] == [failed[0]]
    pending = json.loads(cli(database_url, "cancel", "--param", "ENV=prod", "--json"))
    assert pending["matched"] == len([r for r in json.loads(cli(database_url, "ls", "--param", "ENV=prod",
                                                                "--status", "pending", "--json"))]) + \
        len(json.loads(cli(database_url, "ls", "--param", "ENV=prod", "--status", "processing", "--json")))
    cli(database_url, "ls", "--param", "bad key=1", code=2)


def test_ls_json_carries_everything_show_json_does(database_url, queue):
    """`ls --json` left out parameters (and more): each row has every key `show --json` gives for the job."""
    realistic(queue)
    rows = json.loads(cli(database_url, "ls", "--json", "--limit", "100"))
    for row in rows:
        show = json.loads(cli(database_url, "show", str(row["id"]), "--json"))
        assert set(row) >= set(show["job"]) | {"links", "waiting"}, set(show["job"]) - set(row)
        assert {k: row[k] for k in show["job"]} == show["job"] and row["links"] == show["links"]
        assert row["waiting"] == show["waiting"] or row["status"] == "pending"  # its age moves on
        if row["id"] > 3:
            break


# With JENKINS_URL's `default`, two controllers.
TWO_CONTROLLERS = json.dumps({"eu-west-production": {"url": "http://127.0.0.2:9/", "user": "a", "api_token": "b"}})


def test_ls_and_schedule_ls_name_each_rows_controller_when_there_are_two(database_url, queue):
    """Issue 36: with two controllers `ls`, `ls -w` and `schedule ls` had no controller column, and two rows of the
    same job and build number on two controllers read like one job built twice. Still within 120 columns."""
    failed = realistic(queue)
    assert "CONTROLLER" not in cli(database_url, "ls").splitlines()[0].split()  # one controller: no column
    eu = [queue.enqueue(JOBS[1], {"ENV": "prod"}, controller="eu-west-production").id for _ in range(2)]
    two = dict(JENKINS_CONTROLLERS=TWO_CONTROLLERS)
    lines = cli_with(database_url, two, "ls").splitlines()
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    header = lines[0].split()
    assert header[:3] == ["ID", "JOB_NAME", "CONTROLLER"] and header[-1] == "LAST_ERROR"
    column = lines[0].index("CONTROLLER")
    of = {int(line.split()[0]): line[column:].split()[0] for line in lines[1:] if line[:1].isdigit()}
    assert {of[i] for i in eu} == {"eu-west-production"} and of[failed[0]] == "default"
    wide = cli_with(database_url, two, "ls", "-w").splitlines()
    assert "CONTROLLER" in wide[0].split()
    rows = json.loads(cli_with(database_url, two, "ls", "--json"))
    assert {r["id"]: r["controller"] for r in rows if r["id"] in eu} == dict.fromkeys(eu, "eu-west-production")
    cli_with(database_url, two, "schedule", "add", "nightly", "deploy", "--cron", "0 3 * * *",
             "--controller", "eu-west-production")
    schedules = cli_with(database_url, two, "schedule", "ls").splitlines()
    assert "CONTROLLER" in schedules[0].split() and "eu-west-production" in schedules[1].split()


def test_ls_names_the_controller_of_a_row_whose_controller_was_removed(database_url, queue):
    """One controller configured, but a row names another (its controller was removed from the configuration):
    the column is there, so that the row is not taken for one of the configured controller's."""
    queue.enqueue("deploy", controller="retired")
    queue.enqueue("deploy")
    lines = cli(database_url, "ls").splitlines()
    column = lines[0].split().index("CONTROLLER")
    assert sorted(line.split()[column] for line in lines[1:]) == ["default", "retired"]


def cli_with(database_url, env, *argv, code=0):
    full = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL="http://127.0.0.1:9/", JENKINS_USER="a",
                JENKINS_API_TOKEN="b", POWERTOOLS_LOG_LEVEL="ERROR", **env)
    proc = run_cli(list(argv), full)
    assert proc.returncode == code, proc
    return proc.stdout


def test_a_bulk_dry_run_says_what_it_would_change_by_job_and_controller(database_url, queue):
    """Issue 36: `cancel --status pending` said how many jobs and which ids; with two controllers, now also how
    many of each job on each controller (and `--json` carries the same)."""
    for controller in ("eu-west-production", "eu-west-production", "default"):
        queue.enqueue("deploy", controller=controller)
    two = dict(JENKINS_CONTROLLERS=TWO_CONTROLLERS)
    out = cli_with(database_url, two, "cancel", "--status", "pending").splitlines()
    assert out[0].startswith("3 jobs match (ids 1, 2, 3)")
    assert out[1] == "by job and controller: deploy on eu-west-production ×2, deploy on default ×1"
    said = json.loads(cli_with(database_url, two, "cancel", "--status", "pending", "--json"))
    assert said["by_job"] == [{"job_name": "deploy", "controller": "eu-west-production", "jobs": 2},
                              {"job_name": "deploy", "controller": "default", "jobs": 1}]
    assert all(queue.get(i)["status"] == "pending" for i in (1, 2, 3))  # a dry run changes nothing
