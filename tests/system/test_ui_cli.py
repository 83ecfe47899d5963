"""`jenkins-dispatch ui` as an operator starts it: a subprocess that serves the page until SIGTERM, refuses a
non-loopback address without a token (one line naming the variable), never shows the token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import requests

from ..serve_helpers import serve_env, start_serve
from ..ui_helpers import UiClient


def command() -> list[str]:
    """The console script beside this interpreter when it is installed, else the module."""
    script = Path(sys.executable).with_name("jenkins-dispatch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jenkins_dispatch.cli"]


def test_a_non_loopback_ui_without_a_token_refuses_to_start(database_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("UI_TOKEN")}
    proc = subprocess.run([*command(), "ui", "--host", "0.0.0.0", "--port", "0"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and "UI_TOKEN" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_ui_serves_until_sigterm_and_never_shows_its_token(database_url, queue):
    job_id = queue.enqueue("deploy", {"ENV": "prod"}).id
    env = dict(os.environ, UI_TOKEN="tok-" + "9" * 20)
    proc = subprocess.Popen([*command(), "ui", "--host", "0.0.0.0", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["token_required"] is True and "tok-" not in json.dumps(first)
        url = first["url"].replace("0.0.0.0", "127.0.0.1")
        browser = UiClient(url)
        assert browser.get("/").url.endswith("/login")
        browser.post("/login", {"token": "tok-" + "9" * 20})
        page = browser.get(f"/jobs/{job_id}")
        assert page.status_code == 200 and "<th>ENV</th><td>prod</td>" in page.text
        assert "tok-" not in page.text
        assert requests.get(url + "jobs", timeout=5, allow_redirects=False).status_code == 303  # no cookie: login
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "tok-" not in out + err and "Traceback" not in err


def test_serve_ui_without_a_token_refuses_to_start(database_url, jenkins):
    env = {k: v for k, v in serve_env(database_url, jenkins.base_url).items() if not k.startswith("UI_TOKEN")}
    proc = subprocess.run([*command(), "serve", "--ui", "--port", "0"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "UI_TOKEN" in proc.stderr, proc.stderr


def test_serve_ui_mounts_the_page_beside_the_webhook(database_url, jenkins, queue, tmp_path):
    job_id = queue.enqueue("nightly", scheduled_at="2099-01-01T00:00:00Z").id  # stays pending
    served = start_serve(serve_env(database_url, jenkins.base_url, UI_TOKEN="serve-ui-token"), tmp_path / "serve.log",
                         "--ui")
    try:
        assert served.health()[0] == 200
        assert requests.post(served.base + "/jenkins/notify", json={}, timeout=5).status_code == 401  # the webhook
        browser = UiClient(served.base)
        assert browser.get("/").url.endswith("/login")
        browser.post("/login", {"token": "serve-ui-token"})
        page = browser.get(f"/jobs/{job_id}")
        assert page.status_code == 200 and "not due until" in page.text
        assert "Content-Security-Policy" in page.headers
        assert browser.post(f"/jobs/{job_id}/cancel").status_code == 200  # asks first: nothing changed yet
        assert queue.get(job_id)["status"] == "pending"
        assert browser.post(f"/jobs/{job_id}/cancel", {"confirm": "yes"}).status_code == 200
        assert queue.get(job_id)["status"] == "cancelled" and queue.events(job_id)[-1]["actor"] == "ui"
    finally:
        assert served.stop() == 0
    assert "serve-ui-token" not in served.log()
