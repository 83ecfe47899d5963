"""The SQL files and their loader: named blocks, shared fragments, one home for lock keys, one folder per
dialect with a file per concern, the same files on every engine. Pure: no database."""

import re
from pathlib import Path

import pytest

from jenkins_dispatch.errors import StatementError
from jenkins_dispatch.store import statements
from jenkins_dispatch.store.migrations import migration_files
from jenkins_dispatch.store.statements import parse

STORE = Path(statements.__file__).parent
PACKAGE = STORE.parent
DIALECT = "postgresql"
DIALECT_TEXT = "\n".join(path.read_text() for path in statements.statement_files(DIALECT))  # its files as one
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
    # A variant: its base with fragments swapped, wherever they are included, the base itself unchanged.
    ("-- fragment: order\nscheduled_at\n-- fragment: fair\nfair_round, scheduled_at\n"
     "-- fragment: tail\nORDER BY {{order}}\n-- name: claim\nSELECT id {{tail}};\n"
     "-- variant: claim_fair = claim with order=fair\n",
     {"claim": "SELECT id ORDER BY scheduled_at", "claim_fair": "SELECT id ORDER BY fair_round, scheduled_at"}),
    ("-- fragment: a\n1\n-- fragment: b\n2\n-- fragment: c\n3\n-- name: q\nSELECT {{a}}, {{b}};\n"
     "-- variant: v = q with a=c, b = a\n", {"q": "SELECT 1, 2", "v": "SELECT 3, 1"}),
])
def test_parse_renders_named_blocks(text, expected) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text, message", [
    ("-- name: q\nSELECT {{nope}}\n", "unknown fragment 'nope' in q"),
    ("-- name: q\nSELECT {{lock:nope}}\n", "unknown lock 'nope' in q"),
    ("-- name: q\nSELECT 1\n-- name: q\nSELECT 2\n", "'q' is defined twice"),
    ("-- lock: a = 1\n-- lock: b = 1\n-- name: q\nSELECT 1\n", "locks a and b share the key 1"),
    ("-- fragment: f\n{{g}}\n-- fragment: g\n{{f}}\n-- name: q\nSELECT {{f}}\n", "fragment 'f' includes itself"),
    ("-- name: q\nSELECT 1;\n-- variant: v = nope with a=b\n", "variant v of unknown statement 'nope'"),
    ("-- fragment: a\n1\n-- name: q\nSELECT {{a}};\n-- variant: q = q with a=a\n", "'q' is defined twice"),
    ("-- fragment: a\n1\n-- name: q\nSELECT 1;\n-- variant: v = q with a=a\n", "variant v: q never includes a"),
    ("-- fragment: a\n1\n-- name: q\nSELECT {{a}};\n-- variant: v = q with a=zz\n", "unknown fragment 'zz' in v"),
])
def test_parse_refuses_what_cannot_be_meant(text, message) -> None:
    with pytest.raises(StatementError, match=re.escape(message)):
        parse(text)


@pytest.mark.parametrize("text, expected", [
    ("-- name: a\n-- not run on this engine: b takes its lock itself\nSELECT 1;\n-- name: b\nSELECT 2;\n",
     {"a": "b takes its lock itself"}),
    ("-- name: a\n-- why a exists\n  -- not run on this engine:   spaced out  \nSELECT 1;\n", {"a": "spaced out"}),
    ("-- name: a\n-- not run on this engine:\nSELECT 1;\n", {}),  # no reason: not a declaration
    # After a statement's end it heads the next block, which is not declared by it.
    ("-- name: a\nSELECT 1;\n-- not run on this engine: too late\n\n-- name: b\nSELECT 2;\n", {}),
    # A fragment's opening comments document the fragment: the statements including it are not declared.
    ("-- fragment: f\n-- not run on this engine: the fragment's\nx = 1\n-- name: a\nSELECT {{f}};\n", {}),
    ("-- name: a\nSELECT '-- not run on this engine: a string';\n", {}),
])
def test_a_statement_declared_not_run_on_its_engine_says_why(text, expected) -> None:
    assert statements.not_run(parse(text)) == expected


def test_statements_come_from_the_dialect_file_by_name() -> None:
    loaded = statements.load(DIALECT)
    assert loaded == parse(DIALECT_TEXT)
    assert "claim_batch" in loaded and "{{" not in "".join(loaded.values())
    with pytest.raises(StatementError, match="no SQL for dialect 'oracle'"):
        statements.load("oracle")


@pytest.mark.parametrize("texts, message", [
    ({"a.sql": "-- name: q\nSELECT 1;\n", "b.sql": "-- name: q\nSELECT 2;\n"}, "'q' is defined in a.sql and in b.sql"),
    ({"a.sql": "-- fragment: f\nx\n", "b.sql": "-- name: q\nSELECT 1;\n-- fragment: f\ny\n"},
     "'f' is defined in a.sql and in b.sql"),
])
def test_a_name_is_defined_in_one_file_of_a_dialect(texts, message) -> None:
    with pytest.raises(StatementError, match=re.escape(message)):
        statements.parse_files(texts)


def test_a_fragment_or_lock_of_one_file_serves_the_statements_of_another() -> None:
    texts = {"a.sql": "-- lock: k = 7\n-- fragment: f\nlock({{lock:k}})\n", "b.sql": "-- name: q\nSELECT {{f}};\n"}
    assert statements.parse_files(texts) == {"q": "SELECT lock(7)"}


def _names_per_file(dialect: str) -> dict[str, list[str]]:
    return {path.name: sorted(re.findall(r"^-- (?:name|variant): *(\w+)", path.read_text(), re.M))
            for path in statements.statement_files(dialect)}


def test_every_engine_splits_its_statements_into_the_same_files_the_same_way() -> None:
    """A statement of one concern is found in the file of the same name on every engine."""
    files = {dialect: _names_per_file(dialect) for dialect in ("postgresql", "mysql")}
    assert files["postgresql"] == files["mysql"]
    assert len(files["postgresql"]) > 5, files
    assert sum(len(names) for names in files["postgresql"].values()) == len(statements.load(DIALECT))


def test_every_statement_file_opens_with_a_heading_saying_what_it_holds() -> None:
    for dialect in ("postgresql", "mysql"):
        for path in statements.statement_files(dialect):
            first = path.read_text().splitlines()[0]
            assert first.startswith("-- ") and not first.startswith(("-- name:", "-- fragment:")), path


def test_each_claim_shares_one_definition_of_the_claim_update_and_its_history() -> None:
    text = DIALECT_TEXT
    assert text.count("SET status = 'processing'") == 1
    assert text.count("SELECT id, 'claimed', 'pending', 'processing'") == 1
    loaded = statements.load(DIALECT)
    for name in ("claim_batch", "claim_batch_capped", "claim_batch_keyed"):
        assert "SET status = 'processing'" in loaded[name]
        assert "SELECT id, 'claimed', 'pending', 'processing'" in loaded[name]


def test_each_advisory_lock_key_is_declared_once_and_written_nowhere_else() -> None:
    text = DIALECT_TEXT
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


# --------------------------------------------------------------------------- rows made pending: ours, or by hand

# What the trigger jenkins_jobs_queue_plain_sql keys on: an UPDATE to 'pending' that leaves the row a lease (it was
# processing: the seed's "requeue a stuck job" by hand) or a finish time (it was final: "retry a failed job").
PLAIN_SQL_KEYS = ("NEW.lease_expires_at IS NOT NULL", "NEW.finished_at IS NOT NULL")
_UPDATE = re.compile(r"(?<![\w.])UPDATE\b", re.I)
_NOT_A_WRITE = re.compile(r"\b(FOR|KEY)\s*\Z", re.I)  # a locking read (FOR UPDATE), an upsert's ON DUPLICATE KEY
_QUEUE = re.compile(r"\bjenkins_jobs_queue\b")
_SET = re.compile(r"\bSET\b", re.I)
_SET_ENDS = re.compile(r"\b(WHERE|FROM|RETURNING)\b", re.I)
_ASSIGNMENT = re.compile(r"\s*(?:\w+\.)?(\w+)\s*=\s*(.*\S)\s*\Z", re.S)


def _keyword_at(pattern: re.Pattern, text: str, i: int) -> bool:
    return bool(pattern.match(text, i)) and not (text[i - 1].isalnum() or text[i - 1] in "_.")


def queue_updates(sql: str) -> list[dict[str, str]]:
    """The SET assignments (column → expression, without a table alias) of each UPDATE of jenkins_jobs_queue in
    ``sql`` (alone or joined to other tables): from its SET to its WHERE, FROM or RETURNING, the statement's end or
    its CTE's closing parenthesis."""
    sql = re.sub(r"--[^\n]*", "", sql)
    found = []
    for update in _UPDATE.finditer(sql):
        if _NOT_A_WRITE.search(sql[:update.start()]):
            continue
        depth, quoted, set_at, start, parts = 0, False, None, 0, []
        for i in range(update.end(), len(sql) + 1):
            char = sql[i] if i < len(sql) else ";"
            if char == "'":
                quoted = not quoted
            if quoted or char == "'":
                continue
            if char == "(":
                depth += 1
            elif depth > 0:
                depth -= char == ")"
            elif set_at is None:
                if char in ";)":
                    break
                if _keyword_at(_SET, sql, i):
                    set_at = start = i + 3
            elif char == "," or char in ";)" or _keyword_at(_SET_ENDS, sql, i):
                parts.append(sql[start:i])
                start = i + 1
                if char != ",":
                    break
        if set_at is not None and _QUEUE.search(sql[update.end():set_at]):
            found.append({m.group(1).lower(): m.group(2) for part in parts if (m := _ASSIGNMENT.match(part))})
    return found


@pytest.mark.parametrize("sql, expected", [
    ("UPDATE jenkins_jobs_queue SET status = 'pending', lease_expires_at = NULL WHERE id = 1",
     [{"status": "'pending'", "lease_expires_at": "NULL"}]),
    ("WITH c AS (UPDATE jenkins_jobs_queue q SET status = CASE WHEN a IN ('x', 'y') THEN 'failed' END,\n"
     "  -- a comment, with a comma\n  last_error = concat('a, b', x) FROM o WHERE q.id = o.id) SELECT 1",
     [{"status": "CASE WHEN a IN ('x', 'y') THEN 'failed' END", "last_error": "concat('a, b', x)"}]),
    ("UPDATE jenkins_jobs_queue q FORCE INDEX (PRIMARY) JOIN t ON t.id = q.id\nSET q.status = 'failed', "
     "q.finished_at = NOW(6);\nUPDATE jenkins_jobs_queue SET attempts = 0",
     [{"status": "'failed'", "finished_at": "NOW(6)"}, {"attempts": "0"}]),
    ("WITH c AS (UPDATE jenkins_jobs_queue SET lease_expires_at = now() + make_interval(secs => 3)) SELECT 1",
     [{"lease_expires_at": "now() + make_interval(secs => 3)"}]),
    ("UPDATE JSON_TABLE(@ids, '$[*]' COLUMNS (id BIGINT PATH '$')) c STRAIGHT_JOIN jenkins_jobs_queue q\n"
     "ON q.id = c.id SET q.status = o.status", [{"status": "o.status"}]),
    ("SELECT id FROM jenkins_jobs_queue FOR UPDATE; INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE n = 2;\n"
     "UPDATE jenkins_job_limits SET status = 'pending'", []),
])
def test_the_assignments_of_each_queue_update_are_read(sql, expected) -> None:
    assert queue_updates(sql) == expected


def _may_write_pending(expression: str) -> bool:
    """Whether a status assignment may write 'pending': a literal of it, or a value from elsewhere."""
    literals = re.findall(r"'([^']*)'", expression)
    return "pending" in literals or not literals


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_no_statement_of_ours_makes_a_row_pending_the_way_the_plain_sql_trigger_picks_out(dialect) -> None:
    """The trigger takes an UPDATE to 'pending' that leaves a lease or a finish time for the seed's hand-made
    requeue or retry. Every statement of ours that may write 'pending' clears the lease (and, when it names
    'pending', the finish time: NULL, or a CASE whose other branches go with another status), so the trigger can
    never start taking our own transitions for a person's."""
    creating = [path for _number, _name, path in migration_files(dialect)
                if "TRIGGER jenkins_jobs_queue_plain_sql" in path.read_text()]
    assert creating, f"no {dialect} migration creates the trigger jenkins_jobs_queue_plain_sql"
    trigger = creating[-1].read_text()
    assert all(key in trigger for key in PLAIN_SQL_KEYS), creating[-1].name
    making_pending: dict[str, list[dict[str, str]]] = {}
    for name, sql in statements.load(dialect).items():
        for assignments in queue_updates(sql):
            if "status" in assignments and _may_write_pending(assignments["status"]):
                making_pending.setdefault(name, []).append(assignments)
    assert {"release", "retry_later", "retry_final"} <= set(making_pending)  # the rule is read at all
    for name, updates in making_pending.items():
        for assignments in updates:
            assert assignments.get("lease_expires_at", "").upper() == "NULL", (name, assignments)
            if "'pending'" in assignments["status"]:
                finish = assignments.get("finished_at", "").upper()
                assert finish == "NULL" or (finish.startswith("CASE") and " ELSE " not in finish), (name, finish)
