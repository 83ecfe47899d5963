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
