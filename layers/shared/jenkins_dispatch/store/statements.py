"""The SQL files, read by name: ``dialects/<engine>/queries.sql`` holds every statement of one dialect.

Owns the file format and nothing else; it never runs a statement (``queue.py`` and ``migrations.py`` do).
A file is a sequence of blocks, each opened by a header line:

* ``-- name: NAME`` a statement, run by that name; its text is everything up to the next header, without
  the final ``;`` and the comment lines after it (those head the next section; the comments above the
  statement are part of it);
* ``-- fragment: NAME`` text several statements share, written once; a statement includes it with
  ``{{NAME}}``, replaced by the fragment's text (without the comment lines that open it, which document
  it) when the file is loaded; a fragment may include another, never itself;
* ``-- lock: NAME = KEY`` (a line, anywhere before the first block) an advisory-lock key, the only place
  it is written; a statement or fragment says ``{{lock:NAME}}``;
* ``-- not run on this engine: WHY`` (a comment line above a statement, in its own block) the package never
  runs this statement on this file's engine, for the reason given. Nothing here acts on it: a run of the
  whole test suite fails unless every other statement ran on its engine (tests/statement_coverage.py).

Including is plain text substitution at load time: the server receives the whole statement, exactly as
if it had been written out in full.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ..errors import StatementError

SQL_DIR = Path(__file__).with_name("dialects")
_HEADER = re.compile(r"^-- (name|fragment): *(\S+) *$", re.M)
_LOCK = re.compile(r"^-- lock: *(\w+) *= *(\d+) *$", re.M)
_INCLUDE = re.compile(r"\{\{(lock:)?(\w+)\}\}")
# Read by the test suite only: compiled on first use (re's own cache), not at every process's import.
_NOT_RUN = r"^[ \t]*-- not run on this engine: *(\S.*?) *$"


def parse(text: str) -> dict[str, str]:
    """The statements of one file's ``text``, by name, with their fragments and lock keys filled in."""
    locks: dict[str, str] = {}
    for name, key in _LOCK.findall(text):
        for other, taken in locks.items():
            if taken == key:
                raise StatementError(f"locks {other} and {name} share the key {key}")
        locks[name] = key
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    headers = list(_HEADER.finditer(text))
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        kind, name = header.group(1), header.group(2)
        body = text[header.end():following.start() if following else len(text)]
        if name in blocks["name"] or name in blocks["fragment"]:
            raise StatementError(f"{name!r} is defined twice")
        body = _trimmed(body)
        if kind == "fragment":  # its leading comments document the fragment, not each statement using it
            body = re.sub(r"\A(?:[ \t]*--[^\n]*\n)*", "", body).strip()
        blocks[kind][name] = body

    def render(name: str, body: str, within: tuple[str, ...] = ()) -> str:
        def include(match: re.Match) -> str:
            is_lock, ref = match.group(1), match.group(2)
            if is_lock:
                if ref not in locks:
                    raise StatementError(f"unknown lock {ref!r} in {name}")
                return locks[ref]
            if ref not in blocks["fragment"]:
                raise StatementError(f"unknown fragment {ref!r} in {name}")
            if ref in within:
                raise StatementError(f"fragment {ref!r} includes itself (through {' → '.join(within)})")
            return render(ref, blocks["fragment"][ref], (*within, ref))

        return _INCLUDE.sub(include, body)

    return {name: render(name, body) for name, body in blocks["name"].items()}


def _trimmed(body: str) -> str:
    """A block's text without the comments that follow its statement (they head the next section)."""
    lines = body.strip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
        lines.pop()
    return "\n".join(lines).strip().rstrip(";")


def dialect_dir(dialect: str) -> Path:
    """The folder of one dialect's SQL: its ``queries.sql`` and its ``migrations/``."""
    folder = SQL_DIR / dialect
    if not (folder / "queries.sql").is_file():
        known = ", ".join(sorted(p.parent.name for p in SQL_DIR.glob("*/queries.sql")))
        raise StatementError(f"no SQL for dialect {dialect!r} (have: {known})")
    return folder


@cache
def load(dialect: str) -> dict[str, str]:
    """Every statement of ``dialect``, by name (read once per process)."""
    return parse((dialect_dir(dialect) / "queries.sql").read_text())


def not_run(loaded: dict[str, str]) -> dict[str, str]:
    """Of ``loaded`` statements (one engine's, as ``load`` or ``parse`` gives them), those declared never run on
    that engine, each with the reason given. Read from the statements' text, so that a declaration goes with its
    statement whichever file holds it."""
    return {name: found.group(1) for name, sql in loaded.items() if (found := re.search(_NOT_RUN, sql, re.M))}
