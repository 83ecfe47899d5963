"""Doctor's store: what ``doctor`` asks the database about itself. Who the session is on which server, the
migrations applied, the oldest open transaction, the job names with unfinished rows, and the cutover window
(``introspection.sql``).
"""

from __future__ import annotations

from typing import cast

from .rows import CutoverWindow, OldestTransaction, ServerIdentity, WaitingJobName
from .runner import Store


class Introspection(Store):
    """The database's own state as ``doctor`` checks it, on one database session."""

    def server_identity(self) -> ServerIdentity:
        """The session's user, database and the server's version."""
        return cast(ServerIdentity, self._run("server_identity")[0])

    def applied_migrations(self) -> dict[int, str]:
        """Version → name of each migration `migrate` applied; raises SchemaMissing before the first."""
        return {r["version"]: r["name"] for r in self._run("applied_migrations")}

    def oldest_transaction(self) -> OldestTransaction:
        """pid, user_name, application_name, state and age (``seconds``) of the oldest transaction open in this
        database besides ours (all None when none is), and ``hidden_sessions``: sessions we may not see into."""
        return cast(OldestTransaction, self._run("oldest_transaction")[0])

    def waiting_job_names(self, limit: int) -> list[WaitingJobName]:
        """Up to ``limit`` job names of pending or processing rows, most rows first: job_name, waiting (rows),
        job_names (how many distinct names in all)."""
        return cast(list[WaitingJobName], self._run("waiting_job_names", limit=limit))

    def cutover_window(self) -> CutoverWindow | None:
        """The window in which the results of the worker that ran before jenkins-dispatch still count for the jobs
        it held at the upgrade: upgraded_at, window_seconds, window_ends_at, seconds_left (negative once closed)
        and ``held`` (its jobs still processing); None when the table was never upgraded while it held jobs."""
        rows = cast(list[CutoverWindow], self._run("cutover_window"))
        return rows[0] if rows else None
