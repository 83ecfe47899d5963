"""`jenkins-dispatch --help` as a user reads it (issue 12 item 9): every environment variable the configuration
reads, each with its default; `--json` first and a group without its command, in a subprocess."""

import json
import os
import subprocess
import sys

import pytest

from jenkins_dispatch import config
from jenkins_dispatch.config import load_settings


def cli(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], capture_output=True, text=True,
                          timeout=30, env=env)


def top_level_help() -> str:
    proc = cli("--help")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class RecordingEnv(dict):
    """An environment that notes every variable asked for, set or not."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)


def fake_secret(arn: str) -> str:
    return json.dumps({"host": "db.example", "username": "u", "password": "p", "url": "https://ci.example/",
                       "user": "ci", "api_token": "t", "token": "w"})


def every_variable_load_settings_reads() -> set[str]:
    """Every configuration path: a URL with Jenkins and the webhook; secrets by ARN; IAM auth."""
    asked: set[str] = set()
    for env in (
        {"DATABASE_URL": "postgresql://u@127.0.0.1/db", "JENKINS_URL": "http://j/", "JENKINS_USER": "a",
         "JENKINS_API_TOKEN": "t", "WEBHOOK_SECRET": "w"},
        {"DB_SECRET_ARN": "arn:db", "JENKINS_SECRET_ARN": "arn:j", "WEBHOOK_SECRET_ARN": "arn:w"},
        {"DB_IAM_AUTH": "true", "DB_HOST": "db.example", "DB_USER": "u"},
    ):
        recording = RecordingEnv(env)
        load_settings(recording, fetch_secret=fake_secret)
        asked |= recording.asked
    return asked


def option_block(help_text: str, option: str) -> str:
    """The lines argparse wrote for one option: its own line and the more indented ones after it."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(option))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 6) or line.lstrip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


def test_json_before_the_command_in_a_subprocess(database_url):
    proc = cli("--json", "stats", env=dict(os.environ, DATABASE_URL=database_url))
    assert proc.returncode == 0, proc.stderr
    assert "totals" in json.loads(proc.stdout)


def test_a_group_without_its_command_in_a_subprocess():
    proc = cli("limits")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "choose a command: set, rm, ls" in proc.stderr, proc.stderr


def test_every_variable_the_configuration_reads_is_in_the_help():
    read = every_variable_load_settings_reads()
    assert {"DATABASE_URL", "BATCH_SIZE", "LEASE_SECONDS", "DB_SECRET_ARN", "DB_HOST", "AWS_REGION"} <= read
    text = top_level_help()
    missing = sorted(name for name in read if name not in text)
    assert missing == [], missing
    assert read <= {v.name for v in config.ENVIRONMENT}


def test_the_help_shows_each_variable_with_its_default():
    text = top_level_help()
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()
             and line.split()[0].isupper()}
    assert "300" in lines["LEASE_SECONDS"] and "32" in lines["BATCH_SIZE"] and "continuous" in lines["DISPATCHER_MODE"]
    assert "LEASE_SECONDS" in lines["RESEND_QUIET_SECONDS"]  # a default derived from another setting says so
    for variable in config.ENVIRONMENT:
        assert variable.name in lines, variable.name
        assert variable.meaning.split()[0] in lines[variable.name], lines[variable.name]


@pytest.mark.parametrize("command, option, default", [
    ("ls", "--limit", "50"), ("prune", "--batch", "1000"), ("serve", "--interval", "10.0"),
    ("serve", "--port", "8080"), ("serve", "--host", "127.0.0.1"), ("enqueue", "--max-attempts", "3"),
    ("enqueue", "--priority", "0"), ("retry", "--limit", "1000"), ("cancel", "--reason", "cancelled by operator"),
])
def test_the_defaults_named_in_the_issue_are_shown(command, option, default):
    proc = cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"(default: {default})" in option_block(proc.stdout, option), proc.stdout
