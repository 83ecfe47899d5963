"""Issue #11, part 2: parameters reach Jenkins as written.

A row's parameters are jsonb. Read back through the driver they became Python floats (``1.10`` → ``1.1``,
``1e-400`` → ``0.0``) and JSON null became the text ``null``. The queries that feed triggers now read them as
text and numbers keep the digits PostgreSQL's jsonb prints. The rows here are written with plain SQL, as an
application would, and what the emulator received is read back from its builds.
"""

from __future__ import annotations

import pytest

from jenkins_dispatch.dispatching.dispatcher import run_pass

from ..dispatch_helpers import dispatch_settings, expire_leases, wait_for

ROW_PARAMETERS = """{
  "V_TEN": 1.10, "V_PRICE": 19.990, "V_TINY": 1e-400, "V_EXP": 1E+3, "V_SMALL": -1.500e-3,
  "V_BIG": 12345678901234567890123, "V_NESTED": {"z": 2.50},
  "V_MIXED": {"list": [1.0, 2, -0.5e1, "é\\"q", null, true, false], "a": {"b": 1e2}},
  "V_NULL": null, "V_TRUE": true, "V_FALSE": false, "V_STRING": "1.10"
}"""

# What PostgreSQL 13-17 prints for those values (jsonb keeps a number's digits as numeric does, including trailing
# zeros, but writes exponents out in full; nested objects come out with jsonb's key order, shorter keys first).
EXPECTED = {
    "V_TEN": "1.10",
    "V_PRICE": "19.990",
    "V_TINY": "0." + "0" * 399 + "1",
    "V_EXP": "1000",
    "V_SMALL": "-0.001500",
    "V_BIG": "12345678901234567890123",
    "V_NESTED": '{"z":2.50}',
    "V_MIXED": '{"a":{"b":100},"list":[1.0,2,-5,"é\\"q",null,true,false]}',
    "V_NULL": "the job's default",  # null: not sent, so Jenkins uses the job's default
    "V_TRUE": "true",
    "V_FALSE": "false",
    "V_STRING": "1.10",
}

PARAMS_JOB = {
    "path": "params",
    "parameters": [{"name": "DISPATCH_ID"}, *({"name": name} for name in EXPECTED if name != "V_NULL"),
                   {"name": "V_NULL", "default": "the job's default"}],
    "duration_seconds": 0.05,
}


def insert_row(db) -> int:
    [row] = db.run("INSERT INTO jenkins_jobs_queue (job_name, parameters) VALUES ('params', CAST(:p AS jsonb)) RETURNING id",
                   p=ROW_PARAMETERS)
    return row["id"]


def received(jenkins) -> dict[str, str]:
    assert wait_for(lambda: jenkins.builds("params"))
    [build] = jenkins.builds("params")
    return {definition.name: value for definition, value in build.parameters if definition.name != "DISPATCH_ID"}


def test_postgresql_prints_these_numbers_so(db):
    [row] = db.run("SELECT CAST(CAST(:p AS jsonb) AS text) AS t", p=ROW_PARAMETERS)
    assert '"V_TEN": 1.10' in row["t"] and '"V_PRICE": 19.990' in row["t"] and '"V_EXP": 1000' in row["t"]
    assert f'"V_TINY": {EXPECTED["V_TINY"]}' in row["t"]


@pytest.mark.parametrize("path", ["claim", "capped claim", "reconciler re-send"])
def test_parameters_reach_jenkins_as_written(make_jenkins, queue, db, path):
    jenkins = make_jenkins(jobs=[PARAMS_JOB])
    job_id = insert_row(db)
    settings = dispatch_settings(jenkins.base_url)
    if path == "capped claim":
        queue.set_limit("params", 5)
    if path == "reconciler re-send":
        # The first trigger's connection is reset before Jenkins reads it: nothing is queued, the outcome is
        # unknown, and after the lease the reconciler finds nothing and sends the row again (take_expired_leases).
        jenkins.add_fault(path="buildWithParameters$", reset=True, times=1)
        assert run_pass(settings)["outcome_unknown"] == 1
        assert not jenkins.builds("params")
        expire_leases(db)
    summary = run_pass(settings)
    assert summary["triggered"] == 1 or summary["reconciled"]["requeued"] == 1
    assert received(jenkins) == EXPECTED
    assert queue.get(job_id)["status"] == "processing"
