"""The one way a store runs its engine's statements: by name (``statements.py`` loads them from
``dialects/<engine>/queries/``), with the retries of a deadlock victim and of an insert race's loser, the data's
refusals said in words, and the conversions of what rows hold (parameters, moments, durations).

Every store is a ``Store``: the dispatcher's (``dispatcher.py``), the webhook's (``webhook.py``), what both share
(``outcomes.py``), pruning (``pruning.py``), the levers (``levers.py``), the reports (``reports.py``), doctor's (``introspection.py``), the
producers' (``producers.py``) and the schedules' (``schedules.py``). Nothing but a store imports this module. A
store never writes SQL; its callers never see SQL nor learn which database they speak to.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from ..errors import DatabaseBusy, InvalidInput
from ..jenkins.jobs import loads_parameters
from ..moments import from_iso
from . import statements
from .db import DatabaseError, Row, Session
from .queue import SCHEDULED_AT_LATEST, STATUSES

VICTIM_ATTEMPTS = 3  # a block a deadlock victim's rollback undid, outside a caller's transaction, is run again
VICTIM_PAUSE_SECONDS = 0.05


def pause_before_rerun(victims: int) -> float:
    """Seconds a deadlock victim waits before its block runs again, the ``victims``-th time it was picked: time
    for the session the server broke the deadlock for to take the locks it was waiting for. Run again at once,
    the block can take them first (a woken PostgreSQL waiter checks the row again before locking it) and close
    the same cycle again: beside four CPU burners, 5 settles in 475 were picked twice without the pause (0 in
    406 with it), and a settle picked three times in a row failed in a run of the suite."""
    return VICTIM_PAUSE_SECONDS * victims


class Store:
    """Statements of one database session's engine, run by name. Each method of a store is one round trip
    unless it says so."""

    def __init__(self, db: Session):
        self.db = db
        self._statements = statements.load(db.dialect)

    def _run(self, name: str, /, **params: Any) -> list[Row]:
        victims, raced = 0, False
        while True:
            try:
                return self.db.run(self._statements[name], **params)
            except DatabaseBusy as exc:
                # A deadlock victim was rolled back whole, at once: outside a caller's transaction, running the
                # block again is its first run (every transition is fenced), where failing it would fail a whole
                # batch and leave its rows processing until their leases run out (seen: two lanes' writes).
                victims += 1
                if not exc.victim or self.db.in_transaction or victims == VICTIM_ATTEMPTS:
                    raise
                time.sleep(pause_before_rerun(victims))
            except DatabaseError as exc:
                # The loser of an insert race: two sessions creating the same cap or schedule both found no row,
                # and a unique key refused the second insert once the first committed (on PostgreSQL any unique
                # index but the one an ON CONFLICT names does so; MySQL's INSERT … WHERE NOT EXISTS as well). The
                # refusal undid the whole block; run again, it meets the committed row and answers "already so"
                # as it would have a moment later. A true duplicate is refused again, one round trip later.
                if exc.duplicate_key and not self.db.in_transaction and not raced:
                    raced = True
                    continue
                if exc.invalid_input:
                    raise InvalidInput(self._refusal(exc)) from None
                raise

    def _refusal(self, exc: DatabaseError) -> str:
        """What the caller is told when the data's rules refuse a statement's input (a store may say it its way)."""
        return constraint_message(exc)


def seconds_of(value: Any) -> float | None:
    """A duration the database computed (a Decimal on PostgreSQL), or None when it is unknown or negative (clocks)."""
    return None if value is None or value < 0 else float(value)


def moment_of(value: str | datetime | None) -> datetime | None:
    """A timestamp read back from JSON (ISO text) or as itself."""
    return from_iso(value) if isinstance(value, str) else value


def parameters_of(value: Any) -> dict:
    """A row's parameters: as text (``parameters::text``, what the statements feeding triggers return) they are
    parsed with every number kept as its JSON text (``loads_parameters``); a jsonb value the driver already
    decoded (numbers as floats: fine for display only) is taken as it is."""
    if isinstance(value, str):
        value = loads_parameters(value)
    return value


def constraint_message(exc: DatabaseError) -> str:
    """The rule the data broke, in words (the server's own message for a rule not named here)."""
    constraint = exc.constraint or ""
    readable = {
        "jenkins_jobs_queue_status_check": "status must be one of " + ", ".join(STATUSES),
        "jenkins_jobs_queue_job_name_check": "job name must not be empty (and at most 1024 characters)",
        "jenkins_jobs_queue_parameters_check": "parameters must be a JSON object",
        "jenkins_jobs_queue_max_attempts_check": "max attempts must be at least 1",
        "jenkins_jobs_queue_attempts_check": "attempts must not be negative",
        "jenkins_job_limits_max_in_flight_check": "a cap must be 0 or more",
        "jenkins_job_limits_job_name_check": "job name must not be empty",
        "jenkins_job_limits_per_minute_check": "a rate must be 1 or more starts per minute",
        "jenkins_jobs_queue_dedupe_key": "another unfinished job has the same dedupe key",
        "jenkins_job_pauses_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_job_limits_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_jobs_queue_controller_check": ("a controller name is lower-case letters, digits, '_' and '-', "
                                                "starting with a letter or digit"),
        "jenkins_jobs_queue_scheduled_at_check": "scheduled_at must be a real time, not infinity (nor a zero date)",
        "jenkins_jobs_queue_scheduled_at_at_most_9999_12_31": (
            f"scheduled_at must be at most {SCHEDULED_AT_LATEST:%Y-%m-%d %H:%M} UTC (no reader can show a later time; "
            "that moment itself means never)"),
    }
    return readable.get(constraint, str(exc))


def named(argument: str, error: str | None) -> str | None:
    """An ``inputs`` refusal naming the argument it is about."""
    return None if error is None else f"{argument}: {error}"


def refuse(*errors: str | None) -> None:
    """InvalidInput with the first of ``errors`` (None: no error), before anything is stored."""
    if first := next((e for e in errors if e is not None), None):
        raise InvalidInput(first)
