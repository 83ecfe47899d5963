"""`serve`'s /healthz while the path to the database is frozen — no reset, no bytes, as a hung middlebox or a paused
VM leaves it: it turns 503 within seconds, and 200 again after the thaw, without ever touching the database itself.

Issue 21 #3, measured on the code before: 28 s of "200 ok, database ok" while no pass could finish (Health was
updated only when a pass ended, and the frozen statement waited for the socket's own timeout, 25 s).

serve runs in a subprocess whose DATABASE_URL points at a TCP proxy (tests/tcp_proxy.py) that the test freezes and
thaws; the test enqueues on its own direct session, and the emulator's Notification plugin calls serve's webhook.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from ..dispatch_helpers import wait_for
from ..engines import sql_for
from ..serve_helpers import http_get, serve_env, start_serve
from ..tcp_proxy import TcpProxy
from .test_serve_database_outage import _through, _upstream

pytestmark = pytest.mark.both_engines

STALL = 2  # DB_STALL_SECONDS: a statement waiting longer means the database stopped answering
SHOWS_WITHIN = 12  # seconds from the freeze: a pass within --interval 1, then STALL, then slack for a loaded machine
FROZEN_FOR = 10  # under the server's idle-in-transaction timeout (30 s): a session frozen mid-transaction survives
JOB = "deploy"


def _insert(db, count: int) -> list[int]:
    markers = [uuid.uuid4().hex for _ in range(count)]
    value = sql_for(db, postgresql="(:job, CAST(:p{n} AS jsonb))", mysql="(:job, :p{n})")
    db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES "
           + ", ".join(value.format(n=n) for n in range(count)), job=JOB,
           **{f"p{n}": json.dumps({"ENV": marker}) for n, marker in enumerate(markers)})
    marker_of = sql_for(db, postgresql="parameters->>'ENV'", mysql="JSON_VALUE(parameters, '$.ENV')")
    return [r["id"] for r in db.run(f"SELECT id, {marker_of} AS marker FROM jenkins_jobs_queue")
            if r["marker"] in markers]


def _rows(db, ids: list[int]) -> list[dict]:
    return db.run("SELECT id, status, jenkins_result, dispatch_id FROM jenkins_jobs_queue WHERE id IN ("
                  + ", ".join(str(i) for i in ids) + ")")


def _timed_health(base: str) -> tuple[float, tuple[int, dict] | None]:
    started = time.monotonic()
    answer = http_get(base + "/healthz", timeout=5)
    return time.monotonic() - started, answer


def test_healthz_turns_503_within_seconds_of_a_frozen_database_and_back_after(jenkins, database_url, db, tmp_path):
    with TcpProxy(_upstream(database_url)) as proxy:
        env = serve_env(_through(proxy, database_url), jenkins.base_url, DB_STALL_SECONDS=str(STALL),
                        DB_CONNECT_TIMEOUT_SECONDS="2", LEASE_SECONDS="6", JENKINS_TIMEOUT_SECONDS="2")
        served = start_serve(env, tmp_path / "serve.log", "--interval", "1")
        try:
            jenkins.configure(notification={"url": served.notify_url})
            before = _insert(db, 4)
            assert wait_for(lambda: all(r["status"] == "completed" for r in _rows(db, before)), timeout=20), \
                _rows(db, before)

            proxy.freeze()
            frozen_at = time.monotonic()
            during = _insert(db, 4)  # work arrives while the path is frozen
            seen: list[tuple[float, float, int | None]] = []  # (since the freeze, answer time, status)

            def unavailable() -> bool:
                took, answer = _timed_health(served.base)
                seen.append((time.monotonic() - frozen_at, took, answer[0] if answer else None))
                return answer is not None and answer[0] == 503

            assert wait_for(unavailable, timeout=SHOWS_WITHIN, interval=0.2), (seen, served.log()[-2000:])
            status, doc = served.health()
            assert status == 503 and doc["status"] == "unavailable", doc
            assert doc["database"]["status"] == "unavailable" and "waited" in doc["database"]["reason"], doc
            # It stays so while frozen, and /healthz itself never waits on the database.
            while time.monotonic() - frozen_at < FROZEN_FOR:
                took, answer = _timed_health(served.base)
                seen.append((time.monotonic() - frozen_at, took, answer[0] if answer else None))
                time.sleep(0.3)
            after_503 = [s for s in seen if s[2] == 503]
            assert after_503 and all(s[2] == 503 for s in seen if s[0] >= after_503[0][0]), seen
            # Each answered within its 5 s while the path stayed frozen (the thaw comes after the last): one that
            # waited on the database would have waited for the thaw.
            assert all(status is not None for _, _, status in seen), seen

            proxy.thaw()
            assert wait_for(lambda: (served.health() or (0, {}))[0] == 200, timeout=20), served.health()
            assert served.health()[1]["database"]["status"] == "ok"
            everything = before + during
            assert wait_for(lambda: all(r["status"] == "completed" for r in _rows(db, everything)), timeout=30), \
                _rows(db, everything)
            assert all(jenkins.triggers_for(r["dispatch_id"]) == 1 for r in _rows(db, everything))
            assert served.alive(), served.log()[-3000:]
            assert served.stop() == 0
        finally:
            served.stop()
