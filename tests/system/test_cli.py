"""The operator CLI as a subprocess: exit codes and one line on stderr when the database is unreachable, the
configuration is bad or the schema missing, a closed pipe, a dispatch Jenkins stopped."""

import json
import os
import subprocess
import sys


def test_unreachable_database_names_the_host_never_the_password():
    env = dict(os.environ, DATABASE_URL="postgresql://ops:hunter2-secret@127.0.0.1:9/queue")
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "ls"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 1  # the operation failed (the input was fine)
    assert proc.stderr.count("\n") == 1 and "127.0.0.1:9" in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout


def test_bad_configuration_names_the_variable():
    env = dict(os.environ, LEASE_SECONDS="1", JENKINS_TIMEOUT_SECONDS="5")
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "stats"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and "LEASE_SECONDS" in proc.stderr and proc.stderr.count("\n") == 1


def test_commands_before_migrate_say_so_in_one_line(database_url):
    """Issue 12 #3: every command before `migrate` printed a traceback (relation does not exist)."""
    from ..pg_server import postgres_server, scratch_database

    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_nomig") as url:
        env = dict(os.environ, DATABASE_URL=url)
        for argv in (["stats"], ["ls"], ["show", "1"], ["limits", "ls"], ["enqueue", "deploy"]):
            proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], env=env,
                                  capture_output=True, text=True, timeout=30)
            assert proc.returncode == 1, (argv, proc.stderr)
            assert proc.stderr.count("\n") == 1 and "jenkins-dispatch migrate" in proc.stderr, proc.stderr
            assert "Traceback" not in proc.stderr


def test_output_into_a_closed_pipe_is_not_a_traceback(database_url, queue):
    """Issue 12 #8: `ls | head -2` ended in a BrokenPipeError traceback."""
    for _ in range(300):
        queue.enqueue("deploy")
    proc = subprocess.run(f"{sys.executable} -m jenkins_dispatch.cli ls --limit 300 | head -2", shell=True,
                          env=dict(os.environ, DATABASE_URL=database_url), capture_output=True, text=True, timeout=30)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert len(proc.stdout.splitlines()) == 2


def test_a_dispatch_stopped_by_jenkins_exits_1(jenkins, queue, database_url):
    """Issue 12 #4: `dispatch` exited 0 although its pass stopped because Jenkins rejected the credentials."""
    queue.enqueue("deploy")
    env = dict(os.environ, DATABASE_URL=database_url, JENKINS_URL=jenkins.base_url, JENKINS_USER="admin",
               JENKINS_API_TOKEN="wrong")
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "dispatch"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["jenkins_unavailable"] is True and summary["released"] == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("jenkins-dispatch: error: the pass stopped")
    assert "wrong" not in proc.stderr


def test_doctor_says_its_failure_once():
    """Issue 25 #5: the failure summary came twice, on stdout ("3 failed: ...") and on stderr."""
    env = dict(os.environ, DATABASE_URL="postgresql://ops@127.0.0.1:9/queue", JENKINS_URL="http://127.0.0.1:9/",
               JENKINS_USER="a", JENKINS_API_TOKEN="b", JENKINS_TIMEOUT_SECONDS="2")
    env.pop("WEBHOOK_SECRET", None)
    proc = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", "doctor"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "jenkins-dispatch: error: 3 of 9 checks failed: database, jenkins, webhook secret\n"
    assert "failed" not in proc.stdout and proc.stdout.splitlines()[0].split() == ["CHECK", "RESULT", "DETAIL"]
