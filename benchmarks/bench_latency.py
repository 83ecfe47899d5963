"""Continuous dispatch: how soon a plain-SQL INSERT reaches Jenkins, how soon a capped job takes a freed slot,
how fast a 1,000-row INSERT drains, and what an idle dispatcher costs the database.

Everything runs with the SHIPPED defaults (BATCH_SIZE 32, MAX_PARALLEL_TRIGGERS 8, LEASE_SECONDS 300,
JENKINS_TIMEOUT_SECONDS 10, TIME_MARGIN_SECONDS 10, `serve --interval 10`, the template's 50 s dispatcher
timeout): the bench removes every tuning variable from the environment it hands over.

- `serve` is a real subprocess (`python -m jenkins_dispatch.cli serve`); the Lambda dispatcher is
  `functions.dispatcher.app.lambda_handler` called in-process on a thread, with a context whose time left
  counts down from the template's DispatcherTimeoutSeconds; the webhook Lambda, when a capped job needs one, is the same handler behind HTTP.
- The Jenkins emulator runs in its own process. A trigger's arrival is read on the JENKINS side: the queue
  item's ``inQueueSince`` (set when the emulator handled buildWithParameters). "recorded" columns use the
  ``triggered`` event the dispatcher writes afterwards (jenkins_job_events.at). Latency starts at the
  application's clock just before it sends its INSERT (its own pg8000 session, autocommit).
- Idle cost: the statements the dispatcher sends (``Database.statements`` in-process; for serve on
  PostgreSQL, the ``db_statements`` of its "pass finished" log lines, the gauges read after each pass
  included; for serve on MySQL, whose polling wait also sends a probe a second between passes, the
  ``db_statements`` total of /healthz, read at both ends of the window). Cross-check on the server side: pg_stat_database xact_commit +
  xact_rollback of a scratch database used by nothing else (one per statement outside a transaction,
  one more per newly prepared statement, two per new session). That figure is coarse and runs higher: a
  backend reports its counters up to ~10 s late (serve's window therefore starts and ends just after a
  pass), and a LISTENing session runs a server-side transaction of its own whenever NOTIFY traffic in
  OTHER databases of the cluster makes it advance its queue position (on a shared server, other people's
  tests), with nothing sent to the client. The Lambda row covers one whole invocation, its connection
  included (its session is closed before the server-side count is read).
- The burst runs with no cap in force (the one-statement claim). Its rate is CPU-bound on a small host:
  the table gives the 1-minute load average at its start.
- Lambda coverage: how long one invocation with the template's defaults keeps dispatching, and so how long
  a row inserted while none is dispatching waits for the next scheduled one (derived from that measure).

    python -m benchmarks bench_latency        # this bench alone, as `make bench` prints it
    python -m benchmarks.bench_latency        # the same
    run() -> dict[str, list[dict]]            # title -> rows

Targets (the issue): INSERT -> trigger p50 <= 0.5 s, max <= 2 s; burst >= 80 % of the ideal parallel rate;
idle <= 1 statement/s.
"""

from __future__ import annotations

import os

# Before any Powertools import (tests/conftest.py does the same): fake AWS, no tracing, a metrics namespace.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "JenkinsDispatch")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "jenkins-dispatch")
os.environ.setdefault("POWERTOOLS_DEV", "false")

import contextlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pg8000.native  # noqa: E402
import pymysql  # noqa: E402

from benchmarks.engines import PARAMETER_N, mysql_admin_url, mysql_scratch_database, server_name  # noqa: E402
from jenkins_dispatch import runtime  # noqa: E402
from jenkins_dispatch.config import default_of, parse_database_url  # noqa: E402
from jenkins_dispatch.observability import logger  # noqa: E402
from jenkins_dispatch.store.db import Database  # noqa: E402
from jenkins_dispatch.store.levers import Levers  # noqa: E402
from jenkins_dispatch.store.migrations import migrate  # noqa: E402
from tests.pg_server import postgres_server, scratch_database  # noqa: E402

SECRET = "bench-latency-secret"
SEED = 20240611
GAP_SECONDS = (0.05, 0.5)  # between two application INSERTs, uniformly random
SERVE_SAMPLES = 80
LAMBDA_SAMPLES = 60  # must fit one invocation's dispatching window, with the capped chain after it
CHAIN_SERVE = 21  # capped rows inserted at once: one runs, the rest wait; each completion hands over one slot
CHAIN_LAMBDA = 12
CAPPED_BUILD_SECONDS = 0.2
BURST_JOBS = 1000
TRIGGER_LATENCY_SECONDS = 0.05  # given to the emulator for the burst: ideal = threads / latency
IDLE_WINDOW_SECONDS = 30.0


def _template_default(parameter: str) -> str:
    """A parameter's Default in template.yaml (the bench measures what a deploy gets)."""
    text = (Path(__file__).resolve().parent.parent / "template.yaml").read_text()
    match = re.search(rf"^  {parameter}:\n(?:    .*\n)*?    Default: \"?([^\"\n]+)\"?$", text, re.M)
    if match is None:
        raise RuntimeError(f"template.yaml has no Default for {parameter}")
    return match.group(1).strip()


LAMBDA_TIMEOUT_SECONDS = float(_template_default("DispatcherTimeoutSeconds"))
SCHEDULE_PERIOD_SECONDS = 60.0 if _template_default("ScheduleExpression") == "rate(1 minute)" else float("nan")
SHIPPED = {"BATCH_SIZE": 32, "MAX_PARALLEL_TRIGGERS": 8, "JENKINS_TIMEOUT_SECONDS": 10.0, "TIME_MARGIN_SECONDS": 10.0}
TARGET_P50_MS, TARGET_MAX_MS, TARGET_BURST_SHARE, TARGET_IDLE_PER_S = 500.0, 2000.0, 0.80, 1.0
# MySQL has no notifications: the dispatcher reads the queue's fingerprint every POLL_SECONDS when idle, and
# runs a pass only when it moved (dispatching/wakeup.PollingSignal). Its idle cost is one read a poll: the
# polling row's idle target is that (plus the passes), not LISTEN's 1/s.
POLL_SECONDS = float(default_of("POLL_SECONDS"))
TARGET_POLLING_P50_MS = 1000.0
TARGET_POLLING_IDLE_PER_S = 1.2 / POLL_SECONDS
POLLING = f"polling {POLL_SECONDS:g} s"

# Every variable the settings read: none may leak from the caller's environment into the measured processes.
SETTING_VARIABLES = (
    "DATABASE_URL", "DB_SECRET_ARN", "DB_HOST", "DB_PORT", "DB_NAME", "DB_USER", "DB_IAM_AUTH", "DB_CA_BUNDLE",
    "DB_CONNECT_TIMEOUT_SECONDS", "DB_STATEMENT_TIMEOUT_MS", "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
    "JENKINS_URL", "JENKINS_USER", "JENKINS_API_TOKEN", "JENKINS_SECRET_ARN", "JENKINS_TIMEOUT_SECONDS",
    "JENKINS_VERIFY_TLS", "JENKINS_SEARCH_WINDOW", "WEBHOOK_SECRET", "WEBHOOK_SECRET_ARN", "BATCH_SIZE",
    "MAX_PARALLEL_TRIGGERS", "MAX_IN_FLIGHT", "LEASE_SECONDS", "UNSTABLE_IS_FAILURE", "RETRY_BASE_SECONDS",
    "RETRY_MAX_SECONDS", "TIME_MARGIN_SECONDS", "WEBHOOK_DB_POOL_SIZE", "DISPATCHER_MODE", "POLL_SECONDS",
)

INSERT_ONE = "INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES (:job, CAST(:parameters AS jsonb))"
INSERT_ONE_MYSQL = "INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES (%(job)s, %(parameters)s)"
INSERT_MANY = ("INSERT INTO jenkins_jobs_queue (job_name, parameters) "
               "SELECT :job, jsonb_build_object('N', :prefix || g) FROM generate_series(1, :n) g")


# --------------------------------------------------------------------------- small helpers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str, doc=None, timeout: float = 10.0):
    data = None if doc is None else json.dumps(doc).encode()
    request = urllib.request.Request(url, data=data, method="GET" if doc is None else "POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.load(answer)


def _healthz(base: str) -> dict | None:
    try:
        return _http(base + "/healthz", timeout=2)
    except urllib.error.HTTPError as error:
        return json.load(error)
    except OSError:
        return None


def _wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def _quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _ms(value: float) -> float:
    return round(value, 1)


def _ratio(value: float, target: float) -> str:
    return f"{value / target:.2f}x"


def _clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTING_VARIABLES}
    env.update(values)
    return env


def _params(actions: list[dict]) -> dict:
    for action in actions or ():
        if action.get("_class") == "hudson.model.ParametersAction":
            return {p["name"]: p.get("value") for p in action["parameters"]}
    return {}


# --------------------------------------------------------------------------- the emulator, its own process


class Emulator:
    def __init__(self, workdir: Path):
        params = [{"name": "DISPATCH_ID"}, {"name": "N"}]
        config = {
            "executors": 10_000, "quiet_period_seconds": 0, "left_item_retention_seconds": 3600,
            "users": {"admin": {"api_token": "admin-token"}},
            "jobs": [
                # Builds that outlive the bench: no completion, no callback, nothing but the trigger.
                {"path": "bench", "concurrent": True, "duration_seconds": 3600, "notify": False, "parameters": params},
                {"path": "burst", "concurrent": True, "duration_seconds": 3600, "notify": False, "parameters": params},
                # Capped at 1 in the database; each build's COMPLETED callback frees the slot for the next.
                {"path": "capped", "concurrent": True, "duration_seconds": CAPPED_BUILD_SECONDS, "parameters": params},
            ],
        }
        path = workdir / "emulator.json"
        path.write_text(json.dumps(config))
        self.proc = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config", str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().strip()

    def control(self, path: str, doc=None):
        return _http(self.url + "_emulator/" + path, doc)

    def arrivals(self) -> dict[str, list[float]]:
        """N -> the epoch seconds at which each queue item carrying it was created (Jenkins-side arrival)."""
        found: dict[str, list[float]] = {}
        for item in self.control("state")["queue"]:
            tag = _params(item.get("actions")).get("N")
            if tag:
                found.setdefault(tag, []).append(item["inQueueSince"] / 1000)
        return found

    def builds(self, job: str) -> list[dict]:
        return sorted(self.control("state")["jobs"][job]["builds"], key=lambda b: b["number"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- serve, its own process


class Serve:
    def __init__(self, database_url: str, jenkins_url: str, log_path: Path, **extra_env: str):
        port = _free_port()
        env = _clean_env(DATABASE_URL=database_url, JENKINS_URL=jenkins_url, JENKINS_USER="admin",
                         JENKINS_API_TOKEN="admin-token", WEBHOOK_SECRET=SECRET, **extra_env)
        self.log_path = log_path
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "jenkins_dispatch.cli", "serve", "--port", str(port)],
                                         env=env, stdout=log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{port}"
        self.notify_url = f"{self.base}/jenkins/notify?token={SECRET}"
        if not _wait_for(lambda: (_healthz(self.base) or {}).get("passes", 0) >= 1 or self.proc.poll() is not None,
                         timeout=30):
            raise RuntimeError(f"serve did not finish a first pass:\n{log_path.read_text()[-3000:]}")
        if self.proc.poll() is not None:
            raise RuntimeError(f"serve exited {self.proc.returncode}:\n{log_path.read_text()[-3000:]}")

    def passes(self) -> int:
        return (_healthz(self.base) or {}).get("passes", 0)

    def statements(self) -> int:
        """Statements serve's dispatcher session has sent so far, passes and waits (/healthz db_statements)."""
        return (_healthz(self.base) or {})["db_statements"]

    def _summaries(self, start: int, end: int) -> list[dict]:
        """The summaries of the "pass finished" lines logged between two byte offsets of serve's log."""
        with open(self.log_path, "rb") as f:
            f.seek(start)
            chunk = f.read(end - start).decode(errors="replace")
        found = []
        for line in chunk.splitlines():
            if '"pass finished"' in line:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    found.append(json.loads(line)["summary"])
        return found

    def pass_statements(self, start: int, end: int) -> tuple[int, int]:
        """(passes, their logged db_statements) between two byte offsets of serve's log."""
        summaries = self._summaries(start, end)
        return len(summaries), sum(s.get("db_statements", 0) for s in summaries)

    def burst_passes(self, start: int, end: int) -> tuple[int, int, int]:
        """(passes that triggered something, their batches, their db_statements) between two byte offsets."""
        passes = batches = statements = 0
        for summary in self._summaries(start, end):
            if summary.get("triggered"):
                passes, batches, statements = passes + 1, batches + summary["batches"], statements + summary["db_statements"]
        return passes, batches, statements

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


# --------------------------------------------------------------------------- the Lambda, in-process


class CountdownContext:
    """A Lambda context whose time left counts down, as Lambda's does."""

    function_name = "jenkins-dispatch-dispatcher"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jenkins-dispatch-dispatcher"

    def __init__(self, seconds: float, request_id: str):
        self.aws_request_id = request_id
        self.ends_at = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.ends_at - time.monotonic()) * 1000))


@contextlib.contextmanager
def _lambda_environment(database_url: str, jenkins_url: str) -> Iterator[None]:
    """The dispatcher (and webhook) Lambda's environment: ours, with every tuning variable at its default."""
    saved = {k: os.environ.get(k) for k in SETTING_VARIABLES}
    for key in SETTING_VARIABLES:
        os.environ.pop(key, None)
    os.environ.update(DATABASE_URL=database_url, JENKINS_URL=jenkins_url, JENKINS_USER="admin",
                      JENKINS_API_TOKEN="admin-token", WEBHOOK_SECRET=SECRET)
    runtime.reset()
    try:
        yield
    finally:
        runtime.reset()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Invocation:
    """One scheduled invocation of the dispatcher function, on a thread."""

    def __init__(self, seconds: float, name: str):
        from functions.dispatcher.app import lambda_handler

        self.context = CountdownContext(seconds, name)
        self.started = time.monotonic()
        self.result: dict = {}
        self.seconds = 0.0
        event = {"source": "aws.scheduler", "schedule_arn": "arn:aws:scheduler:bench", "execution_id": name}

        def target() -> None:
            try:
                self.result = lambda_handler(event, self.context)
            except Exception as exc:  # reported in the table, never swallowed silently
                self.result = {"error": f"{type(exc).__name__}: {exc}"}
            self.seconds = time.monotonic() - self.started

        self.thread = threading.Thread(target=target, name=f"lambda-{name}", daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> dict:
        self.thread.join(timeout)
        return self.result


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """In-process Lambda log lines and EMF metrics go to a file: the terminal shows only the tables."""
    with open(path, "a") as sink, contextlib.redirect_stdout(sink):
        previous = logger.registered_handler.setStream(sink)
        try:
            yield
        finally:
            logger.registered_handler.setStream(previous)


# --------------------------------------------------------------------------- measurements


def _app_connection(database_url: str) -> pg8000.native.Connection:
    """The application's own session: plain pg8000, autocommit, nothing of ours."""
    s = parse_database_url(database_url)
    return pg8000.native.Connection(user=s.user, password=s.password, host=s.host, port=s.port, database=s.dbname,
                                    application_name="their-app")


class MysqlApp:
    """The application's own MySQL session: plain PyMySQL, autocommit, the server's default time zone (the
    schema's trigger stores its scheduled_at in UTC), nothing of ours; ``run`` as pg8000.native's."""

    def __init__(self, database_url: str):
        s = parse_database_url(database_url)
        self.conn = pymysql.connect(host=s.host, port=s.port, user=s.user, password=s.password or "",
                                    database=s.dbname, autocommit=True, charset="utf8mb4", program_name="their-app")

    def run(self, sql: str, **params) -> None:
        """Run one statement written with %(name)s parameters."""
        with self.conn.cursor() as cursor:
            cursor.execute(sql, params)

    def close(self) -> None:
        """End the session."""
        self.conn.close()


def _insert_at_random_gaps(app: pg8000.native.Connection | MysqlApp, prefix: str, n: int, rng: random.Random,
                           until: float | None = None, insert: str = INSERT_ONE) -> dict[str, float]:
    """INSERT one row at a time, a random gap apart; returns N -> epoch seconds just before each INSERT."""
    sent: dict[str, float] = {}
    for i in range(n):
        time.sleep(rng.uniform(*GAP_SECONDS))
        if until is not None and time.monotonic() > until:
            break
        tag = f"{prefix}{i:03d}"
        sent[tag] = time.time()
        app.run(insert, job="bench", parameters=json.dumps({"N": tag}))
    return sent


def _triggered_count(db: Database, prefix: str) -> int:
    return db.run(f"SELECT count(*) AS n FROM jenkins_jobs_queue WHERE {PARAMETER_N[db.dialect]} LIKE :p "
                  "AND jenkins_queue_id IS NOT NULL", p=prefix + "%")[0]["n"]


def _db_times(db: Database, prefix: str) -> dict[str, dict]:
    n = PARAMETER_N[db.dialect]
    rows = db.run(
        f"SELECT {n} AS tag, q.created_at, "
        "(SELECT min(e.at) FROM jenkins_job_events e WHERE e.job_id = q.id AND e.event = 'triggered') AS triggered_at, "
        "(SELECT min(e.at) FROM jenkins_job_events e WHERE e.job_id = q.id AND e.event = 'settled') AS settled_at "
        f"FROM jenkins_jobs_queue q WHERE {n} LIKE :p", p=prefix + "%")
    return {r["tag"]: r for r in rows}


def _latency_row(engine: str, dispatcher: str, sent: dict[str, float], arrivals: dict[str, list[float]],
                 times: dict[str, dict], target_p50_ms: float = TARGET_P50_MS) -> dict:
    at_jenkins = [(arrivals[t][0] - s) * 1000 for t, s in sent.items() if t in arrivals]
    recorded = [(times[t]["triggered_at"].timestamp() - s) * 1000 for t, s in sent.items()
                if t in times and times[t]["triggered_at"] is not None]
    once = sum(1 for t in sent if len(arrivals.get(t, ())) == 1)
    p50, worst = statistics.median(at_jenkins), max(at_jenkins)
    return {
        "engine": engine, "dispatcher": dispatcher, "inserts": len(sent), "triggered_once": once,
        "p50_ms": _ms(p50), "p99_ms": _ms(_quantile(at_jenkins, 0.99)), "max_ms": _ms(worst),
        "recorded_p50_ms": _ms(statistics.median(recorded)), "recorded_max_ms": _ms(max(recorded)),
        "target_p50_ms": _ms(target_p50_ms),
        "p50_vs_target": _ratio(p50, target_p50_ms), "max_vs_target": _ratio(worst, TARGET_MAX_MS),
        "meets_target": "yes" if p50 <= target_p50_ms and worst <= TARGET_MAX_MS and once == len(sent) else "NO",
    }


def _chain(db: Database, prefix: str, n: int, until: float) -> None:
    """Cap `capped` at 1 and insert n rows at once: one runs, the others wait for its slot."""
    Levers(db).set_limit("capped", 1)
    db.run(INSERT_MANY, job="capped", prefix=prefix, n=n)
    if not _wait_for(lambda: _triggered_count(db, prefix) >= n, timeout=max(1.0, until - time.monotonic())):
        raise RuntimeError(f"capped chain {prefix}: only {_triggered_count(db, prefix)} of {n} triggered")
    # The last build's own callback, so every row's settle time is known.
    _wait_for(lambda: db.run(f"SELECT count(*) AS n FROM jenkins_jobs_queue WHERE {PARAMETER_N[db.dialect]} LIKE :p "
                             "AND status = 'processing'", p=prefix + "%")[0]["n"] == 0, timeout=5)


def _chain_row(engine: str, dispatcher: str, db: Database, emulator: Emulator, prefix: str) -> dict:
    arrivals = emulator.arrivals()
    times = _db_times(db, prefix)
    builds = [b for b in emulator.builds("capped") if str(_params(b["actions"]).get("N", "")).startswith(prefix)]
    from_completion, from_settle, overlaps = [], [], 0
    for previous, following in zip(builds, builds[1:], strict=False):
        completed = (previous["timestamp"] + previous["duration"]) / 1000
        arrived = arrivals[_params(following["actions"])["N"]][0]
        settled = times[_params(previous["actions"])["N"]]["settled_at"]
        overlaps += arrived < completed
        from_completion.append((arrived - completed) * 1000)
        if settled is not None:
            from_settle.append((arrived - settled.timestamp()) * 1000)
    p50, worst = statistics.median(from_completion), max(from_completion)
    return {
        "engine": engine, "dispatcher": dispatcher, "handoffs": len(from_completion),
        "p50_ms": _ms(p50), "p99_ms": _ms(_quantile(from_completion, 0.99)), "max_ms": _ms(worst),
        "settle_to_trigger_p50_ms": _ms(statistics.median(from_settle)),
        "settle_to_trigger_max_ms": _ms(max(from_settle)),
        "cap_held": "yes" if overlaps == 0 else f"NO ({overlaps} overlaps)",
        "p50_vs_target": _ratio(p50, TARGET_P50_MS), "max_vs_target": _ratio(worst, TARGET_MAX_MS),
        "meets_target": "yes" if p50 <= TARGET_P50_MS and worst <= TARGET_MAX_MS and overlaps == 0 else "NO",
    }


def _idle_row(engine: str, dispatcher: str, seconds: float, passes, own: int, server_side: int | None,
              target_per_s: float = TARGET_IDLE_PER_S) -> dict:
    per_s = own / seconds
    return {
        "engine": engine, "dispatcher": dispatcher, "seconds": round(seconds, 1), "passes": passes,
        "statements": own, "per_s": round(per_s, 2),
        "per_pass": round(own / passes, 1) if isinstance(passes, int) and passes else "",
        # MariaDB/MySQL count nothing per database or session without performance_schema (off by default
        # on MariaDB): no server-side cross-check there.
        "server_side_xacts": "n/a" if server_side is None else server_side,
        "server_side_per_s": "n/a" if server_side is None else round(server_side / seconds, 2),
        "target_per_s": round(target_per_s, 2), "vs_target": _ratio(per_s, target_per_s),
        "meets_target": "yes" if per_s <= target_per_s else "NO",
    }


def _xacts(admin: Database, dbname: str) -> int:
    return admin.run("SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = :d",
                     d=dbname)[0]["n"]


# --------------------------------------------------------------------------- the run


def run() -> dict[str, list[dict]]:
    """All measurements; serve's and the Lambda's logs are kept (and named) only if something fails."""
    return logs_kept_on_failure("bench_latency", "serve's and the Lambda's logs", _run)


def logs_kept_on_failure(bench: str, what: str, body: Callable[[Path], dict[str, list[dict]]]) -> dict[str, list[dict]]:
    """``body`` run with a scratch folder for the processes' logs, removed when it succeeds and named when not."""
    workdir = Path(tempfile.mkdtemp(prefix=f"jd-{bench.replace('_', '-')}-"))
    try:
        results = body(workdir)
    except BaseException:
        print(f"{bench} failed: {what} are in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    return results


def _run(workdir: Path) -> dict[str, list[dict]]:
    rng = random.Random(SEED)
    latency: list[dict] = []
    handoff: list[dict] = []
    burst: list[dict] = []
    idle: list[dict] = []
    coverage: list[dict] = []
    lambda_log = workdir / "lambda.log"
    with contextlib.ExitStack() as stack:
        # The dispatcher Lambda's own metrics decorator warns when an invocation published none.
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        admin_url, _where = stack.enter_context(postgres_server())
        url_serve = stack.enter_context(scratch_database(admin_url, prefix="jd_bench_latency"))
        url_lambda = stack.enter_context(scratch_database(admin_url, prefix="jd_bench_latency"))
        if url_serve == url_lambda:
            raise RuntimeError("bench_latency needs two scratch databases (CREATE DATABASE was refused): "
                               "idle statements are counted per database")
        for url in (url_serve, url_lambda):
            with Database(parse_database_url(url)) as db:
                migrate(db)
        admin = stack.enter_context(Database(parse_database_url(admin_url), application_name="jd-bench-admin"))
        pg = server_name(admin)
        emulator = Emulator(workdir)
        stack.callback(emulator.close)
        serve = Serve(url_serve, emulator.url, workdir / "serve.log")
        stack.callback(serve.stop)
        stack.enter_context(_output_to(lambda_log))

        # ---- 3. idle: serve (DB A) and one whole Lambda invocation (DB B) side by side, queues empty.
        # A backend publishes its counters up to ~10 s late, so server-side counts trail by about one pass:
        # the window starts after serve's first periodic pass (its start-up statements are reported by then)
        # and both ends sit just after a pass, so the lag mostly cancels out.
        serve_db, lambda_db = parse_database_url(url_serve).dbname, parse_database_url(url_lambda).dbname
        with _lambda_environment(url_lambda, emulator.url):
            xacts_b0 = _xacts(admin, lambda_db)
            invocation = Invocation(LAMBDA_TIMEOUT_SECONDS, "idle")
            if not _wait_for(lambda: serve.passes() >= 3, timeout=15, interval=0.1):  # 2 at start-up, then periodic
                raise RuntimeError(f"serve made no periodic pass:\n{serve.log_path.read_text()[-3000:]}")
            time.sleep(0.5)
            t0, x0, p0, log0 = time.monotonic(), _xacts(admin, serve_db), serve.passes(), serve.log_size()
            time.sleep(IDLE_WINDOW_SECONDS)
            t1, x1, p1, log1 = time.monotonic(), _xacts(admin, serve_db), serve.passes(), serve.log_size()
            summary = invocation.join(LAMBDA_TIMEOUT_SECONDS)
            active = invocation.seconds
            lambda_statements = runtime.database().statements
            runtime.database().close()  # a backend reports its last counters when its session ends
            time.sleep(1.0)
            xacts_b = _xacts(admin, lambda_db) - xacts_b0
        window = t1 - t0
        logged_passes, logged_statements = serve.pass_statements(log0, log1)
        # A pass's logged db_statements include the gauges read after it (metrics, next wake-up).
        serve_own = logged_statements
        idle.append(_idle_row(pg, "serve (subprocess, LISTEN)", window, p1 - p0, serve_own, x1 - x0))
        passes = summary.get("passes", summary.get("error"))
        idle.append(_idle_row(pg, "Lambda (one whole invocation)", active, passes, lambda_statements, xacts_b))
        reserve = SHIPPED["TIME_MARGIN_SECONDS"] + SHIPPED["JENKINS_TIMEOUT_SECONDS"]
        gap = max(0.0, SCHEDULE_PERIOD_SECONDS - active)  # overlapping invocations leave no gap
        coverage.append({
            "function_timeout_s": LAMBDA_TIMEOUT_SECONDS, "reserve_s (margin + Jenkins timeout)": reserve,
            "dispatching_s (measured)": round(active, 1), "stopped_because": summary.get("stopped_because"),
            "schedule_period_s": SCHEDULE_PERIOD_SECONDS, "uncovered_s_per_period": round(gap, 1),
            "share_of_time_dispatching": f"{active / SCHEDULE_PERIOD_SECONDS:.0%}",
            # An INSERT at a random moment: served at once while an invocation dispatches, else it waits for
            # the next scheduled invocation (derived from the measured window, warm start assumed).
            "insert_at_random_moment_mean_wait_s": round(gap * gap / (2 * SCHEDULE_PERIOD_SECONDS), 1),
            "max_wait_s": round(gap, 1),
        })

        with Database(parse_database_url(url_serve), application_name="jd-bench") as db:
            app = _app_connection(url_serve)
            stack.callback(app.close)

            # ---- 1a. serve: single INSERTs at random gaps
            sent = _insert_at_random_gaps(app, "serve-lat-", SERVE_SAMPLES, rng)
            _wait_for(lambda: _triggered_count(db, "serve-lat-") >= len(sent), timeout=30)
            latency.append(_latency_row(pg, "serve (subprocess, LISTEN)", sent, emulator.arrivals(), _db_times(db, "serve-lat-")))

            # ---- 1c. serve: a capped job's slot, freed by Jenkins's COMPLETED callback to serve's webhook
            emulator.control("config", {"notification": {"url": serve.notify_url}})
            _chain(db, "serve-cap-", CHAIN_SERVE, until=time.monotonic() + 60)
            handoff.append(_chain_row(pg, "serve (subprocess), callback to serve's webhook", db, emulator, "serve-cap-"))
            emulator.control("config", {"notification": None})

            # ---- 2. burst: 1,000 rows in one INSERT, 50 ms per trigger at Jenkins (no cap in force: the
            # one-statement claim; the chain's cap is removed first)
            Levers(db).remove_limit("capped")
            emulator.control("faults", {"path": "buildWithParameters$", "latency_seconds": TRIGGER_LATENCY_SECONDS})
            time.sleep(0.5)
            log_before, load = serve.log_size(), os.getloadavg()[0]
            started = time.time()
            app.run(INSERT_MANY, job="burst", prefix="burst-", n=BURST_JOBS)
            _wait_for(lambda: _triggered_count(db, "burst-") >= BURST_JOBS, timeout=60, interval=0.1)
            emulator.control("faults/clear", {})
            times = [v for k, v in emulator.arrivals().items() if k.startswith("burst-")]
            first, last = min(t[0] for t in times), max(t[0] for t in times)
            ideal = SHIPPED["MAX_PARALLEL_TRIGGERS"] / TRIGGER_LATENCY_SECONDS
            rate = len(times) / (last - started)
            passes, batches, statements = serve.burst_passes(log_before, serve.log_size())
            burst.append({
                "engine": pg, "dispatcher": "serve (subprocess)", "jobs": BURST_JOBS, "triggered_once": sum(len(t) == 1 for t in times),
                "first_trigger_ms": _ms((first - started) * 1000), "all_triggered_s": round(last - started, 2),
                "jobs_per_s": round(rate, 1), "ideal_per_s": round(ideal), "of_ideal": f"{rate / ideal:.0%}",
                "passes": passes, "batches": batches, "db_statements_per_job": round(statements / BURST_JOBS, 3),
                "host_load_1m": round(load, 1),
                "meets_target": "yes" if rate / ideal >= TARGET_BURST_SHARE else "NO",
            })
        serve.stop()

        # ---- 1b + 1c. one Lambda invocation: single INSERTs, then the capped chain (webhook Lambda over HTTP)
        with _lambda_environment(url_lambda, emulator.url), \
                Database(parse_database_url(url_lambda), application_name="jd-bench") as db:
            from jenkins_dispatch.serve import WebhookServer

            app = _app_connection(url_lambda)
            stack.callback(app.close)
            invocation = Invocation(LAMBDA_TIMEOUT_SECONDS, "latency")
            dispatching_until = invocation.started + LAMBDA_TIMEOUT_SECONDS - reserve
            time.sleep(1.0)
            sent = _insert_at_random_gaps(app, "lambda-lat-", LAMBDA_SAMPLES, rng, until=dispatching_until - 9)
            _wait_for(lambda: _triggered_count(db, "lambda-lat-") >= len(sent), timeout=10)
            latency.append(_latency_row(pg, "Lambda (in-process invocation)", sent, emulator.arrivals(),
                                        _db_times(db, "lambda-lat-")))
            webhook = WebhookServer(runtime.settings()).start()
            try:
                emulator.control("config", {"notification": {"url": f"{webhook.url}jenkins/notify?token={SECRET}"}})
                _chain(db, "lambda-cap-", CHAIN_LAMBDA, until=dispatching_until)
                handoff.append(_chain_row(pg, "Lambda (in-process), callback to the webhook handler over HTTP", db,
                                          emulator, "lambda-cap-"))
            finally:
                emulator.control("config", {"notification": None})
                webhook.stop()
            invocation.join(LAMBDA_TIMEOUT_SECONDS)
            if "error" in invocation.result:
                raise RuntimeError(f"the Lambda invocation failed: {invocation.result['error']}")

        # ---- 1a + 3 on MySQL/MariaDB: serve polls (no notifications); idle cost, then single INSERTs
        mysql_admin = mysql_admin_url()
        if mysql_admin is not None:
            url_mysql = stack.enter_context(mysql_scratch_database(mysql_admin, prefix="jd_bench_latency"))
            with Database(parse_database_url(url_mysql), application_name="jd-bench") as db:
                migrate(db)
                engine = server_name(db)
                serve = Serve(url_mysql, emulator.url, workdir / "serve-mysql.log")
                stack.callback(serve.stop)
                # One pass at start-up (no LISTEN session to reopen, unlike PostgreSQL), then periodic ones.
                if not _wait_for(lambda: serve.passes() >= 2, timeout=15, interval=0.1):
                    raise RuntimeError(f"serve made no periodic pass:\n{serve.log_path.read_text()[-3000:]}")
                time.sleep(0.5)
                # Polling sends statements between passes too (one read a poll): counted by serve itself.
                t0, p0, s0 = time.monotonic(), serve.passes(), serve.statements()
                time.sleep(IDLE_WINDOW_SECONDS)
                t1, p1, s1 = time.monotonic(), serve.passes(), serve.statements()
                idle.append(_idle_row(engine, f"serve (subprocess, {POLLING})", t1 - t0, p1 - p0, s1 - s0, None,
                                      TARGET_POLLING_IDLE_PER_S))
                app = MysqlApp(url_mysql)
                stack.callback(app.close)
                sent = _insert_at_random_gaps(app, "mysql-lat-", SERVE_SAMPLES, rng, insert=INSERT_ONE_MYSQL)
                _wait_for(lambda: _triggered_count(db, "mysql-lat-") >= len(sent), timeout=30)
                latency.append(_latency_row(engine, f"serve (subprocess, {POLLING})", sent, emulator.arrivals(),
                                            _db_times(db, "mysql-lat-"), TARGET_POLLING_P50_MS))
                serve.stop()
        else:
            idle.append({"engine": "MySQL/MariaDB", "dispatcher": "not measured: no server on 127.0.0.1:3306 "
                         "(root, no password) and no MYSQL_TEST_URL"})
    return {
        "INSERT -> Jenkins trigger (shipped defaults; plain-SQL INSERTs 50-500 ms apart; time at Jenkins)": latency,
        f"capped job (cap 1, {CAPPED_BUILD_SECONDS:g} s builds): build completed at Jenkins -> next one triggered":
            handoff,
        f"burst: {BURST_JOBS} rows in one INSERT, {TRIGGER_LATENCY_SECONDS * 1000:g} ms per trigger at Jenkins": burst,
        f"idle: statements per second with an empty queue (target <= {TARGET_IDLE_PER_S:g}/s with LISTEN; "
        f"one read a poll when {POLLING})": idle,
        f"Lambda schedule coverage (template defaults: rate(1 minute), {LAMBDA_TIMEOUT_SECONDS:g} s timeout)": coverage,
    }


if __name__ == "__main__":
    from benchmarks.report import print_tables

    print_tables(run())
