"""Unit tests are pure: no database, no Jenkins emulator, no sockets, no child processes.

Each of those is refused here with the reason, rather than left to slow a suite meant to run in seconds:
a test that needs one belongs in tests/integration (PostgreSQL, the emulator) or tests/system (processes).
"""

from __future__ import annotations

import socket
import subprocess

# croniter's import runs `file` on the interpreter (platform.architecture): imported here, before child processes
# are refused, so that a unit test run alone that imports it first is not failed for a process it never started.
import croniter  # noqa: F401
import pytest

MOVE_IT = "unit tests are pure: a test that needs {} belongs in tests/integration or tests/system"


def _refuse(what: str):
    def refuse(*_args, **_kwargs):
        raise AssertionError(MOVE_IT.format(what))
    return refuse


@pytest.fixture(autouse=True)
def _no_sockets_or_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection, listening socket or child process started by a unit test fails it."""
    for method in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, method, _refuse("a socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("a child process"))


# The session's database and the emulator, refused by name before they could start.
@pytest.fixture
def database_url():
    pytest.fail(MOVE_IT.format("the database (database_url)"))


@pytest.fixture
def db():
    pytest.fail(MOVE_IT.format("the database (db)"))


@pytest.fixture
def queue():
    pytest.fail(MOVE_IT.format("the database (queue)"))


@pytest.fixture
def make_jenkins():
    pytest.fail(MOVE_IT.format("the Jenkins emulator (make_jenkins)"))


@pytest.fixture
def jenkins():
    pytest.fail(MOVE_IT.format("the Jenkins emulator (jenkins)"))


# Secrets Manager without the network: moto answers inside this process.
@pytest.fixture
def aws(monkeypatch):
    """Secrets Manager in memory (moto): yields its client; Powertools' caches start and end empty."""
    mock_aws = pytest.importorskip("moto").mock_aws
    import boto3
    from aws_lambda_powertools.utilities import parameters

    from jenkins_dispatch import runtime

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    parameters.clear_caches()
    # Powertools keeps one provider (with one boto3 client) per process: start from a clean slate so
    # it builds its client inside moto's mock.
    monkeypatch.setattr(parameters.secrets, "DEFAULT_PROVIDERS", {}, raising=False)
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")
    parameters.clear_caches()
    runtime.reset()


@pytest.fixture
def secret_calls(monkeypatch):
    """Counts GetSecretValue calls that reach (moto's) Secrets Manager, per SecretId."""
    from botocore.client import BaseClient

    calls: list[str] = []
    original = BaseClient._make_api_call

    def counting(self, operation_name, api_params):
        if operation_name == "GetSecretValue":
            calls.append(api_params["SecretId"])
        return original(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return calls
