"""Schedule ticks on both engines: 1,000 schedules due in the same minute — how long until every tick is a row,
and how many statements each tick costs, with one dispatcher and with three racing for the same ticks.

Every schedule is made due at once (its next tick set to the current minute, as if the minute had just turned);
then one (or three, each on its own session and thread, released together) dispatcher step enqueues the due
ticks (dispatching/ticking.py, the first step of every pass). Checked: exactly 1,000 rows, one per schedule.
statements_per_tick counts every round trip of every racer (the reads of the due schedules included), divided by
the 1,000 ticks.

Run with `make bench` (all benchmarks), `python -m benchmarks bench_schedules`.
"""

from __future__ import annotations

import threading
import time

from benchmarks.engines import empty, scratch_databases, server_name
from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.dispatching.ticking import enqueue_due_ticks
from jenkins_dispatch.operating.scheduling import add_schedule
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.schedules import Schedules

SCHEDULES = 1_000
RACERS = (1, 3)


def _make_all_due(db: Database) -> None:
    db.run("UPDATE jenkins_job_schedules SET next_tick = :tick", tick=Schedules(db).now().replace(second=0,
                                                                                                 microsecond=0))


def _one(url: str, racers: int) -> dict:
    with Database(parse_database_url(url), application_name="jd-bench") as db:
        empty(db)
        db.run("DELETE FROM jenkins_job_schedules")
        schedules = Schedules(db)
        for n in range(SCHEDULES):
            add_schedule(schedules, f"s{n:04d}", f"job{n % 50}", cron="0 0 1 1 *")  # yearly: only we make it due
        _make_all_due(db)
        engine = server_name(db)
        sessions = [Database(parse_database_url(url), application_name=f"jd-bench-{i}") for i in range(racers)]
        try:
            for s in sessions:
                s.connection()
            before = [s.statements for s in sessions]
            start = threading.Barrier(racers)
            results: list = [None] * racers

            def run(i: int) -> None:
                start.wait()
                results[i] = enqueue_due_ticks(Schedules(sessions[i]))

            threads = [threading.Thread(target=run, args=(i,)) for i in range(racers)]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took = time.perf_counter() - started
            statements = sum(s.statements - b for s, b in zip(sessions, before, strict=True))
        finally:
            for s in sessions:
                s.close()
        rows = db.run("SELECT count(*) AS n FROM jenkins_jobs_queue")[0]["n"]
        distinct = len({s["last_job_id"] for s in schedules.listed()})
        assert rows == SCHEDULES == distinct, (rows, distinct)
        return {"engine": engine, "dispatchers": racers, "schedules_due": SCHEDULES,
                "all_enqueued_s": round(took, 3), "ticks_per_s": round(SCHEDULES / took),
                "statements_per_tick": round(statements / SCHEDULES, 3),
                "taken_elsewhere": sum(r.taken_elsewhere for r in results)}


def run() -> dict[str, list[dict]]:
    """The ticks table, one row per engine and number of dispatchers."""
    rows = []
    with scratch_databases() as (urls, missing):
        for url in urls.values():
            for racers in RACERS:
                rows.append(_one(url, racers))
        rows += [{"engine": engine, "dispatchers": f"skipped: {why}"} for engine, why in missing.items()]
    return {f"schedule ticks: {SCHEDULES:,} schedules due in the same minute": rows}


if __name__ == "__main__":
    from benchmarks.report import print_table

    for title, table in run().items():
        print_table(title, table)
