"""`jenkins-dispatch`: the operator's command line. Tables for people, `--json` for scripts.

Bad input exits 2 with one line on stderr and changes nothing. ``main`` (the console script's entry point, and
``python -m jenkins_dispatch.cli`` through ``__main__``) is this package's public face. One module per command
group, each with its commands and their parsers:

- ``main``: the command tree in `--help`'s order, ``main``, and the mapping of errors to exit codes;
- ``arguments``: the parsers' shape (one line on stderr, exit 2) and what an argument may be;
- ``output``: JSON for scripts, tables for people, the exit codes;
- ``context``: the settings and the database session a command is handed, read and opened on first use;
- ``queue``: `enqueue`, `ls`, `show`, `cancel` and `retry` (one job, several, or those filters select);
- ``pauses``: `pause` and `resume`;
- ``limits``: `limits set|rm|ls|history`, caps and rates;
- ``keys``: `keys derive|rm|ls`, the keys a job's rows get from their parameters;
- ``reports``: `stats`;
- ``schedules``: `schedule add|set|ls|rm|pause|resume`;
- ``maintenance``: `migrate`, `prune` and `doctor`;
- ``processes``: `dispatch`, `serve` and `ui`.
"""

from .main import main

__all__ = ["main"]
