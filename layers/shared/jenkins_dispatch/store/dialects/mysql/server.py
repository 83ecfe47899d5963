"""Which MySQL and MariaDB servers can hold the queue, and how to tell them apart: decided from ``VERSION()``
alone, here and nowhere else. Pure: no database.
"""

from __future__ import annotations

import re

from ...session import TransactionHelp

# The oldest servers with everything the MySQL statements use: SKIP LOCKED (MySQL 8.0.1, MariaDB 10.6),
# JSON_TABLE (8.0.4, 10.6), expression defaults (8.0.13) and CHECK constraints that are enforced rather than
# parsed and ignored (8.0.16).
MYSQL_MINIMUM = (8, 0, 16)
MARIADB_MINIMUM = (10, 6, 0)
_VERSION = re.compile(r"^(?:5\.5\.5-)?(\d+)\.(\d+)\.(\d+)")

# A long transaction keeps InnoDB's purge from removing old row versions; its session is listed with the
# others' only for an account with PROCESS.
TRANSACTION_HELP = TransactionHelp(holds_back="InnoDB's purge", listed_in="information_schema.innodb_trx",
                                   end_it="KILL {pid}", grant="PROCESS")


def is_mariadb(version: str) -> bool:
    """Whether a server reporting ``VERSION()`` = ``version`` is MariaDB (else MySQL): MariaDB says so in it."""
    return "mariadb" in version.lower()


def product(version: str) -> str:
    """``MariaDB`` or ``MySQL``, as the server's version string tells."""
    return "MariaDB" if is_mariadb(version) else "MySQL"


def label(version: str) -> str:
    """``MySQL 8.0.36``, ``MariaDB 10.11.19``: the server as its version string names it (``VERSION()``, or the
    handshake's ``5.5.5-10.11.19-MariaDB``)."""
    found = _VERSION.match(version.strip())
    number = ".".join(found.groups()) if found else (version.split()[0].split("-")[0] if version.strip() else "?")
    return f"{product(version)} {number}"


def unsupported_server(version: str) -> str | None:
    """Why a server reporting ``VERSION()`` = ``version`` cannot hold the queue, in one line; None if it can.

    Also reads the handshake's form of MariaDB before 11, which puts "5.5.5-" in front of the real version.
    """
    found = _VERSION.match(version.strip())
    name = product(version)
    minimum = MARIADB_MINIMUM if is_mariadb(version) else MYSQL_MINIMUM
    wanted = ".".join(map(str, minimum))
    if not found:
        return f"cannot read the server's version {version!r}: jenkins-dispatch needs {name} {wanted} or later"
    number = tuple(int(part) for part in found.groups())
    if number >= minimum:
        return None
    shown = ".".join(found.groups())
    if number[:2] < minimum[:2]:  # a whole series short: the one feature a queue cannot do without
        why = "it has no SKIP LOCKED, which concurrent claims rely on"
    else:
        why = "it parses CHECK constraints without enforcing them"
    return f"{name} {shown} is too old for jenkins-dispatch ({why}): upgrade to {name} {wanted} or later"
