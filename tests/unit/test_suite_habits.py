"""The test suite's own rules, so that it stays green wherever a user runs it: on any Python from 3.11 on, and
against whichever server DATABASE_URL, MYSQL_TEST_URL or the embedded fallback gives it.

Pure and fast: reads the tests' source with ``ast``; runs none of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The one module that starts child processes, with the "spawn" context (tests/child_processes.py says why).
CHILD_PROCESSES = TESTS / "child_processes.py"
# Where the suite looks for its servers when it is told nothing: the only files that may name those addresses.
SERVER_FINDERS = {TESTS / "pg_server.py", TESTS / "mysql_server.py"}
# Text, not a connection: the README shows the usual local server, and scripts/readme_examples.py maps whatever
# server the examples ran on back to it.
README_TEXT = {TESTS / "system" / "test_readme_examples.py"}
LOCAL_SERVER = re.compile(r"""(127\.0\.0\.1|localhost|\[?::1\]?)["']?\s*[:,]\s*(5432|3306)\b""")


def _sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(TESTS.rglob("*.py"))}


def test_the_sources_are_read_at_all() -> None:
    sources = _sources()
    assert CHILD_PROCESSES in sources and len(sources) > 50


def test_only_the_child_process_helper_uses_multiprocessing_and_nothing_forks() -> None:
    """A fork after threads started (the emulator's, a webhook's, xdist's) copies their locks mid-use: Python
    3.12+ warns, and objects built before the fork break after it. Children come through one helper, from a fork
    server: a single-threaded process of their own, never the test's."""
    found = []
    for path, text in _sources().items():
        where = path.relative_to(TESTS)
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.Attribute) and node.attr in ("fork", "forkpty"):
                found.append(f"{where}:{node.lineno}: .{node.attr}")
            elif "ProcessPool" in str(getattr(node, "id", None) or getattr(node, "name", None)):
                found.append(f"{where}:{node.lineno}: a process pool")  # forks too, before Python 3.14
            elif path == CHILD_PROCESSES:
                if isinstance(node, ast.Constant) and node.value == "fork":
                    found.append(f"{where}:{node.lineno}: the {node.value!r} context")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{where}:{node.lineno}: imports {m}" for m in modules if m.startswith("multiprocessing")]
    assert found == []


def test_no_test_expects_the_database_on_the_usual_local_port() -> None:
    """Tests read where the database is from their settings (``parse_database_url(database_url)``): a user's
    DATABASE_URL may name another host or port, and the embedded fallback listens on a Unix socket."""
    found = [f"{path.relative_to(TESTS)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
             for path, text in _sources().items() if path not in SERVER_FINDERS | README_TEXT
             for match in LOCAL_SERVER.finditer(text)]
    assert found == []
