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
