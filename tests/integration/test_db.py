"""db.Database against the real server: verified TLS never falls back to plaintext."""

from __future__ import annotations

import pytest

from jenkins_dispatch.config import DatabaseSettings
from jenkins_dispatch.errors import DatabaseUnavailable
from jenkins_dispatch.store.db import Database

from ..unit.test_db import _certificates


def test_verified_tls_never_falls_back_to_plaintext(database_url, tmp_path):
    """The test server offers no certificate we trust (or no TLS at all): the connection must fail."""
    from jenkins_dispatch.config import parse_database_url

    ca_file, _, _ = _certificates(tmp_path)
    plain = parse_database_url(database_url)
    if plain.unix_socket:
        pytest.skip("the test database is reached over a Unix socket")
    settings = DatabaseSettings(
        host=plain.host, port=plain.port, user=plain.user, password=plain.password, dbname=plain.dbname,
        tls="verify", ca_bundle=str(ca_file), connect_timeout_seconds=3,
    )
    with pytest.raises(DatabaseUnavailable) as info, Database(settings) as db:
        db.run("SELECT 1")
    assert f"{plain.host}:{plain.port}" in str(info.value)


@pytest.mark.both_engines
def test_a_statement_in_progress_shows_how_long_it_has_waited(database_url):
    """/healthz reads this from another thread while the dispatcher's statement waits (issue 21 #3): it grows while
    the answer is due and drops to 0 once it came, on both drivers."""
    import threading

    from jenkins_dispatch.config import parse_database_url

    from ..dispatch_helpers import wait_for
    from ..engines import sql_for

    with Database(parse_database_url(database_url)) as db:
        db.run("SELECT 1")
        assert db.waiting_seconds() == 0.0
        sleeper = threading.Thread(target=db.run, args=(sql_for(db, postgresql="SELECT pg_sleep(1.5)",
                                                                  mysql="SELECT SLEEP(1.5)"),))
        sleeper.start()
        try:
            assert wait_for(lambda: db.waiting_seconds() > 0.5, timeout=5, interval=0.05)
        finally:
            sleeper.join(10)
        assert db.waiting_seconds() == 0.0


def _first_words_to_a_fake_server(settings_for_port, greeting: bytes, read: int) -> bytes:
    """Connect a session (``settings_for_port(port)``) to a listening socket that sends ``greeting`` (nothing when
    empty), records the first ``read`` bytes the driver sends, and hangs up: what the driver asked for first."""
    import socket
    import threading

    heard = bytearray()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def answer() -> None:
            client, _ = listener.accept()
            with client:
                client.settimeout(5)
                if greeting:
                    client.sendall(greeting)
                while len(heard) < read:
                    chunk = client.recv(read - len(heard))
                    if not chunk:
                        break
                    heard.extend(chunk)

        server = threading.Thread(target=answer)
        server.start()
        with pytest.raises(DatabaseUnavailable), Database(settings_for_port(listener.getsockname()[1])) as db:
            db.run("SELECT 1")
        server.join(10)
    return bytes(heard)


def test_plain_tcp_to_postgresql_never_asks_for_tls():
    """``sslmode=disable`` (or none, on a local host) is plain TCP: the session's first message is the startup
    message, not an SSLRequest. (pg8000 left to itself asks for TLS it does not verify, and loads the system's
    CA certificates for it on every connect.)"""
    from jenkins_dispatch.config import parse_database_url

    heard = _first_words_to_a_fake_server(
        lambda port: parse_database_url(f"postgresql://postgres@127.0.0.1:{port}/jd?sslmode=disable"), b"", 8)
    ssl_request = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
    protocol_3 = (196608).to_bytes(4, "big")
    assert heard != ssl_request
    assert heard[4:8] == protocol_3, heard


def _mysql_greeting(capabilities: int) -> bytes:
    """A MySQL server's first packet (HandshakeV10) that offers ``capabilities``."""
    payload = (b"\x0a" + b"8.0.36-fake\x00" + (7).to_bytes(4, "little") + b"abcdefgh" + b"\x00"
               + (capabilities & 0xFFFF).to_bytes(2, "little") + b"\x2d" + (2).to_bytes(2, "little")
               + (capabilities >> 16).to_bytes(2, "little") + bytes([21]) + bytes(10) + b"ijklmnopqrst\x00"
               + b"mysql_native_password\x00")
    return len(payload).to_bytes(3, "little") + b"\x00" + payload


def test_plain_tcp_to_mysql_never_asks_for_tls():
    """``ssl-mode=DISABLED`` (or none, on a local host) is plain TCP, even when the server offers TLS: the
    session's answer to the greeting does not ask for it. (PyMySQL left to itself prefers TLS it does not verify.)"""
    from jenkins_dispatch.config import parse_database_url

    client_ssl, protocol_41, secure, plugin_auth, with_db = 0x800, 0x200, 0x8000, 0x80000, 0x8
    heard = _first_words_to_a_fake_server(
        lambda port: parse_database_url(f"mysql://root@127.0.0.1:{port}/jd?ssl-mode=DISABLED"),
        _mysql_greeting(client_ssl | protocol_41 | secure | plugin_auth | with_db), 8)
    asked = int.from_bytes(heard[4:8], "little")
    assert asked & protocol_41, heard  # a handshake response, read right
    assert not asked & client_ssl, hex(asked)


@pytest.mark.both_engines
def test_closing_the_pool_leaves_a_borrowed_session_to_its_borrower(database_url):
    """`serve` closes the webhook's pool on shutdown while callbacks may still run: a session another thread holds
    is closed when that thread gives it back, never under it (neither driver is thread-safe: the borrower's
    connection was closed mid-use and, here, silently reopened). Idle sessions close at once."""
    import threading

    from jenkins_dispatch.config import parse_database_url
    from jenkins_dispatch.store.db import SessionPool

    pool = SessionPool(parse_database_url(database_url), 2)
    borrowed, closed, done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def borrower() -> None:
        with pool.session() as db:
            db.run("SELECT 1")
            seen["held"] = db
            borrowed.set()
            closed.wait(10)
            db.run("SELECT 1")  # still its session: nobody closed it underneath
            seen["connects"] = db.connects
        done.set()

    thread = threading.Thread(target=borrower)
    thread.start()
    assert borrowed.wait(10)
    pool.close()
    closed.set()
    thread.join(10)
    assert done.is_set() and seen["connects"] == 1, seen
    assert all(db._conn is None for db in pool._all)  # each closed: the idle at once, the borrowed on its return
