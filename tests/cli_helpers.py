"""Running the CLI in this process, as the tests of every layer do."""

from __future__ import annotations

from jenkins_dispatch.cli import main


def exit_code(argv) -> int:
    """main() returns 2 for bad values; argparse exits 2 for bad syntax. Either way, the code."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code
