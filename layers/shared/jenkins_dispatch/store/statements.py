"""The SQL files, read by name: ``dialects/<engine>/queries/*.sql`` hold every statement of one dialect, one file
per concern (``claim.sql``, ``settle.sql``, ``reports.sql``, ...; ``shared.sql`` what several files share), the
same file names on every engine.

Owns the file format and nothing else; it never runs a statement (the stores, through ``runner.py``, and
``migrations.py`` do). A dialect's files are read as one text, in the order of their names, so that a fragment or
a lock key declared in one file serves statements of the others; a name is defined in one file only. A file is a
sequence of blocks, each opened by a header line:

* ``-- name: NAME`` a statement, run by that name; its text is everything up to the next header, without
  the final ``;`` and the comment lines after it (those head the next section; the comments above the
  statement are part of it);
* ``-- fragment: NAME`` text several statements share, written once; a statement includes it with
  ``{{NAME}}``, replaced by the fragment's text (without the comment lines that open it, which document
  it) when the file is loaded; a fragment may include another, never itself;
* ``-- lock: NAME = KEY`` (a comment line between blocks, in any file of the dialect: ``shared.sql`` holds
  them) an advisory-lock key, the only place it is written; a statement or fragment says ``{{lock:NAME}}``;
* ``-- variant: NAME = BASE with FRAGMENT=OTHER[, FRAGMENT=OTHER ...]`` (a comment line between blocks) a
  statement run by NAME: BASE's text with each named fragment included as the OTHER one instead, wherever BASE
  or a fragment it includes says ``{{FRAGMENT}}``. The claims in fair-share order are their seed-order claims
  with another ``ORDER BY``: written once, they cannot drift apart;
* ``-- not run on this engine: WHY`` (a comment line above a statement, in its own block) the package never
  runs this statement on this file's engine, for the reason given. Nothing here acts on it: a run of the
  whole test suite fails unless every other statement ran on its engine (tests/statement_coverage.py).

Including is plain text substitution at load time: the server receives the whole statement, exactly as
if it had been written out in full.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from ..errors import StatementError

SQL_DIR = Path(__file__).with_name("dialects")
QUERIES = "queries"  # each dialect's folder of statement files, beside its migrations/
_HEADER = re.compile(r"^-- (name|fragment): *(\S+) *$", re.M)
_LOCK = re.compile(r"^-- lock: *(\w+) *= *(\d+) *$", re.M)
_VARIANT = re.compile(r"^-- variant: *(\w+) *= *(\w+) +with +(\w+ *= *\w+(?: *, *\w+ *= *\w+)*) *$", re.M)
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

    def render(name: str, body: str, within: tuple[str, ...] = (), instead: Mapping[str, str] | None = None,
               swapped: set[str] | None = None) -> str:
        def include(match: re.Match) -> str:
            is_lock, ref = match.group(1), match.group(2)
            if is_lock:
                if ref not in locks:
                    raise StatementError(f"unknown lock {ref!r} in {name}")
                return locks[ref]
            if instead and ref in instead:
                if swapped is not None:
                    swapped.add(ref)
                ref = instead[ref]
            if ref not in blocks["fragment"]:
                raise StatementError(f"unknown fragment {ref!r} in {name}")
            if ref in within:
                raise StatementError(f"fragment {ref!r} includes itself (through {' → '.join(within)})")
            return render(ref, blocks["fragment"][ref], (*within, ref), instead, swapped)

        return _INCLUDE.sub(include, body)

    rendered = {name: render(name, body) for name, body in blocks["name"].items()}
    for name, base, pairs in _VARIANT.findall(text):
        if name in blocks["name"] or name in blocks["fragment"] or name in rendered:
            raise StatementError(f"{name!r} is defined twice")
        if base not in blocks["name"]:
            raise StatementError(f"variant {name} of unknown statement {base!r}")
        instead: dict[str, str] = {}
        for pair in pairs.split(","):
            fragment, other = pair.split("=")
            instead[fragment.strip()] = other.strip()
        swapped: set[str] = set()
        rendered[name] = render(name, blocks["name"][base], instead=instead, swapped=swapped)
        if unused := [fragment for fragment in instead if fragment not in swapped]:
            raise StatementError(f"variant {name}: {base} never includes {', '.join(unused)}")
    return rendered


def _trimmed(body: str) -> str:
    """A block's text without the comments that follow its statement (they head the next section)."""
    lines = body.strip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
        lines.pop()
    return "\n".join(lines).strip().rstrip(";")


def dialect_dir(dialect: str) -> Path:
    """The folder of one dialect's SQL: its ``queries/`` and its ``migrations/``."""
    folder = SQL_DIR / dialect
    if not (folder / QUERIES).is_dir():
        known = ", ".join(sorted(p.parent.name for p in SQL_DIR.glob(f"*/{QUERIES}") if p.is_dir()))
        raise StatementError(f"no SQL for dialect {dialect!r} (have: {known})")
    return folder


def statement_files(dialect: str) -> list[Path]:
    """The files of one dialect's statements, in the order they are read."""
    return sorted((dialect_dir(dialect) / QUERIES).glob("*.sql"))


def parse_files(texts: Mapping[str, str]) -> dict[str, str]:
    """The statements of several files (file name → its text) read as one, refusing a name (of a statement or a
    fragment) that two files define."""
    where: dict[str, str] = {}
    for file, text in texts.items():
        for _kind, name in _HEADER.findall(text):
            if name in where and where[name] != file:
                raise StatementError(f"{name!r} is defined in {where[name]} and in {file}")
            where[name] = file
    return parse("\n".join(texts.values()))


@cache
def load(dialect: str) -> dict[str, str]:
    """Every statement of ``dialect``, by name (read once per process)."""
    return parse_files({path.name: path.read_text() for path in statement_files(dialect)})


def not_run(loaded: dict[str, str]) -> dict[str, str]:
    """Of ``loaded`` statements (one engine's, as ``load`` or ``parse`` gives them), those declared never run on
    that engine, each with the reason given. Read from the statements' text, so that a declaration goes with its
    statement whichever file holds it."""
    return {name: found.group(1) for name, sql in loaded.items() if (found := re.search(_NOT_RUN, sql, re.M))}
