"""Each engine's server policy (store/dialects/<engine>/server.py): which servers `migrate` accepts and how the
doctor names them, decided from the version string alone. Pure: no database."""

import pytest

from jenkins_dispatch.store.dialects.mysql import server as mysql_server
from jenkins_dispatch.store.dialects.mysql.server import unsupported_server
from jenkins_dispatch.store.dialects.postgresql import server as postgresql_server

TOO_OLD = "is too old for jenkins-dispatch"


@pytest.mark.parametrize(("version", "refused"), [
    ("5.7.44-log", "MySQL 5.7.44 " + TOO_OLD + " (it has no SKIP LOCKED"),
    ("8.0.36", None),
    ("8.4.0", None),
    ("9.1.0", None),
    # Expression defaults and enforced CHECK constraints came with 8.0.13 and 8.0.16.
    ("8.0.15", "MySQL 8.0.15 " + TOO_OLD + " (it parses CHECK constraints without enforcing them)"),
    ("8.0.16", None),
    ("10.5.22-MariaDB", "MariaDB 10.5.22 " + TOO_OLD + " (it has no SKIP LOCKED"),
    ("10.6.16-MariaDB-1:10.6.16+maria~ubu2004", None),
    ("10.11.19-MariaDB-0+deb12u1", None),
    ("11.4.2-MariaDB", None),
    # What older MariaDB servers put in the handshake, in front of their real version.
    ("5.5.5-10.4.34-MariaDB", "MariaDB 10.4.34 " + TOO_OLD),
    ("5.5.5-10.6.1-MariaDB-log", None),
    ("not a version", "cannot read the server's version 'not a version'"),
])
def test_servers_without_skip_locked_are_refused_in_one_line(version, refused):
    why = unsupported_server(version)
    if refused is None:
        assert why is None
    else:
        assert why is not None and why.startswith(refused) and "\n" not in why
        assert "upgrade to" in why or "needs" in why


@pytest.mark.parametrize(("label_of", "version", "label"), [
    (postgresql_server.label, "16.4 (Debian 16.4-1.pgdg120+1)", "PostgreSQL 16.4"),
    (mysql_server.label, "8.0.36", "MySQL 8.0.36"),
    (mysql_server.label, "10.11.19-MariaDB-0+deb12u1", "MariaDB 10.11.19"),
    (mysql_server.label, "5.5.5-10.11.19-MariaDB-0+deb12u1", "MariaDB 10.11.19"),  # the handshake's form
    (mysql_server.label, "8.0.28-log", "MySQL 8.0.28"),
])
def test_the_server_is_named_by_its_version_string(label_of, version, label) -> None:
    assert label_of(version) == label
