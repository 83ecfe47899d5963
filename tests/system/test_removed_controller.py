"""Issue 33, as an operator lives it: `serve` runs two controllers, controller b is taken out of the configuration
while three of its rows are in Jenkins, and `serve` is restarted without it (MAX_IN_FLIGHT 3). The default
controller's new row still reaches its Jenkins within one lease; the stranded rows say why in `show`, `stats`,
`doctor` and `/metrics`; `cancel` settles one; b put back, `serve` settles the other two from b's Jenkins. Real
database (each engine), the emulators over real HTTP, `serve` and the CLI as subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from ..dispatch_helpers import wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..serve_helpers import serve_env, start_serve
from ..stores import Queue

pytestmark = pytest.mark.both_engines

LEASE = 3
QUIET = {"path": "held", "parameters": [{"name": "DISPATCH_ID"}, {"name": "N"}], "quiet_period_seconds": 8,
         "duration_seconds": 0.2}


def _cli(env, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jenkins_dispatch.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=60)


def _metrics(base: str) -> str:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as answer:
        return answer.read().decode()


def test_serve_without_a_removed_controller_strands_its_rows_and_stalls_no_one(make_jenkins, db, database_url,
                                                                            tmp_path):
    home, b = make_jenkins(jobs=[QUIET]), make_jenkins(jobs=[QUIET])
    queue = Queue(db)
    common = dict(LEASE_SECONDS=str(LEASE), JENKINS_TIMEOUT_SECONDS="1", MAX_IN_FLIGHT="3")
    with_b = serve_env(database_url, home.base_url, **common, JENKINS_CONTROLLERS=json.dumps(
        {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN}}))
    without_b = serve_env(database_url, home.base_url, **common)

    stranded = [queue.enqueue("held", {"N": str(n)}, controller="b").id for n in range(3)]
    served = start_serve(with_b, tmp_path / "serve-1.log", "--interval", "1")
    try:
        assert wait_for(lambda: all(queue.get(i)["jenkins_queue_id"] is not None for i in stranded), timeout=20)
    finally:
        assert served.stop() == 0
    # b leaves the configuration; serve comes back without it.
    served = start_serve(without_b, tmp_path / "serve-2.log", "--interval", "1")
    try:
        fresh = queue.enqueue("deploy").id
        assert wait_for(lambda: queue.get(fresh)["jenkins_queue_id"] is not None, timeout=LEASE + 2), queue.stats()
        assert home.counters()["items_created"] == 1
        assert [queue.get(i)["status"] for i in stranded] == ["processing"] * 3

        shown = _cli(without_b, "show", str(stranded[1]))
        assert shown.returncode == 0 and "stranded" in shown.stdout, shown.stdout
        assert "controller b is not configured: this row is stranded" in shown.stdout
        stats = _cli(without_b, "stats")
        assert "controller b is not configured: 3 in flight, stranded" in stats.stdout, stats.stdout
        doctor = _cli(without_b, "doctor")
        assert doctor.returncode == 1 and "row controllers" in doctor.stdout, doctor.stdout
        assert wait_for(lambda: 'jenkins_dispatch_controller_stranded_in_flight{controller="b"} 3.0'
                        in _metrics(served.base), timeout=10), _metrics(served.base)
        cancelled = _cli(without_b, "cancel", str(stranded[0]))
        assert cancelled.returncode == 0 and "is not configured" in cancelled.stdout, cancelled
        assert queue.get(stranded[0])["status"] == "cancelled"
        assert served.alive()
    finally:
        assert served.stop() == 0
    # b is back: serve settles the other two from its Jenkins.
    served = start_serve(with_b, tmp_path / "serve-3.log", "--interval", "1")
    try:
        assert wait_for(lambda: all(queue.get(i)["status"] == "completed" for i in stranded[1:]), timeout=40), \
            [queue.get(i) for i in stranded]
    finally:
        assert served.stop() == 0
    assert b.counters()["items_created"] == 3  # each built once; the cancelled one's item was never stopped
