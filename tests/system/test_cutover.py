"""Cutting over from the worker the original question describes, while it still runs (issue 27), as its users
would: that worker's PHP code (tests/fixtures/seed_worker.php: PDO, FOR UPDATE SKIP LOCKED LIMIT 1, 'processing',
COMMIT, the Jenkins job, 'completed') run by PHP's CLI on a seed-shaped table, `jenkins-dispatch migrate` while it
works, then `serve`. Each engine, several build times; the emulator records every build."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.errors import DatabaseBusy
from jenkins_dispatch.store.db import Database

from ..dispatch_helpers import WEBHOOK_SECRET, wait_for
from ..integration.test_cutover import CLEAR, OLD_WORKER_DONE, add_rows, rows_of, seed_url  # noqa: F401 - fixture
from ..serve_helpers import free_port, serve_env, start_serve

pytestmark = pytest.mark.both_engines

WORKER_CODE = Path(__file__).resolve().parents[1] / "fixtures" / "seed_worker.php"
PHP = shutil.which("php")
PDO_DRIVER = {"postgresql": "pdo_pgsql", "mysql": "pdo_mysql"}
FINAL = ("completed", "failed", "cancelled")


def _php_modules() -> set[str]:
    if PHP is None:
        return set()
    listed = subprocess.run([PHP, "-m"], capture_output=True, text=True, timeout=30).stdout
    return {line.strip().lower() for line in listed.splitlines()}


PHP_MODULES = _php_modules()


@pytest.fixture
def php(engine):
    """PHP's CLI with the engine's PDO driver, or a skip saying what to install."""
    if PHP is None:
        pytest.skip("php is not installed (apt-get install php-cli php-pgsql php-mysql)")
    if PDO_DRIVER[engine] not in PHP_MODULES:
        pytest.skip(f"php has no {PDO_DRIVER[engine]} (apt-get install php-pgsql php-mysql)")
    return PHP


class OldWorker:
    """One seed_worker.php process; its output goes to a file read back whole."""

    def __init__(self, php: str, url: str, jenkins_url: str, build_wait: float, name: str, log: Path,
                 long_first_build: bool = False):
        # A long build ended on cue: its job lasts while this file exists (end_long_build removes it).
        self.long_build = log.with_suffix(".long-build")
        if long_first_build:
            self.long_build.touch()
        s = parse_database_url(url)
        prefix = "pgsql" if s.engine == "postgresql" else "mysql"
        # PDO's pgsql takes a Unix socket's folder as its host (the embedded server the tests may fall back on).
        host = os.path.dirname(s.unix_socket) if s.unix_socket else s.host
        env = dict(os.environ, SEED_DSN=f"{prefix}:host={host};port={s.port};dbname={s.dbname}",
                   SEED_DB_USER=s.user, SEED_DB_PASSWORD=s.password or "", JENKINS_URL=jenkins_url,
                   JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token", BUILD_WAIT_SECONDS=str(build_wait),
                   WORKER=name, HOLD_WHILE_FILE=str(self.long_build))
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen([php, str(WORKER_CODE)], env=env, stdout=out, stderr=subprocess.STDOUT)

    def end_long_build(self) -> None:
        self.long_build.unlink(missing_ok=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def jenkins_dispatch(url: str, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """A jenkins-dispatch command, as an operator runs it."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("JENKINS_", "DATABASE_URL", "CUTOVER_"))}
    full.update(DATABASE_URL=url, **env)
    done = subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], env=full, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def statuses(url: str) -> dict[int, str]:
    with Database(parse_database_url(url), application_name="jd-tests") as db:
        return {r["id"]: r["status"] for r in db.run("SELECT id, status FROM jenkins_jobs_queue")}


def triggers_per_row(jenkins) -> Counter:
    """Queue items the emulator created per row (its parameter ENV names the row); merged requests not counted."""
    return Counter(jenkins.counters()["triggers_by_parameter"].get("ENV", {}))


def builds_per_row(jenkins) -> Counter:
    return Counter(value for build in jenkins.builds("deploy") for d, value in build.parameters if d.name == "ENV")


class Application(threading.Thread):
    """The application's own plain INSERTs, on a session of its own, until stopped: whenever fewer than ``low``
    rows are pending, ``low`` more (rows n<first>, n<first + 1>, …)."""

    def __init__(self, url: str, first: int, low: int = 10):
        super().__init__(daemon=True)
        self.url, self.next, self.low, self.stop = url, first, low, threading.Event()

    def run(self) -> None:
        with Database(parse_database_url(self.url), application_name="seed-app") as app:
            while not self.stop.wait(0.02):
                try:
                    self._top_up(app)
                except DatabaseBusy:
                    # `migrate` holds the table past the session's lock timeout: an application tries again
                    # (seen once beside two CPU burners), it does not stop enqueueing for good.
                    continue

    def _top_up(self, app: Database) -> None:
        if app.run("SELECT COUNT(*) AS n FROM jenkins_jobs_queue WHERE status = 'pending'")[0]["n"] < self.low:
            values = ", ".join(f"('deploy', '{{\"ENV\": \"n{n}\"}}')" for n in range(self.next, self.next + self.low))
            app.run(f"INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES {values}")
            self.next += self.low


@pytest.mark.parametrize("build_wait", [0.3, 0.7, 1.5, 5.0])
def test_cutover_while_the_seed_worker_runs(php, seed_url, make_jenkins, tmp_path, build_wait):  # noqa: F811
    """Two old workers run jobs; `migrate` runs while they work and the application goes on enqueueing; 20 more
    rows come; the workers are told to stop, and then stopped; `serve` runs the rest. Every row ends with its true
    status, each built once. One worker's first job lasts until `migrate` is over (a long build), so a job is held
    across the upgrade whatever the timing: the other's short jobs may all fall between its steps."""
    jenkins = make_jenkins(executors=16)
    add_rows(seed_url, 1, 20)
    workers = [OldWorker(php, seed_url, jenkins.base_url, build_wait, f"old-{n}", tmp_path / f"old-{n}.log",
                         long_first_build=n == 2)
               for n in (1, 2)]
    served = None
    # The queue never runs dry: the workers hold jobs all through the upgrade, however long it takes (MariaDB's
    # goes file by file, and they claim until its last one).
    application = Application(seed_url, 21)
    try:
        # Both hold a job when the upgrade starts.
        assert wait_for(lambda: list(statuses(seed_url).values()).count("processing") == 2, timeout=30), \
            [w.output() for w in workers]
        application.start()
        jenkins_dispatch(seed_url, "migrate", CUTOVER_WINDOW_SECONDS="120")
        upgraded = {w: len(w.output()) for w in workers}
        workers[1].end_long_build()
        application.stop.set()
        application.join(30)
        add_rows(seed_url, application.next, 20)
        # Each old worker finishes the job it held, then its next claim is refused, telling it what to do.
        assert wait_for(lambda: all(CLEAR in w.output()[upgraded[w]:] for w in workers), timeout=build_wait + 30), \
            [w.output()[-2000:] for w in workers]
        with Database(parse_database_url(seed_url)) as db:
            assert wait_for(lambda: not any(r["status"] == "processing" and r["dispatch_id"].startswith("legacy-")
                                            for r in rows_of(db).values()), timeout=build_wait + 30)
        for worker in workers:
            worker.stop()
        # Jenkins's notifications go to serve from its first build on; COMPLETED only, which settles the row
        # (the emulator sends them one at a time).
        port = free_port()
        jenkins.configure(notification={"url": f"http://127.0.0.1:{port}/jenkins/notify?token={WEBHOOK_SECRET}",
                                        "drop_phases": ["QUEUED", "STARTED", "FINALIZED"]})
        served = start_serve(serve_env(seed_url, jenkins.base_url, BATCH_SIZE="32", MAX_PARALLEL_TRIGGERS="8"),
                             tmp_path / "serve.log", port=port)
        assert wait_for(lambda: all(s in FINAL for s in statuses(seed_url).values()), timeout=90), \
            (statuses(seed_url), served.log()[-3000:])
    finally:
        for worker in workers:
            worker.stop()
        if served is not None:
            served.stop()

    with Database(parse_database_url(seed_url)) as db:
        rows = rows_of(db)
        assert len(rows) == application.next + 19 and {r["status"] for r in rows.values()} == {"completed"}, \
            {i: (r["status"], r["last_error"]) for i, r in rows.items() if r["status"] != "completed"}
        held = [i for i, r in rows.items() if (r["dispatch_id"] or "").startswith("legacy-")]
        assert held, ("no job was held by an old worker when migrate ran",
                      Counter((r["status"], r["dispatch_id"] is None) for r in rows.values()),
                      db.run("SELECT * FROM jenkins_dispatch_cutover"), [w.output()[:3000] for w in workers])
        for job_id in held:
            events = db.run("SELECT actor, detail FROM jenkins_job_events WHERE job_id = :id ORDER BY id", id=job_id)
            assert events[-1]["actor"] == "old_worker" and f"completed {OLD_WORKER_DONE}" in events[-1]["detail"]
    every_row = Counter({f"n{n}": 1 for n in range(1, application.next + 20)})
    assert triggers_per_row(jenkins) == every_row and builds_per_row(jenkins) == every_row
    outputs = "".join(w.output() for w in workers)
    assert "check constraint" not in outputs.lower() and "CONSTRAINT" not in outputs, outputs[-3000:]


def lease_over(db: Database, job_id: int) -> bool:
    """Whether the row's lease has ended: the old worker's job, once the cutover window is over."""
    return db.run("SELECT COUNT(*) AS n FROM jenkins_jobs_queue WHERE id = :id "
                  "AND (lease_expires_at IS NULL OR lease_expires_at <= CURRENT_TIMESTAMP)",
                  id=job_id)[0]["n"] == 1


def dispatch_settings_of(env: dict[str, str]) -> dict[str, str]:
    return {k: env[k] for k in ("JENKINS_URL", "JENKINS_USER", "JENKINS_API_TOKEN", "LEASE_SECONDS",
                                "JENKINS_TIMEOUT_SECONDS")}


def test_a_job_whose_old_worker_dies_is_settled_after_the_window_with_its_reason(php, seed_url, make_jenkins,  # noqa: F811
                                                                                 tmp_path):
    jenkins = make_jenkins()
    add_rows(seed_url, 1, 1)
    worker = OldWorker(php, seed_url, jenkins.base_url, 600, "old", tmp_path / "old.log")
    window = 5.0
    try:
        assert wait_for(lambda: statuses(seed_url) == {1: "processing"}, timeout=30), worker.output()
        started = time.monotonic()
        jenkins_dispatch(seed_url, "migrate", CUTOVER_WINDOW_SECONDS=str(window))
        worker.stop(signal.SIGKILL)  # it dies holding the job
    finally:
        worker.stop(signal.SIGKILL)
    settings = dispatch_settings_of(serve_env(seed_url, jenkins.base_url))
    with Database(parse_database_url(seed_url)) as db:
        jenkins_dispatch(seed_url, "dispatch", **settings)
        if time.monotonic() < started + window:  # the pass ran within the window (a slow machine may take longer)
            assert rows_of(db)[1]["status"] == "processing"
        assert wait_for(lambda: lease_over(db, 1), timeout=30)
        jenkins_dispatch(seed_url, "dispatch", **settings)
        row = rows_of(db)[1]
    assert row["status"] == "failed" and "worker that ran before jenkins-dispatch" in row["last_error"]
    assert "jenkins-dispatch retry 1" in row["last_error"]
    assert triggers_per_row(jenkins) == {"n1": 1}  # the old worker's trigger only: nothing sent again


def test_a_late_result_from_the_old_worker_after_the_window_changes_nothing_and_says_why(php, seed_url,  # noqa: F811
                                                                                         make_jenkins, tmp_path):
    jenkins = make_jenkins()
    add_rows(seed_url, 1, 1)
    # Its job lasts until the reconciler has settled the row, however long the upgrade takes on a busy machine.
    worker = OldWorker(php, seed_url, jenkins.base_url, 0, "old", tmp_path / "old.log", long_first_build=True)
    settings = dispatch_settings_of(serve_env(seed_url, jenkins.base_url))
    try:
        assert wait_for(lambda: statuses(seed_url) == {1: "processing"}, timeout=30), worker.output()
        jenkins_dispatch(seed_url, "migrate", CUTOVER_WINDOW_SECONDS="1")
        with Database(parse_database_url(seed_url)) as db:
            assert wait_for(lambda: lease_over(db, 1), timeout=30)
            jenkins_dispatch(seed_url, "dispatch", **settings)  # the reconciler settles the job after the window
            settled = rows_of(db)[1]
            events = db.run("SELECT * FROM jenkins_job_events ORDER BY id")
            # The old worker's long job ends and it reports 'completed': refused, saying why; then 'failed' (its
            # error path), which the row says already.
            worker.end_long_build()
            assert wait_for(lambda: any(f"{word} 1" in worker.output() for word in ("completed", "failed"))
                            or "error:" in worker.output(), timeout=30), worker.output()
            assert rows_of(db)[1] == settled and db.run("SELECT * FROM jenkins_job_events ORDER BY id") == events
    finally:
        worker.stop()
    assert settled["status"] == "failed"
    said = worker.output()
    assert "completed 1" not in said, said
    assert CLEAR in said and "row 1 was not marked completed" in said, said
