"""A controller's own webhook secret (issue 23): a notification whose build URL belongs to a controller with a
`webhook_secret` must carry that secret instead of the shared WEBHOOK_SECRET, and the others the shared one -
through a real `serve` (a subprocess), two emulators and the database, on both engines. A wrong token is refused
before the body is read, as before."""

from __future__ import annotations

import json

import pytest

from ..dispatch_helpers import WEBHOOK_SECRET, wait_for
from ..emulator_fixtures import ADMIN_TOKEN
from ..serve_helpers import http_post, serve_env, start_serve

pytestmark = pytest.mark.both_engines

B_SECRET = "b-own-webhook-secret"


def _body(row: dict, base_url: str) -> dict:
    return {"name": "deploy", "url": "job/deploy/",
            "build": {"phase": "COMPLETED", "status": "SUCCESS", "number": 1, "url": "job/deploy/1/",
                      "full_url": f"{base_url}job/deploy/1/", "parameters": {"DISPATCH_ID": row["dispatch_id"]}}}


def test_a_controllers_own_webhook_secret_replaces_the_shared_one_for_its_builds(make_jenkins, queue, database_url,
                                                                                 tmp_path):
    a, b = make_jenkins(), make_jenkins()
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN, "webhook_secret": B_SECRET}}
    served = start_serve(serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers)),
                         tmp_path / "serve.log", "--interval", "0.3")
    try:
        on_b, on_a = queue.enqueue("deploy", controller="b").id, queue.enqueue("deploy").id
        assert wait_for(lambda: all(queue.get(i)["jenkins_queue_id"] is not None for i in (on_a, on_b)), timeout=15)
        row_b, row_a = queue.get(on_b), queue.get(on_a)

        def post(token: str, row: dict, base_url: str):
            return http_post(f"{served.base}/jenkins/notify?token={token}", _body(row, base_url))

        # b's build with the shared secret, a's with b's: refused, nothing changed.
        status, doc = post(WEBHOOK_SECRET, row_b, b.base_url)
        assert status == 401 and "controller 'b'" in doc["message"], doc
        status, doc = post(B_SECRET, row_a, a.base_url)
        assert status == 401 and "WEBHOOK_SECRET" in doc["message"], doc
        assert post("wrong", row_b, b.base_url)[0] == 401
        assert (queue.get(on_b)["status"], queue.get(on_a)["status"]) == ("processing", "processing")
        # Each with its own controller's secret: applied.
        for token, row, base_url in ((B_SECRET, row_b, b.base_url), (WEBHOOK_SECRET, row_a, a.base_url)):
            status, doc = post(token, row, base_url)
            assert (status, doc["outcome"]) == (200, "applied"), doc
        assert (queue.get(on_b)["status"], queue.get(on_a)["status"]) == ("completed", "completed")
    finally:
        assert served.stop() == 0, served.log()[-3000:]


def test_doctor_probes_the_webhook_with_each_controllers_own_secret(make_jenkins, queue, db, database_url, tmp_path):
    """`doctor --webhook-url` sends its probe once with WEBHOOK_SECRET and once per controller with a secret of its
    own (a build URL under that controller): a row per secret, and a wrong one named, changing nothing."""
    from jenkins_dispatch.operating.doctor import FAIL, PASS, DoctorOptions, run_checks

    from ..integration.test_doctor import by_name, env_for

    a, b = make_jenkins(), make_jenkins()
    controllers = {"b": {"url": b.base_url, "user": "admin", "api_token": ADMIN_TOKEN, "webhook_secret": B_SECRET}}
    served = start_serve(serve_env(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(controllers)),
                         tmp_path / "serve.log")
    try:
        before = db.run("SELECT count(*) AS n FROM jenkins_job_events")
        options = DoctorOptions(webhook_url=served.base + "/jenkins/notify")
        checks = by_name(run_checks(options, env_for(database_url, a.base_url,
                                                     JENKINS_CONTROLLERS=json.dumps(controllers))))
        assert checks["webhook"].status == PASS, checks["webhook"]
        assert checks["webhook b"].status == PASS, checks["webhook b"]
        assert "controller b's webhook_secret" in checks["webhook b"].detail

        wrong = {"b": dict(controllers["b"], webhook_secret="not-b-s-secret")}
        checks = by_name(run_checks(options, env_for(database_url, a.base_url, JENKINS_CONTROLLERS=json.dumps(wrong))))
        assert checks["webhook"].status == PASS
        assert checks["webhook b"].status == FAIL and "HTTP 401" in checks["webhook b"].detail, checks["webhook b"]
        assert "webhook_secret" in checks["webhook b"].fix and "not-b-s-secret" not in repr(checks["webhook b"])
        assert db.run("SELECT count(*) AS n FROM jenkins_job_events") == before
    finally:
        assert served.stop() == 0, served.log()[-3000:]
