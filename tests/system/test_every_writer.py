"""Issue 33's oracle: every writer of the queue at once, against two controllers with faults, and the promise counted
per row and per controller at the end.

The writers: two `serve` processes (dispatchers, reconcilers, the webhook; one with the web page), the application's
plain-SQL INSERTs in waves, plain-SQL requeues of running rows (the seed's `SET status = 'pending'`), the CLI's
`cancel ID`, a bulk `cancel --param … --yes` and `retry ID` as subprocesses, the page's Cancel button, and a schedule
whose tick the dispatchers enqueue. The faults: trigger answers lost after Jenkins acted on them, callbacks dropped,
and controller ``default`` restarting (503 to everything) for a while.

Counted at the end, from the builds each emulator ran (their DISPATCH_IDs name the row: ``jd-ROW-…``): no dispatch
built twice; no row built more often than it was retried plus once; no build on a controller that is not its row's;
no row left unfinished and nothing left in either Jenkins's queue; both serves still up. Real database (each engine),
the emulators, the webhook and the page over real HTTP. ``CHAOS_TRACE=1`` prints progress to stderr.
"""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.dispatch_ids import row_id_hint

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..engines import sql_for
from ..serve_helpers import serve_env, start_serve
from ..stores import Queue
from ..ui_helpers import UiClient

# Its waits are bounded on their own (the waves, the writers, the drain); under a loaded machine the whole can pass
# the suite's 120 s per test.
pytestmark = [pytest.mark.both_engines, pytest.mark.timeout(600)]

PER_WAVE = 40  # rows per controller per wave
MAX_WAVES = 8
NAMES = ["svc/deploy", "svc/slow", "svc/queued"]
JOBS = [
    {"path": "svc/deploy", "duration_seconds": 0.2},
    {"path": "svc/slow", "duration_seconds": 3},  # long enough to be requeued or cancelled while building
    {"path": "svc/queued", "duration_seconds": 0.2, "quiet_period_seconds": 2},  # ...or while queued in Jenkins
    # Queued 15 s in Jenkins: what the CLI's and the page's cancels aim at, so that on a slow machine (a CLI process
    # takes seconds to start) the row is still there to cancel when the command runs.
    {"path": "svc/held", "duration_seconds": 0.2, "quiet_period_seconds": 15},
]
HELD_PER_WAVE = 4
RESULTS = ["SUCCESS"] * 8 + ["FAILURE", "UNSTABLE"]
UI_TOKEN = "oracle-ui-token-0123456789"


def _specs(controller: str, count: int, rng: random.Random) -> list[dict]:
    names = NAMES * (count // len(NAMES) + 1)
    return [{"job": job, "controller": controller,
             "params": {"MARKER": uuid.uuid4().hex, "EMULATOR_RESULT": rng.choice(RESULTS)}}
            for job in names[:count] + ["svc/held"] * HELD_PER_WAVE]


def _insert(db, specs: list[dict]) -> None:
    """As an application enqueues: one plain INSERT naming each row's controller."""
    db.run(sql_for(db, postgresql="INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
                                  "SELECT e->>'job', e->'params', e->>'controller' "
                                  "FROM jsonb_array_elements(CAST(:specs AS jsonb)) AS t(e)",
                   mysql="INSERT INTO jenkins_jobs_queue (job_name, parameters, controller) "
                         "SELECT t.job, t.params, t.controller FROM JSON_TABLE(:specs, '$[*]' COLUMNS ("
                         "job VARCHAR(1024) PATH '$.job', params JSON PATH '$.params', "
                         "controller VARCHAR(64) PATH '$.controller')) AS t"),
           specs=json.dumps(specs))


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=60)


def _built(emulator) -> collections.Counter:
    """Builds per DISPATCH_ID the emulator ran (started), every job."""
    counted: collections.Counter = collections.Counter()
    with emulator.jenkins.lock:
        for job in emulator.jenkins.jobs.values():
            for build in job.builds.values():
                for definition, value in build.parameters:
                    if definition.name == "DISPATCH_ID" and value:
                        counted[str(value)] += 1
    return counted


class Writers:
    """The operators and the application, acting while the dispatchers run: each act is recorded (what, on which
    row, its exit code or answer), and an act that could not be carried out must say so in one line."""

    def __init__(self, db, env: dict[str, str], page: UiClient, seed: int):
        self.db, self.env, self.page = db, env, page
        self.rng = random.Random(seed)
        self.acts: collections.Counter = collections.Counter()
        self.problems: list[str] = []
        self.stop = threading.Event()

    def _pick(self, status: str, job: str | None = None) -> int | None:
        rows = self.db.run("SELECT id, job_name FROM jenkins_jobs_queue WHERE status = :status", status=status)
        rows = [r for r in rows if job is None or r["job_name"] == job]
        return self.rng.choice(rows)["id"] if rows else None

    def _cli_act(self, name: str, *argv: str) -> None:
        done = _cli(self.env, *argv)
        # 0 done; 1 Jenkins or the database failed for a while (a restarting controller); 2 the row changed
        # meanwhile (already final): each says so in one line on stderr, never a traceback.
        if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr or (
                done.returncode and done.stderr.strip().count("\n") > 0 and name != "bulk cancel"):
            self.problems.append(f"{name} {argv}: exit {done.returncode}: {done.stderr[-500:]}")
        self.acts[f"{name} exit {done.returncode}"] += 1

    def requeue_by_plain_sql(self) -> None:
        job_id = self._pick("processing")
        if job_id is not None:
            self.db.run("UPDATE jenkins_jobs_queue SET status = 'pending' WHERE id = :id", id=job_id)
            self.acts["plain-SQL requeue"] += 1

    def cancel_from_the_cli(self) -> None:
        job_id = self._pick("processing", "svc/held") or self._pick("pending")
        if job_id is not None:
            self._cli_act("cancel", "cancel", str(job_id))

    def cancel_in_bulk(self) -> None:
        rows = self.db.run("SELECT parameters FROM jenkins_jobs_queue WHERE status = 'processing' AND job_name = "
                           "'svc/slow'")
        if rows:
            parameters = rows[0]["parameters"]
            marker = (json.loads(parameters) if isinstance(parameters, str) else parameters)["MARKER"]
            self._cli_act("bulk cancel", "cancel", "--param", f"MARKER={marker}", "--yes")

    def retry_from_the_cli(self) -> None:
        job_id = self._pick(self.rng.choice(["failed", "cancelled"]))
        if job_id is not None:
            self._cli_act("retry", "retry", str(job_id))

    def cancel_from_the_page(self) -> None:
        job_id = self._pick("processing", "svc/held") or self._pick("pending")
        if job_id is None:
            return
        answer = self.page.post(f"/jobs/{job_id}/cancel", {"confirm": "yes"})
        if answer.status_code not in (200, 409, 502, 503):
            self.problems.append(f"page cancel {job_id}: HTTP {answer.status_code}: {answer.text[-300:]}")
        self.acts[f"page cancel HTTP {answer.status_code}"] += 1

    def done_enough(self) -> bool:
        """Whether every kind of act has happened at least twice (so that the counts below could have failed)."""
        return all(self.acts[kind] >= 2 for kind in ("plain-SQL requeue", "cancel exit 0", "bulk cancel exit 0",
                                                      "retry exit 0", "page cancel HTTP 200"))

    def run(self) -> None:
        """Act in turn until told to stop."""
        acts = [self.requeue_by_plain_sql, self.cancel_from_the_cli, self.cancel_from_the_page,
                self.requeue_by_plain_sql, self.retry_from_the_cli, self.cancel_in_bulk]
        n = 0
        while not self.stop.wait(0.2):
            try:
                acts[n % len(acts)]()
            except Exception as exc:  # a writer that breaks is a finding, not a crash of the test's thread
                self.problems.append(f"{type(exc).__name__}: {exc}")
            n += 1


def test_every_writer_at_once_builds_nothing_twice_nothing_on_the_wrong_controller_and_strands_nothing(
        make_jenkins, db, database_url, engine, tmp_path):
    rng = random.Random(33)
    jobs = [dict(j, parameters=[{"name": "DISPATCH_ID"}, {"name": "MARKER"}], concurrent=True) for j in JOBS]
    a, b = make_jenkins(executors=40, jobs=jobs), make_jenkins(executors=40, jobs=jobs)
    emulators = {"default": a, "b": b}
    controllers = json.dumps({"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}})
    env = serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=controllers, LEASE_SECONDS="3",
                    JENKINS_TIMEOUT_SECONDS="1", BATCH_SIZE="10", MAX_PARALLEL_TRIGGERS="4", MAX_IN_FLIGHT="40",
                    JENKINS_RETRY_BASE_SECONDS="0.5", JENKINS_RETRY_MAX_SECONDS="2", UI_TOKEN=UI_TOKEN)
    queue = Queue(db)
    started = time.monotonic()

    def trace(where: str) -> None:
        if os.environ.get("CHAOS_TRACE"):
            counts = db.run("SELECT controller, status, count(*) AS n FROM jenkins_jobs_queue GROUP BY 1, 2")
            print(f"{time.monotonic() - started:5.1f}s {where}: {[tuple(r.values()) for r in counts]}", file=sys.stderr)

    serves = []
    writers = None
    try:
        serves.append(start_serve(env, tmp_path / "serve-0.log", "--interval", "1", "--ui"))
        serves.append(start_serve(env, tmp_path / "serve-1.log", "--interval", "1"))
        for emulator, served, seed in ((a, serves[0], 3), (b, serves[1], 4)):
            emulator.configure(notification={"url": served.notify_url, "drop_probability": 0.1, "seed": seed})
        lossy = [e.add_fault(path="buildWithParameters$", drop_after_accept=True, probability=0.05, seed=n)
                 for n, e in enumerate((a, b))]
        page = UiClient(serves[0].base)
        page.get("/")  # the login page, and its form's token
        page.post("/login", {"token": UI_TOKEN})
        page.get("/")  # a session of its own now: the page's token for it
        # A schedule of b's, its tick made due now (the dispatchers enqueue it: one row, whichever takes it).
        added = _cli(env, "schedule", "add", "oracle-tick", "svc/deploy", "--cron", "0 0 1 1 *", "--controller", "b",
                     "-p", "MARKER=tick")
        assert added.returncode == 0, added.stderr
        db.run("UPDATE jenkins_job_schedules SET next_tick = :t WHERE name = 'oracle-tick'",
               t=datetime.now(UTC) - timedelta(seconds=1))
        # The writers' own session: they act from a thread of their own, beside this one's reads.
        writers_db = Database(parse_database_url(database_url), application_name="jd-tests-writers")
        writers = Writers(writers_db, env, page, seed=7)
        acting = threading.Thread(target=writers.run, name="writers", daemon=True)
        acting.start()
        # Three waves at least, and more while the writers have not done every kind of act: on a slow machine they
        # act more slowly, and a wave can drain before they had rows in each state to act on.
        for wave in range(MAX_WAVES):
            _insert(db, _specs("default", PER_WAVE, rng) + _specs("b", PER_WAVE, rng))
            trace(f"wave {wave}")
            if wave == 1:
                a.restart(window_seconds=3)  # controller default: 503 to everything for 3 s
            assert wait_for(lambda: queue.stats()["pending"] < PER_WAVE, timeout=60, interval=0.2), queue.stats()
            if wave >= 2 and wait_for(writers.done_enough, timeout=20, interval=0.5):
                break
        else:
            pytest.fail(f"the writers did not do every kind of act twice in {MAX_WAVES} waves: {writers.acts}")
        writers.stop.set()
        acting.join(timeout=60)

        def all_final() -> bool:
            trace("draining")
            stats = queue.stats()
            return (stats["pending"] == 0 and stats["processing"] == 0) or not all(s.alive() for s in serves)

        assert wait_for(all_final, timeout=120, interval=0.5), queue.stats()
        for served in serves:
            assert served.alive(), served.log()[-3000:]
        assert a.wait_idle(timeout=30) and b.wait_idle(timeout=30), (a.counters(), b.counters())
    finally:
        if writers is not None:
            writers.stop.set()
            writers.db.close()
        for served in serves:
            served.stop(timeout=20)
    print(f"{engine}: every row final after {time.monotonic() - started:.1f} s; acts: {dict(writers.acts)}")

    assert writers.problems == [], writers.problems
    rows = {r["id"]: r for r in db.run("SELECT id, controller, status FROM jenkins_jobs_queue")}
    retried = collections.Counter(r["job_id"] for r in db.run(
        "SELECT job_id FROM jenkins_job_events WHERE event = 'retried'"))
    requeued = {r["job_id"] for r in db.run("SELECT job_id FROM jenkins_job_events WHERE event = 'requeue_kept'")}
    twice, wrong_controller, too_often = [], [], []
    per_row: collections.Counter = collections.Counter()
    for name, emulator in emulators.items():
        for dispatch_id, n in _built(emulator).items():
            row_id = row_id_hint(dispatch_id)
            if n > 1:
                twice.append((name, dispatch_id, n))
            if rows[row_id]["controller"] != name:
                wrong_controller.append((dispatch_id, "built on", name, "row of", rows[row_id]["controller"]))
            per_row[row_id] += n
    for row_id, n in per_row.items():
        if n > 1 + retried[row_id]:
            too_often.append((row_id, n, retried[row_id]))
    stranded = [r for r in rows.values() if r["status"] in ("pending", "processing")]
    assert (twice, wrong_controller, too_often, stranded) == ([], [], [], []), (twice, wrong_controller, too_often)

    # Every writer did act, so this could have failed: requeues of running rows, CLI and page cancels, retries, the
    # schedule's tick, lost answers on both controllers, default's restart.
    assert requeued, writers.acts
    assert db.run("SELECT count(*) AS n FROM jenkins_jobs_queue WHERE controller = 'b' AND job_name = 'svc/deploy' "
                  "AND parameters LIKE '%tick%'" if engine == "mysql" else
                  "SELECT count(*) AS n FROM jenkins_jobs_queue WHERE controller = 'b' AND parameters->>'MARKER' = "
                  "'tick'")[0]["n"] == 1
    assert all(f.hits for f in lossy), [f.hits for f in lossy]
    assert a.counters()["unavailable_answers"] > 0
