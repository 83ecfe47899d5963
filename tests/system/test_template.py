"""template.yaml through the linters a user runs: cfn-lint and `sam validate --lint`, when installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
BIN = Path(sys.executable).parent
# `make test` sets it when its `make lint` has just run both commands (lint-sam): not twice in one run.
LINTED_BY_MAKE = os.environ.get("JD_TEMPLATE_LINTED") == "1"


def _tool(name: str) -> str | None:
    if LINTED_BY_MAKE:
        pytest.skip("make lint (lint-sam) ran it a moment ago in this `make test`")
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


def test_cfn_lint_clean():
    tool = _tool("cfn-lint")
    if tool is None:
        pytest.skip("cfn-lint is not installed (pip install cfn-lint)")
    result = subprocess.run([tool, str(TEMPLATE)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_sam_validate_lint_clean():
    tool = _tool("sam")
    if tool is None:
        pytest.skip("aws-sam-cli is not installed (pip install aws-sam-cli)")
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0"}
    result = subprocess.run(
        [tool, "validate", "--lint", "--template-file", str(TEMPLATE)],
        capture_output=True, text=True, timeout=180, cwd=ROOT, env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a valid SAM Template" in result.stdout + result.stderr
