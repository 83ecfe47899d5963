"""What this package asks of a PostgreSQL server, and how it names one. Pure: no database.

Every PostgreSQL release still supported upstream has what the statements use (SKIP LOCKED since 9.5,
data-modifying CTEs, LISTEN/NOTIFY), so no version is refused.
"""

from __future__ import annotations

from ...session import TransactionHelp

# A long transaction holds back vacuum; its session is listed with the others' only for pg_read_all_stats.
TRANSACTION_HELP = TransactionHelp(holds_back="vacuum", listed_in="pg_stat_activity",
                                   end_it="SELECT pg_terminate_backend({pid})", grant="pg_read_all_stats")


def label(version: str) -> str:
    """``PostgreSQL 16.4``: the server as its version string (``16.4 (Debian 16.4-1.pgdg120+1)``) names it."""
    number = version.split()[0].split("-")[0] if version.strip() else "?"
    return f"PostgreSQL {number}"


def unsupported_server(version: str) -> str | None:
    """Why a server reporting ``version`` cannot hold the queue; never, on PostgreSQL (see above)."""
    return None
