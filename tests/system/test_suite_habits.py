"""Habits the repository keeps outside its code: the pre-commit hooks run what `make lint` runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _lint_commands() -> list[str]:
    """The commands `make lint` runs, as make prints them (``-n``: nothing run; ``-o install``: not the install);
    the line that calls make again for sam.mk's ``lint-sam`` is replaced by what that prints."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # As a developer's shell runs it: not with the variables of a make that runs this suite (CI's second interpreter
    # runs it under `make suite VENV=.venv-second`, whose MAKEFLAGS would reach this make too).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VENV")}
    proc = subprocess.run(["make", "--no-print-directory", "-n", "-o", "install", "lint", "VENV=.venv"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    return [line.strip() for line in proc.stdout.splitlines() if line.strip() and "make " not in line]


def test_the_pre_commit_hooks_run_what_make_lint_runs():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # the project's own tools, nothing fetched
    assert [hook["entry"] for hook in hooks] == _lint_commands()
    # Each on the whole repository like `make lint`, not on the files of a commit.
    assert all(hook["language"] == "system" and hook["pass_filenames"] is False for hook in hooks), hooks


def test_make_lint_is_read_at_all():
    assert [command.split()[0].rsplit("/", 1)[-1] for command in _lint_commands()] == ["ruff", "mypy", "cfn-lint", "sam"]
