"""The SQL files and their loader: named blocks, shared fragments, one home for lock keys, one file per
dialect. Pure: no database."""

import re
from pathlib import Path

import pytest

from jenkins_dispatch.errors import StatementError
from jenkins_dispatch.store import statements
from jenkins_dispatch.store.statements import parse

STORE = Path(statements.__file__).parent
PACKAGE = STORE.parent
DIALECT = "postgresql"
DIALECT_FILE = STORE / "dialects" / DIALECT / "queries.sql"
MIGRATIONS = STORE / "dialects" / DIALECT / "migrations"


@pytest.mark.parametrize("text, expected", [
    ("-- name: one\nSELECT 1;\n", {"one": "SELECT 1"}),
    ("-- preamble\n-- name: a\n-- why\nSELECT 1;\n\n-- name: b\nSELECT 2\n", {"a": "-- why\nSELECT 1", "b": "SELECT 2"}),
    ("-- name: a\nSELECT 1;\n\n-- ===== next section\n-- about it\n\n-- name: b\nSELECT 2;\n",
     {"a": "SELECT 1", "b": "SELECT 2"}),
    ("-- fragment: f\n-- what f is for\nx = 1\n\n-- name: q\nSELECT {{f}};\n", {"q": "SELECT x = 1"}),
    ("-- lock: caps = 42\n-- name: q\nSELECT pg_advisory_xact_lock({{lock:caps}});\n",
     {"q": "SELECT pg_advisory_xact_lock(42)"}),
    ("-- lock: k = 7\n-- fragment: f\nlock({{lock:k}})\n-- name: q\nSELECT {{f}}\n", {"q": "SELECT lock(7)"}),
    ("-- fragment: inner\nx = 1\n-- fragment: outer\nWHERE {{inner}}\n-- name: q\nSELECT 1 {{outer}}\n",
     {"q": "SELECT 1 WHERE x = 1"}),
])
def test_parse_renders_named_blocks(text, expected) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text, message", [
    ("-- name: q\nSELECT {{nope}}\n", "unknown fragment 'nope' in q"),
    ("-- name: q\nSELECT {{lock:nope}}\n", "unknown lock 'nope' in q"),
    ("-- name: q\nSELECT 1\n-- name: q\nSELECT 2\n", "'q' is defined twice"),
    ("-- lock: a = 1\n-- lock: b = 1\n-- name: q\nSELECT 1\n", "locks a and b share the key 1"),
    ("-- fragment: f\n{{g}}\n-- fragment: g\n{{f}}\n-- name: q\nSELECT {{f}}\n", "fragment 'f' includes itself"),
])
def test_parse_refuses_what_cannot_be_meant(text, message) -> None:
    with pytest.raises(StatementError, match=re.escape(message)):
        parse(text)


def test_statements_come_from_the_dialect_file_by_name() -> None:
    loaded = statements.load(DIALECT)
    assert loaded == parse(DIALECT_FILE.read_text())
    assert "claim_batch" in loaded and "{{" not in "".join(loaded.values())
    with pytest.raises(StatementError, match="no SQL for dialect 'oracle'"):
        statements.load("oracle")


def test_each_claim_shares_one_definition_of_the_claim_update_and_its_history() -> None:
    text = DIALECT_FILE.read_text()
    assert text.count("SET status = 'processing'") == 1
    assert text.count("SELECT id, 'claimed', 'pending', 'processing'") == 1
    loaded = statements.load(DIALECT)
    for name in ("claim_batch", "claim_batch_capped"):
        assert "SET status = 'processing'" in loaded[name]
        assert "SELECT id, 'claimed', 'pending', 'processing'" in loaded[name]


def test_each_advisory_lock_key_is_declared_once_and_written_nowhere_else() -> None:
    text = DIALECT_FILE.read_text()
    declared = {name: int(key) for name, key in re.findall(r"^-- lock: (\w+) = (\d+)", text, flags=re.M)}
    assert set(declared) == {"caps", "migrations", "pauses"}
    for key in declared.values():
        assert text.count(str(key)) == 1
        for module in PACKAGE.rglob("*.py"):
            assert str(key) not in module.read_text(), module.name
    # 0004 is applied history and keeps its literal: it must be the declared key.
    pauses = (MIGRATIONS / "0004_pauses.sql").read_text()
    assert f"pg_advisory_xact_lock_shared({declared['pauses']})" in pauses
    per_controller = (MIGRATIONS / "0014_controller_pauses.sql").read_text()
    assert f"pg_advisory_xact_lock_shared({declared['pauses']})" in per_controller


def test_no_sql_outside_the_sql_files_but_the_session_settings() -> None:
    """queue.py and migrations.py run statements by name; db.py owns only session mechanics."""
    for name in ("queue.py", "migrations.py"):
        source = (STORE / name).read_text()
        assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE)\s+[A-Za-z_(]", source), name


def test_only_the_database_side_imports_the_database_driver() -> None:
    """The dialect seam: each driver is known to its own engine's session module only; the queue and the
    migrations see neither."""
    for driver, home in (("pg8000", "store/dialects/postgresql/session.py"),
                         ("pymysql", "store/dialects/mysql/session.py")):
        importers = {m.relative_to(PACKAGE).as_posix() for m in PACKAGE.rglob("*.py")
                     if re.search(rf"^\s*(from|import) {driver}", m.read_text(), re.M)}
        assert importers == {home}, driver
