"""Key caps under real dispatchers, counted where it matters: at Jenkins. Two `serve` processes claim rows of three
jobs that share two concurrency keys capped at 1; the emulator's builds (each one's start and end) never overlap
within a key, and every row is built once and ends completed."""

from __future__ import annotations

import signal
from collections import defaultdict

import pytest

from ..dispatch_helpers import most_at_once, wait_for
from ..serve_helpers import serve_env, start_serve

pytestmark = pytest.mark.both_engines

KEYS = {"deploy": "env:prod", "db-migrate": "env:prod", "build": "env:dev"}
FINAL = ("completed", "failed", "cancelled")


def _assert_each_key_built_one_at_a_time(jenkins, queue, ids: list[int], prod: int, dev: int) -> None:
    """No two of a key's builds overlap at Jenkins (each build's start and end), and each row was built once."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for job, key in KEYS.items():
        for build in jenkins.builds(job):
            spans[key].append((build.started, build.started + build.duration_ms / 1000))
    assert most_at_once(spans["env:prod"]) == 1 and most_at_once(spans["env:dev"]) == 1, spans
    assert len(spans["env:prod"]) == prod and len(spans["env:dev"]) == dev
    for job_id in ids:
        assert jenkins.triggers_for(queue.get(job_id)["dispatch_id"]) == 1


def test_two_serve_processes_never_build_two_rows_of_a_key_at_once(make_jenkins, queue, database_url, tmp_path):
    jenkins = make_jenkins(jobs=[{"path": name, "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.4}
                                 for name in ("db-migrate", "build")])
    queue.set_key_limit("env:prod", 1)
    queue.set_key_limit("env:dev", 1)
    served = [start_serve(serve_env(database_url, jenkins.base_url, LEASE_SECONDS="30"), tmp_path / f"serve{i}.log",
                          "--interval", "0.2") for i in range(2)]
    try:
        jenkins.configure(notification={"url": served[0].notify_url})  # every build's end settles its row at once
        ids = [queue.enqueue(job, {"EMULATOR_DURATION": "0.4"}, concurrency_key=KEYS[job]).id
               for _ in range(4) for job in KEYS]
        assert wait_for(lambda: all(queue.get(i)["status"] == "completed" for i in ids), timeout=90), (
            [(i, queue.get(i)["status"]) for i in ids], served[0].log()[-3000:])
        assert all(s.alive() for s in served)
    finally:
        for s in served:
            s.stop()
    _assert_each_key_built_one_at_a_time(jenkins, queue, ids, prod=8, dev=4)


def test_key_caps_hold_through_lost_answers_500s_a_jenkins_restart_and_a_sigkill(make_jenkins, queue, database_url,
                                                                                tmp_path):
    """The faults that leave a key's slot in doubt: a trigger Jenkins queued but never answered (the row stays in
    flight until the reconciler finds its build), a 500 (the row waits, its slot freed), Jenkins restarting (every
    request 503 for a while), and a dispatcher killed with rows claimed (in flight until their lease ends). Through
    all of them, no two builds of a key overlap at Jenkins, every row is built once, and the survivor lives on."""
    jenkins = make_jenkins(jobs=[{"path": name, "parameters": [{"name": "DISPATCH_ID"}], "duration_seconds": 0.3}
                                 for name in ("db-migrate", "build")])
    queue.set_key_limit("env:prod", 1)
    queue.set_key_limit("env:dev", 1)
    env = serve_env(database_url, jenkins.base_url, LEASE_SECONDS="3", JENKINS_TIMEOUT_SECONDS="1",
                    RETRY_BASE_SECONDS="0.2", JENKINS_RETRY_BASE_SECONDS="0.2", JENKINS_RETRY_MAX_SECONDS="0.5")
    survivor = start_serve(env, tmp_path / "survivor.log", "--interval", "0.2")
    killed = start_serve(env, tmp_path / "killed.log", "--interval", "0.2")
    try:
        jenkins.configure(notification={"url": survivor.notify_url})
        lost = jenkins.add_fault(path="buildWithParameters$", drop_after_accept=True, times=2)
        refused = jenkins.add_fault(path="buildWithParameters$", status=500, times=2)
        ids = [queue.enqueue(job, {"EMULATOR_DURATION": "0.3"}, concurrency_key=KEYS[job]).id
               for _ in range(5) for job in KEYS]
        assert wait_for(lambda: jenkins.counters()["items_created"] >= 4, timeout=30), jenkins.counters()
        killed.proc.send_signal(signal.SIGKILL)
        assert killed.proc.wait(timeout=10) == -signal.SIGKILL
        jenkins.restart(window_seconds=1.5)
        assert wait_for(lambda: all(queue.get(i)["status"] in FINAL for i in ids) or not survivor.alive(),
                        timeout=120), ([(i, queue.get(i)["status"]) for i in ids], survivor.log()[-3000:])
        assert survivor.alive(), survivor.log()[-3000:]
        assert lost.hits == 2 and refused.hits == 2  # every fault did bite
    finally:
        survivor.stop()
        killed.stop()
    assert [(i, queue.get(i)["status"]) for i in ids if queue.get(i)["status"] != "completed"] == []
    _assert_each_key_built_one_at_a_time(jenkins, queue, ids, prod=10, dev=5)
