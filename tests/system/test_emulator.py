"""`python -m jenkins_emulator` as a user runs it: the lines it prints first, --help, --notify-url, a bad
--config refused in one line with exit 2."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import requests

from jenkins_dispatch.config import load_controllers, load_jenkins_settings

from ..emulator_fixtures import ADMIN_TOKEN

AUTH = ("admin", ADMIN_TOKEN)


@contextmanager
def _module(*args: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    """``python -m jenkins_emulator ARGS`` on a free port, with the three lines it prints at start; ended afterwards."""
    process = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    try:
        yield process, [process.stdout.readline().strip() for _ in range(3)]
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_module_prints_its_url_first_and_serves() -> None:
    process = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/")
        root = requests.get(base_url + "api/json", auth=("admin", "admin-token"), timeout=5)
        assert root.status_code == 200 and {"deploy", "team"} <= {j["name"] for j in root.json()["jobs"]}
        folder_job = requests.get(base_url + "job/team/job/app/job/deploy/api/json?tree=property[parameterDefinitions[name]]", auth=("admin", "admin-token"), timeout=5)
        assert folder_job.json()["property"][0]["parameterDefinitions"][0]["name"] == "DISPATCH_ID"
        assert "counters" in requests.get(base_url + "_emulator/state", timeout=5).json()
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_module_prints_its_credentials_and_notifications_after_the_url() -> None:
    with _module() as (_, lines):
        assert lines[0].startswith("http://127.0.0.1:")
        assert lines[1] == "user admin: API token admin-token, password admin"
        assert lines[2] == "notifications: off (--notify-url URL sends them)"


def test_help_names_the_default_user_and_token() -> None:
    help_text = subprocess.run([sys.executable, "-m", "jenkins_emulator", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "admin-token" in help_text and "--notify-url" in help_text


def test_notify_url_option_makes_the_default_emulator_send_callbacks(receiver) -> None:
    with _module("--notify-url", receiver.url + "/jenkins/notify?token=SECRET") as (_, lines):
        assert lines[2] == f"notifications: POST to {receiver.url}/jenkins/notify"  # the token is not printed
        answer = requests.post(lines[0] + "job/nightly/buildWithParameters", data={"DISPATCH_ID": "n"}, auth=AUTH, timeout=5)
        assert answer.status_code == 201
        deadline = time.monotonic() + 10
        while len(receiver.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [r["json"]["build"]["phase"] for r in receiver.requests] == ["QUEUED", "STARTED", "COMPLETED", "FINALIZED"]
        assert receiver.requests[0]["path"] == "/jenkins/notify?token=SECRET"


def test_module_refuses_a_malformed_config_in_one_line_with_exit_2(tmp_path) -> None:
    config = tmp_path / "emulator.json"
    config.write_text(json.dumps({"jobs": [{"path": "deploy"}, {"parameters": ["DISPATCH_ID"]}]}))
    proc = subprocess.run([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--config", str(config)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f'python -m jenkins_emulator: error: {config}: jobs[1] has no "path": {{"parameters": ["DISPATCH_ID"]}}'
    ]


def test_a_taken_port_is_one_line_naming_the_option() -> None:
    """Issue 25 #5: following the README, the emulator and `serve` both wanted 8080; each listening command
    says which option moves it (serve's and ui's: tests/system/test_http_limits.py)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "jenkins_emulator", "--port", str(port)], capture_output=True,
                              text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc
    assert f"127.0.0.1:{port}" in proc.stderr and "Address already in use" in proc.stderr and "--port" in proc.stderr


@contextmanager
def _controllers(*args: str) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """``python -m jenkins_emulator --controllers … ARGS`` on free ports: each controller's base URL by name, from
    its first lines, and the variables its last start-up line exports for jenkins-dispatch; ended afterwards."""
    process = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0", *args], stdout=subprocess.PIPE,
                               text=True)
    try:
        urls = {}
        while not (line := process.stdout.readline().strip()).startswith("user "):
            name, url = line.split()
            urls[name] = url
        assert process.stdout.readline().startswith("notifications: ")
        words = shlex.split(process.stdout.readline().removeprefix("export "))
        yield urls, dict(word.split("=", 1) for word in words)
    finally:
        process.terminate()
        process.wait(timeout=5)


def _trigger(url: str, dispatch_id: str) -> int:
    return requests.post(url + "job/nightly/buildWithParameters", data={"DISPATCH_ID": dispatch_id}, auth=AUTH,
                         timeout=5).status_code


def test_controllers_option_runs_several_each_on_its_own_url_going_down_on_its_own() -> None:
    """Issue 23 item 7: one command runs several controllers; each is its own Jenkins (its own URL, queue and
    control API), so a trigger lands only on its own, and one restarting (503) leaves the others answering."""
    with _controllers("--controllers", "default,b") as (urls, env):
        assert list(urls) == ["default", "b"] and urls["default"] != urls["b"]
        # what it prints for jenkins-dispatch is a configuration jenkins-dispatch accepts, naming these URLs
        controllers = {c.name: c.url for c in load_controllers(env, default=load_jenkins_settings(env))}
        assert controllers == urls, (controllers, urls)
        assert _trigger(urls["default"], "on-default") == 201 and _trigger(urls["b"], "on-b") == 201
        counters = {name: requests.get(url + "_emulator/counters", timeout=5).json() for name, url in urls.items()}
        assert counters["default"]["triggers_by_dispatch_id"] == {"on-default": 1}
        assert counters["b"]["triggers_by_dispatch_id"] == {"on-b": 1}

        assert requests.post(urls["b"] + "_emulator/restart", json={"window_seconds": 60}, timeout=5).ok
        down = requests.get(urls["b"] + "api/json", auth=AUTH, timeout=5)
        assert down.status_code == 503 and "Please wait while Jenkins is restarting" in down.text
        assert _trigger(urls["b"], "while-down") == 503
        assert requests.get(urls["default"] + "api/json", auth=AUTH, timeout=5).status_code == 200
        assert _trigger(urls["default"], "meanwhile") == 201
        counters = {name: requests.get(url + "_emulator/counters", timeout=5).json() for name, url in urls.items()}
        assert counters["b"]["unavailable_answers"] == 2 and counters["default"]["unavailable_answers"] == 0
        assert "while-down" not in counters["b"]["triggers_by_dispatch_id"]

        assert requests.post(urls["b"] + "_emulator/faults/clear", timeout=5).ok  # back before its window ends
        assert _trigger(urls["b"], "back") == 201


def test_controllers_option_refuses_bad_names_in_one_line() -> None:
    for value in ("default,B", "b,b", "default,"):
        proc = subprocess.run([sys.executable, "-m", "jenkins_emulator", "--port", "0", "--controllers", value],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, (value, proc)
        assert "--controllers" in proc.stderr, proc.stderr
