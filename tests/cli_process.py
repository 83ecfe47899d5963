"""The CLI in a child process that stays: each command runs as ``python -m jenkins_dispatch.cli`` would run it, in
a process of its own, but the interpreter and its imports are paid once per test process instead of once a command.

Spawning a fresh interpreter for each command cost ~0.5 s of CPU, most of it imports; the suites of commands
that check what a command answers (its exit code, stdout, stderr and what it stored) ran several hundred of them.
The child runs ``main(argv)`` as the module's ``__main__`` does (``sys.exit(main())``): with the command's own
environment (nothing else), fresh settings, its stdout and stderr captured apart, argparse's exits and an escaping
exception's traceback (exit 1) as the interpreter would give them. What only a fresh interpreter shows (output at
import time, the entry point itself) stays with the tests that start one (tests/system/test_cli.py,
test_cli_help.py, test_cli_settings.py).

Protocol: one JSON line a command on the child's stdin ({"argv", "env"}), one JSON line back ({"code", "stdout",
"stderr"}) on a copy of its stdout taken before any command ran.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import threading

CHILD = r'''
import io, json, os, sys, traceback
from contextlib import redirect_stderr, redirect_stdout

answers = os.fdopen(os.dup(1), "w")
sys.stdout = sys.stderr = open(os.devnull, "w")  # nothing but answers on the protocol's stream
from jenkins_dispatch import runtime
from jenkins_dispatch.cli import main

for line in sys.stdin:
    request = json.loads(line)
    os.environ.clear()
    os.environ.update(request["env"])
    runtime.reset()
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(request["argv"])
        except SystemExit as exited:
            code = exited.code
            if isinstance(code, str):
                print(code, file=sys.stderr)
                code = 1
            code = 0 if code is None else code
        except BaseException:
            traceback.print_exc()
            code = 1
    answers.write(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}) + "\n")
    answers.flush()
'''


class CliProcess:
    """One child running commands one at a time (a lock: tests of one process may run them from threads)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=dict(os.environ))
        self.lock = threading.Lock()

    def run(self, argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        with self.lock:
            self.proc.stdin.write(json.dumps({"argv": list(argv), "env": env}) + "\n")
            self.proc.stdin.flush()
            with selectors.DefaultSelector() as selector:
                selector.register(self.proc.stdout, selectors.EVENT_READ)
                if not selector.select(timeout):
                    self.close()
                    raise subprocess.TimeoutExpired(["jenkins_dispatch.cli", *argv], timeout)
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the CLI process ended (exit code {self.proc.wait()}) running {argv}")
        answer = json.loads(line)
        return subprocess.CompletedProcess(["jenkins_dispatch.cli", *argv], answer["code"], answer["stdout"],
                                           answer["stderr"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_process: CliProcess | None = None


def run_cli(argv: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """``subprocess.run([python, "-m", "jenkins_dispatch.cli", *argv], env=env, capture_output=True, text=True)``,
    on this test process's CLI child (started on first use, ended with the test process)."""
    global _process
    if _process is None or _process.proc.poll() is not None:
        _process = CliProcess()
        atexit.register(_process.close)
    return _process.run(argv, env, timeout)
