"""Running the CLI in this process, as the tests of every layer do."""

from __future__ import annotations

from jenkins_dispatch.cli import main


def exit_code(argv) -> int:
    """main() returns 2 for bad values; argparse exits 2 for bad syntax. Either way, the code."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


def configure_default_controller(monkeypatch) -> None:
    """The default controller (JENKINS_URL & co., never asked) for ``main`` run in this process: a command that stores
    something for a controller (`limits set`, `schedule add`, `pause --controller`) refuses one not configured."""
    for name, value in {"JENKINS_URL": "http://127.0.0.1:9/", "JENKINS_USER": "u", "JENKINS_API_TOKEN": "t"}.items():
        monkeypatch.setenv(name, value)
