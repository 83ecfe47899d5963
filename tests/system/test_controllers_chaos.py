"""Issue 23's chaos run: two Jenkins controllers, one of them down for a while, three `serve` processes racing.

Controller ``default`` (emulator a) and ``b`` (emulator b, JENKINS_CONTROLLERS, with its own cap) have the same job
names: a job's cap is per controller, so ``svc/deploy`` is two jobs with two caps. Both lose answers (a trigger
acted on but never answered) and callbacks; each emulator notifies a different serve. Midway, Jenkins a as a whole
fails: every request answered 503 (its restart page) until the test has seen, while a is still down, a second
wave of b's rows inserted then go out and end (a second wave of a's waits). Only then does a come back.

Promises: every row of both ends final with the status its build's result gives; each row (its MARKER) was built
exactly once, on its own controller, and never on the other; every cap held (each controller's per-job caps, b's
own cap, the global MAX_IN_FLIGHT), in Jenkins and in the database's rows in flight; a's outage held back only
a's rows. Real database (each engine), the emulators and the webhook over real HTTP, serve as a subprocess.
``CHAOS_TRACE=1`` prints progress to stderr.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
import uuid

import pytest

from jenkins_dispatch.dispatching.decisions import final_status

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..engines import sql_for
from ..serve_helpers import serve_env, start_serve
from ..stores import Queue

pytestmark = pytest.mark.both_engines

# `make test` runs the chaos tests at JD_CHAOS_JOBS=600 (this test: 150 + 37 rows of a, 75 + 75 of b); `make chaos`
# at the full 2,000 (500 + 125 of a, 250 + 250 of b).
PER_CONTROLLER = int(os.environ.get("JD_CHAOS_JOBS", "2000")) // 4
NAMES = ["svc/deploy", "svc/migrate", "lint"]
RESULTS = ["SUCCESS"] * 7 + ["FAILURE", "UNSTABLE", "ABORTED"]
# The same job name, a different cap on each controller: mixing them up shows.
CAPS = {("default", "svc/deploy"): 8, ("b", "svc/deploy"): 4, ("default", "svc/migrate"): 6}
B_MAX_IN_FLIGHT = 12
GLOBAL_CAP = 30
SERVES = 3


def _specs(controller: str, count: int) -> list[dict]:
    specs = []
    for i in range(count):
        params = {"MARKER": uuid.uuid4().hex, "EMULATOR_RESULT": RESULTS[i % len(RESULTS)]}
        if i % 20 == 3:
            params["EMULATOR_NO_NOTIFY"] = "true"  # every callback lost: only a reconciler can finish it
        specs.append({"job": NAMES[i % len(NAMES)], "params": params, "controller": controller})
    return specs


def _insert(db, specs: list[dict]) -> dict[int, dict]:
    """Enqueue like an application, in one plain INSERT naming each row's controller; {row id: its spec}."""
    before = db.run("SELECT coalesce(max(id), 0) AS n FROM jenkins_jobs_queue")[0]["n"]
    db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
                                  "SELECT e->>'job', e->'params', e->>'controller' "
                                  "FROM jsonb_array_elements(CAST(:specs AS jsonb)) WITH ORDINALITY AS t(e, n) "
                                  "ORDER BY n",
                   mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
                         "SELECT t.job, t.params, t.controller FROM JSON_TABLE(:specs, '$[*]' COLUMNS ("
                         "n FOR ORDINALITY, job VARCHAR(1024) PATH '$.job', params JSON PATH '$.params', "
                         "controller VARCHAR(64) PATH '$.controller')) AS t ORDER BY t.n"),
           specs=json.dumps(specs))
    rows = db.run("SELECT id FROM jenkins_jobs_queue WHERE id > :n ORDER BY id", n=before)
    return {row["id"]: spec for row, spec in zip(rows, specs, strict=True)}


class CapSampler:
    """The database's rows in flight (processing), sampled: the most seen per (controller, job), per controller and
    in all."""

    def __init__(self, db):
        self.db = db
        self.peaks: collections.Counter = collections.Counter()

    def sample(self) -> None:
        counts = self.db.run("SELECT controller, lower(job_name) AS job, count(*) AS n FROM jenkins_jobs_queue "
                             "WHERE status = 'processing' GROUP BY controller, lower(job_name)")
        per_controller: collections.Counter = collections.Counter()
        for r in counts:
            self.peaks[(r["controller"], r["job"])] = max(self.peaks[(r["controller"], r["job"])], r["n"])
            per_controller[r["controller"]] += r["n"]
        for controller, n in per_controller.items():
            self.peaks[controller] = max(self.peaks[controller], n)
        self.peaks["*"] = max(self.peaks["*"], sum(per_controller.values()))


def _progress(db) -> dict[str, dict[str, int]]:
    """Per controller: rows by status."""
    found: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for r in db.run("SELECT controller, status, count(*) AS n FROM jenkins_jobs_queue GROUP BY controller, status"):
        found[r["controller"]][r["status"]] = r["n"]
    return found


def _unfinished(db, ids: list[int]) -> int:
    return sum(1 for r in db.run("SELECT id, status FROM jenkins_jobs_queue WHERE status IN ('pending', 'processing')")
               if r["id"] in ids)


def test_two_controllers_one_down_three_serves_build_every_row_once_on_its_own_controller(
        make_jenkins, db, database_url, engine, tmp_path):
    jobs = [{"path": name, "parameters": [{"name": "DISPATCH_ID"}, {"name": "MARKER"}], "duration_seconds": 0.1,
             "concurrent": True} for name in NAMES]
    a, b = make_jenkins(executors=80, jobs=jobs), make_jenkins(executors=80, jobs=jobs)
    emulators = {"default": a, "b": b}
    queue = Queue(db)
    for (controller, job), cap in CAPS.items():
        queue.set_limit(job, cap, controller=controller)
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN, "max_in_flight": B_MAX_IN_FLIGHT}}
    env = serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers), LEASE_SECONDS="3",
                    JENKINS_TIMEOUT_SECONDS="1", BATCH_SIZE="10", MAX_PARALLEL_TRIGGERS="4",
                    MAX_IN_FLIGHT=str(GLOBAL_CAP), JENKINS_RETRY_BASE_SECONDS="0.5", JENKINS_RETRY_MAX_SECONDS="2")
    caps = CapSampler(db)
    serves = []
    started = time.monotonic()

    def trace(where: str) -> None:
        if os.environ.get("CHAOS_TRACE"):
            print(f"{time.monotonic() - started:5.1f}s {where}: {dict(_progress(db))} "
                  f"created a={a.counters()['items_created']} b={b.counters()['items_created']}", file=sys.stderr)

    try:
        for n in range(SERVES):
            # Kept before waiting for it to be healthy, so that it is stopped whatever happens next.
            serves.append(start_serve(env, tmp_path / f"serve-{n}.log", "--interval", "1", wait_healthy=False))
        for served in serves:
            assert wait_for(lambda s=served: (s.health() or (0, {}))[1].get("database", {}).get("status") == "ok",
                            timeout=20), served.log()[-3000:]
        # Each Jenkins calls back a different serve; the webhook applies a notification to a row of its own
        # controller only (build URL under the controller's URL).
        for emulator, served, seed in ((a, serves[0], 7), (b, serves[1], 8)):
            emulator.configure(notification={"url": served.notify_url, "drop_probability": 0.05, "seed": seed})
        lossy = [e.add_fault(path="buildWithParameters$", drop_after_accept=True, probability=0.05, seed=n)
                 for n, e in enumerate((a, b))]
        specs = _insert(db, _specs("default", PER_CONTROLLER) + _specs("b", PER_CONTROLLER // 2))

        def created_on_a_over(n: int) -> bool:
            caps.sample()
            return a.counters()["items_created"] > n

        assert wait_for(lambda: created_on_a_over(PER_CONTROLLER // 4), timeout=30, interval=0.02), a.counters()
        # Jenkins a as a whole fails: everything answered 503 until the test ends the window (below).
        a.restart(window_seconds=600)

        def a_seen_down() -> bool:
            caps.sample()
            docs = [s.health() for s in serves]
            return any(d and d[1]["controllers"]["default"]["status"] == "unavailable"
                       and d[1]["controllers"]["b"]["status"] == "ok" and d[1]["status"] == "degraded" for d in docs)

        assert wait_for(a_seen_down, timeout=30, interval=0.1), [s.health() for s in serves]
        trace("a down")
        created_on_a = a.counters()["items_created"]
        # Second waves, inserted while a is down: b's goes out and ends while a is still down; a's waits (so a has
        # a backlog throughout the outage, whatever the first wave had left).
        second_of_b = _insert(db, _specs("b", PER_CONTROLLER // 2))
        specs.update(second_of_b)
        specs.update(_insert(db, _specs("default", PER_CONTROLLER // 4)))

        def second_wave_final() -> bool:
            caps.sample()
            trace("a down, b's second wave")
            return _unfinished(db, list(second_of_b)) == 0

        assert wait_for(second_wave_final, timeout=90, interval=0.1), _progress(db)
        assert a.faults.unavailable_window() is not None, "a came back before b's second wave ended"
        assert a.counters()["items_created"] == created_on_a, "a created queue items while answering 503"
        assert _progress(db)["default"].get("pending", 0) > 0, _progress(db)  # a's rows waited meanwhile
        a.clear_faults()  # a is back (restarted: new session, left items forgotten)
        lossy.append(a.add_fault(path="buildWithParameters$", drop_after_accept=True, probability=0.05, seed=5))

        def all_final() -> bool:
            caps.sample()
            trace("a back")
            stats = queue.stats()
            return (stats["pending"] == 0 and stats["processing"] == 0) or not all(s.alive() for s in serves)

        assert wait_for(all_final, timeout=80, interval=0.1), _progress(db)
        for served in serves:
            assert served.alive(), served.log()[-3000:]
        assert a.wait_idle(timeout=30) and b.wait_idle(timeout=30), (a.counters(), b.counters())
    finally:
        for served in serves:
            served.stop(timeout=20)
    print(f"all {len(specs)} rows final after {time.monotonic() - started:.1f} s on {engine}")

    for served in serves:
        assert served.proc.returncode == 0, served.log()[-3000:]  # SIGTERM: a clean stop
    counters = {name: e.counters() for name, e in emulators.items()}
    built = {name: c["triggers_by_parameter"]["MARKER"] for name, c in counters.items()}
    rows = {r["id"]: r for r in db.run("SELECT id, controller, status, jenkins_result, build_url FROM jenkins_jobs_queue")}
    assert len(rows) == len(specs) == 2 * PER_CONTROLLER + PER_CONTROLLER // 4
    wrong = []
    for job_id, spec in specs.items():
        row, marker, own = rows[job_id], spec["params"]["MARKER"], spec["controller"]
        other = "b" if own == "default" else "default"
        result = spec["params"]["EMULATOR_RESULT"]
        if row["controller"] != own:
            wrong.append((job_id, "controller", row["controller"], own))
        elif built[own].get(marker) != 1 or built[other].get(marker):
            wrong.append((job_id, own, "built", built[own].get(marker), f"on {other}", built[other].get(marker)))
        elif (row["jenkins_result"], row["status"]) != (result, final_status(result)):
            wrong.append((job_id, own, row["status"], row["jenkins_result"], result))
        elif not (row["build_url"] or "").startswith(emulators[own].base_url):
            wrong.append((job_id, own, "build_url", row["build_url"]))
    assert wrong == [], f"{len(wrong)} wrong: {wrong[:10]}"

    # Caps held: per controller and job, b's own, the global one, in Jenkins and in our rows in flight.
    for (controller, job), cap in CAPS.items():
        assert counters[controller]["peak_in_flight_by_job"].get(job, 0) <= cap, (controller, counters[controller])
        assert caps.peaks[(controller, job)] <= cap, caps.peaks
    assert counters["b"]["peak_in_flight"] <= B_MAX_IN_FLIGHT and caps.peaks["b"] <= B_MAX_IN_FLIGHT, caps.peaks
    assert caps.peaks["*"] <= GLOBAL_CAP, caps.peaks
    # The caps were reached (or nearly: sampled every 0.1 s), so this test could have failed.
    assert caps.peaks[("default", "svc/deploy")] >= CAPS[("default", "svc/deploy")] - 2, caps.peaks
    assert caps.peaks[("b", "svc/deploy")] >= CAPS[("b", "svc/deploy")] - 1, caps.peaks

    # The chaos really happened: answers were lost on both controllers (reconcilers finished what callbacks did
    # not), and the serves met a's outage and said so.
    assert all(f.hits for f in lossy[:2]), [f.hits for f in lossy]
    by_reconciler = db.run("SELECT q.controller, count(*) AS n FROM jenkins_job_events e "
                           "JOIN jenkins_jobs_queue q ON q.id = e.job_id "
                           "WHERE e.event = 'settled' AND e.actor = 'reconciler' GROUP BY q.controller")
    assert {r["controller"] for r in by_reconciler} == {"default", "b"}, by_reconciler
    outage_logged = sum(s.log().count("Jenkins unavailable: the pass released what it had not sent") for s in serves)
    assert outage_logged > 0
