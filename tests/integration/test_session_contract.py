"""The session contract (store/session.py), exercised the same way on every engine.

One suite for every engine's session: each test is written against ``Session`` alone, never against an engine's
name, and runs once per engine (``both_engines``). Where engines may differ the contract says so through a
capability (``supports_listen``, ``transactional_ddl``) and the test checks that the capability tells the truth.
An engine added under store/dialects/ is done when it passes this suite (add its name to tests/engines.py).

``test_the_suite_exercises_every_member_of_the_contract`` keeps the suite whole: a member added to ``Session``
fails it until a test here exercises the new member.
"""

from __future__ import annotations

import inspect
import threading
import time

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.wakeup import CHANNEL
from jenkins_dispatch.errors import DatabaseError, DispatchError, SchemaMissing
from jenkins_dispatch.store import dialects, statements
from jenkins_dispatch.store.db import Session, open_database
from jenkins_dispatch.store.migrations import migration_files
from jenkins_dispatch.store.session import TransactionHelp

from ..dispatch_helpers import wait_for
from ..stores import Queue

pytestmark = pytest.mark.both_engines

PROBE = "contract_probe"
DDL_PROBE = "contract_ddl_probe"

# Each member of the contract -> the test below that exercises it.
EXERCISED = {
    "dialect": "test_the_dialect_names_a_folder_with_the_engines_sql",
    "engine_name": "test_the_server_says_who_it_is",
    "begin": "test_a_transaction_commits_what_it_did",
    "supports_listen": "test_listen_delivers_notifications_where_supported_and_refuses_elsewhere",
    "transactional_ddl": "test_transactional_ddl_tells_whether_a_rollback_undoes_ddl",
    "locking_blocks": "test_a_locking_block_reads_what_committed_while_it_waited_on_its_lock",
    "long_transaction_help": "test_long_transaction_help_names_the_tools",
    "run": "test_run_binds_parameters_and_returns_rows_as_dicts",
    "run_script": "test_run_script_runs_several_statements_in_one_round_trip",
    "server_version": "test_the_server_says_who_it_is",
    "server_label": "test_the_server_says_who_it_is",
    "unsupported_server": "test_the_server_says_who_it_is",
    "listen": "test_listen_delivers_notifications_where_supported_and_refuses_elsewhere",
    "wait_for_notifications": "test_listen_delivers_notifications_where_supported_and_refuses_elsewhere",
    "waiting_seconds": "test_waiting_seconds_grows_while_a_statement_waits",
    "connection": "test_the_session_opens_lazily_and_reopens_after_close",
    "close": "test_the_session_opens_lazily_and_reopens_after_close",
    "transaction": "test_a_transaction_rolls_back_on_error_and_refuses_nesting",
    "in_transaction": "test_a_transaction_rolls_back_on_error_and_refuses_nesting",
    # Counters every session keeps (instance attributes, set by Session.__init__).
    "statements": "test_run_script_runs_several_statements_in_one_round_trip",
    "connects": "test_the_session_opens_lazily_and_reopens_after_close",
    "last_row_count": "test_run_binds_parameters_and_returns_rows_as_dicts",
}
INSTANCE_MEMBERS = {"statements", "connects", "last_row_count"}


def contract_members() -> set[str]:
    """The public members of ``Session``: methods, properties and class-level declarations."""
    declared = {name for name, _ in inspect.getmembers(Session) if not name.startswith("_")}
    return declared | {name for name in Session.__annotations__ if not name.startswith("_")} | INSTANCE_MEMBERS


def test_the_suite_exercises_every_member_of_the_contract() -> None:
    unexercised = sorted(contract_members() - set(EXERCISED))
    assert unexercised == [], f"add a test for these members of Session: {unexercised}"
    assert sorted(set(EXERCISED) - contract_members()) == [], "EXERCISED names members Session no longer has"
    tests = {name for name, value in globals().items() if name.startswith("test_") and callable(value)}
    assert sorted(set(EXERCISED.values()) - tests) == []


@pytest.mark.parametrize("engine_folder", dialects.engines())
def test_every_engine_folder_supplies_a_complete_session(engine_folder) -> None:
    session_class = dialects.session_class(engine_folder)
    assert issubclass(session_class, Session) and not inspect.isabstract(session_class)
    assert session_class.dialect == engine_folder


@pytest.fixture
def settings(database_url):
    return parse_database_url(database_url)


@pytest.fixture
def session(settings):
    with open_database(settings, application_name="jd-contract") as opened:
        yield opened


@pytest.fixture
def probe(session):
    """A scratch table of two rows, dropped afterwards."""
    session.run_script(f"DROP TABLE IF EXISTS {PROBE};\n"
                       f"CREATE TABLE {PROBE} (id INTEGER PRIMARY KEY, note VARCHAR(40) NOT NULL);\n"
                       f"INSERT INTO {PROBE} (id, note) VALUES (1, 'one'), (2, 'two')")
    yield PROBE
    session.close()  # whatever a test left open (a transaction, a lock) ends with its session
    session.run_script(f"DROP TABLE IF EXISTS {PROBE}")


def test_the_dialect_names_a_folder_with_the_engines_sql(session) -> None:
    assert session.dialect in dialects.engines()
    assert "server_identity" in statements.load(session.dialect)
    assert migration_files(session.dialect), "an engine's folder holds its migrations"


def test_run_binds_parameters_and_returns_rows_as_dicts(session, probe) -> None:
    rows = session.run(f"SELECT id, note FROM {probe} WHERE id = :id", id=2)
    assert rows == [{"id": 2, "note": "two"}]
    assert session.run(f"SELECT id FROM {probe} WHERE note = :note", note="none") == []
    session.run(f"UPDATE {probe} SET note = :note WHERE id >= :first", note="many", first=1)
    assert session.last_row_count == 2
    with pytest.raises(DatabaseError) as refused:
        session.run(f"INSERT INTO {probe} (id, note) VALUES (:id, :note)", id=1, note="again")
    assert refused.value.invalid_input, "a broken unique key is the data's fault, and says so"
    with pytest.raises(SchemaMissing):
        session.run("SELECT id FROM contract_no_such_table")


def test_run_script_runs_several_statements_in_one_round_trip(session, probe) -> None:
    before = session.statements
    assert session.run_script(f"UPDATE {probe} SET note = 'a' WHERE id = 1;\n"
                              f"UPDATE {probe} SET note = 'b' WHERE id = 2") is None
    assert session.statements == before + 1
    assert [r["note"] for r in session.run(f"SELECT note FROM {probe} ORDER BY id")] == ["a", "b"]


def test_a_transaction_commits_what_it_did(session, settings, probe) -> None:
    with session.transaction() as inside:
        assert inside is session
        session.run(f"UPDATE {probe} SET note = :note WHERE id = 1", note="committed")
    with open_database(settings) as other:
        assert other.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "committed"}]


def test_a_transactions_opening_statement_runs_inside_it_in_begins_round_trip(session, settings, probe) -> None:
    """``transaction(opening=…)``: a statement without parameters (the caps lock) sent with BEGIN, one round trip
    where the engine can (PostgreSQL); it is part of the transaction either way, undone with it."""
    before = session.statements
    with pytest.raises(ZeroDivisionError), \
            session.transaction(opening=f"UPDATE {probe} SET note = 'opened' WHERE id = 1"):
        assert session.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "opened"}]
        with open_database(settings) as other:  # not committed yet
            assert other.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "one"}]
        _ = 1 / 0
    assert session.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "one"}]
    if session.dialect == "postgresql":  # BEGIN and the opening together, the SELECT, ROLLBACK, the SELECT
        assert session.statements - before <= 4, session.statements - before
    # An opening that fails (the caps lock's wait running out, say) leaves no transaction open behind it.
    with pytest.raises(DispatchError), session.transaction(opening="SELECT id FROM contract_no_such_table"):
        pass
    assert session.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "one"}]
    with session.transaction():
        pass


def test_a_transaction_rolls_back_on_error_and_refuses_nesting(session, probe) -> None:
    assert session.in_transaction is False
    with pytest.raises(ZeroDivisionError), session.transaction():
        assert session.in_transaction is True
        session.run(f"UPDATE {probe} SET note = :note WHERE id = 1", note="undone")
        _ = 1 / 0
    assert session.in_transaction is False
    assert session.run(f"SELECT note FROM {probe} WHERE id = 1") == [{"note": "one"}]
    with pytest.raises(RuntimeError, match="nested"), session.transaction(), session.transaction():
        pass
    assert session.run(f"SELECT count(*) AS n FROM {probe}")[0]["n"] == 2  # still usable


def test_the_session_opens_lazily_and_reopens_after_close(settings) -> None:
    session = open_database(settings)
    assert session.connects == 0, "nothing is opened before the first use"
    first = session.connection()
    assert session.connection() is first and session.connects == 1
    session.close()
    session.close()  # closing twice is harmless
    assert session.run("SELECT 1 AS one") == [{"one": 1}]
    assert session.connects == 2
    with session as same:
        assert same is session
    assert session.connection() is not first and session.connects == 3  # the with block closed it


def test_waiting_seconds_grows_while_a_statement_waits(session, settings, probe) -> None:
    assert session.waiting_seconds() == 0.0
    with open_database(settings) as holder, holder.transaction():
        holder.run(f"SELECT note FROM {probe} WHERE id = 1 FOR UPDATE")
        blocked = threading.Thread(target=session.run, args=(f"UPDATE {probe} SET note = 'x' WHERE id = 1",))
        blocked.start()
        assert wait_for(lambda: session.waiting_seconds() > 0.2, timeout=4), "the blocked UPDATE shows its wait"
    blocked.join(10)
    assert not blocked.is_alive() and session.waiting_seconds() == 0.0


def test_a_locking_block_reads_what_committed_while_it_waited_on_its_lock(session, settings, probe) -> None:
    """What the one-round-trip capped claim relies on: a block that locks, then reads, reads what the lock's
    holder committed, not what was there when the block was sent."""
    if not session.locking_blocks:
        pytest.skip("no locking blocks here: the capped claim takes lock_caps in a statement of its own")
    answers: list = []
    with open_database(settings) as holder:
        with holder.transaction():
            holder.run(f"SELECT note FROM {probe} WHERE id = 1 FOR UPDATE")
            block = threading.Thread(target=lambda: answers.append(session.run(
                f"SELECT note FROM {probe} WHERE id = 1 FOR UPDATE;\nSELECT note FROM {probe} WHERE id = 2")))
            block.start()
            assert wait_for(lambda: session.waiting_seconds() > 0.2, timeout=4), "the block waits on the lock"
            holder.run(f"UPDATE {probe} SET note = 'changed' WHERE id = 2")
        block.join(10)
    assert not block.is_alive() and answers == [[{"note": "changed"}]]


def test_listen_delivers_notifications_where_supported_and_refuses_elsewhere(session, settings, db) -> None:
    if not session.supports_listen:
        with pytest.raises(NotImplementedError):
            session.listen(CHANNEL)
        with pytest.raises(NotImplementedError):
            session.wait_for_notifications(0)
        return
    session.listen(CHANNEL)
    assert session.wait_for_notifications(0) == []
    with open_database(settings) as other:
        Queue(other).enqueue("contract/heard")
        assert _heard(session), "a LISTENing session hears the schema's notification of a new job"
        session.close()  # a new session LISTENs again by itself
        assert session.wait_for_notifications(0) == [] and session.connects == 2
        Queue(other).enqueue("contract/heard-again")
        assert _heard(session)


def _heard(session: Session, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if session.wait_for_notifications(0.2):
            return True
    return False


def test_transactional_ddl_tells_whether_a_rollback_undoes_ddl(session) -> None:
    session.run_script(f"DROP TABLE IF EXISTS {DDL_PROBE}")
    try:
        with pytest.raises(ZeroDivisionError), session.transaction():
            session.run(f"CREATE TABLE {DDL_PROBE} (id INTEGER PRIMARY KEY)")
            _ = 1 / 0
        try:
            session.run(f"SELECT count(*) AS n FROM {DDL_PROBE}")
            kept = True
        except DispatchError:
            kept = False
        assert kept is not session.transactional_ddl
    finally:
        session.run_script(f"DROP TABLE IF EXISTS {DDL_PROBE}")


def test_the_server_says_who_it_is(session) -> None:
    version = session.server_version()
    assert version and version == session.server_version()
    label = session.server_label(version)
    number = label.split()[-1]
    assert number[0].isdigit() and number in version, label
    assert session.engine_name in label or label.split()[0] in version, label  # MariaDB says so in its version
    assert session.unsupported_server() is None, "the test servers hold the queue"


def test_long_transaction_help_names_the_tools(session) -> None:
    tools = session.long_transaction_help
    assert isinstance(tools, TransactionHelp)
    assert "{pid}" in tools.end_it and tools.end_it.format(pid=42).count("42") == 1
    assert tools.holds_back and tools.listed_in and tools.grant
