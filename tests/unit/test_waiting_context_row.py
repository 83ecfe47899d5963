"""The ``waiting_context`` statement's one row as a ``WaitingContext`` (store/reports.py): pure, from a table of
rows as either engine returns them (JSON decoded by the driver on PostgreSQL, some of it text on MySQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.store.queue import Pause, RateWindow
from jenkins_dispatch.store.reports import _waiting_context_of

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EMPTY = {"jobs": None, "jenkins": None, "pauses": None, "controllers_in_flight": None, "total_in_flight": 0,
         "live_dispatchers": 0, "dispatchers": None}


def _row(**fields):
    return dict(EMPTY, **fields)


@pytest.mark.parametrize(("row", "expected"), [
    (_row(), {"caps": {}, "in_flight": {}, "rates": {}, "pauses": [], "controller_pauses": [], "dispatchers": [],
              "controllers_in_flight": {}, "jenkins_unavailable_since": None, "live_dispatchers": 0}),
    (_row(jobs=[{"controller": "default", "job_name": "a", "cap": 2, "in_flight": 1},
                {"controller": "eu", "job_name": "a", "cap": None, "in_flight": "3", "rate": 5, "started": "4",
                 "next_start_seconds": "7.5"}]),
     {"caps": {("default", "a"): 2}, "in_flight": {("default", "a"): 1, ("eu", "a"): 3},
      "rates": {("eu", "a"): RateWindow(per_minute=5, started=4, next_start_seconds=7.5)}}),
    (_row(jobs=[{"controller": "default", "job_name": "Deploy", "cap": None, "in_flight": 0, "paused_as": "deploy",
                 "paused_on": {"eu": "DEPLOY"}}]),
     {"paused_as": {"Deploy": "deploy"}, "paused_on": {"Deploy": {"eu": "DEPLOY"}}}),
    (_row(pauses=[{"job_name": "*", "paused_at": AT.isoformat(), "paused_by": "ops", "reason": None},
                  {"job_name": "b", "paused_at": AT, "paused_by": None, "reason": "r", "controller": "eu"}]),
     {"pauses": [Pause(None, AT, "ops")], "controller_pauses": [Pause("b", AT, None, "r", "eu")]}),
    (_row(dispatchers=[{"id": "old", "last_pass_seconds": "9.0", "controllers": '{"default": {"status": "ok"}}'},
                       {"id": "new", "last_pass_seconds": 1.5, "controllers": {"eu": {"status": "down"}}}],
          live_dispatchers="2", controllers_in_flight={"eu": "4"}, total_in_flight=4,
          jenkins={"since": AT.isoformat(), "reason": "503"}),
     {"dispatchers": [{"id": "new", "last_pass_seconds": 1.5, "controllers": {"eu": {"status": "down"}}},
                      {"id": "old", "last_pass_seconds": "9.0", "controllers": {"default": {"status": "ok"}}}],
      "live_dispatchers": 2, "controllers_in_flight": {"eu": 4}, "total_in_flight": 4,
      "jenkins_unavailable_since": AT, "jenkins_reason": "503"}),
])
def test_the_statement_row_becomes_the_context(row, expected) -> None:
    context = _waiting_context_of(row)
    assert {name: getattr(context, name) for name in expected} == expected
