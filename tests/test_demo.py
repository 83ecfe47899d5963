"""`make demo`'s entry point, end to end, with a smaller mix: embedded PostgreSQL, emulator, serve."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_runs_on_an_embedded_database_and_exits_0_only_when_correct():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JENKINS_URL")}
    proc = subprocess.run([sys.executable, "-m", "demo", "--jobs", "20", "--timeout", "60"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    assert "embedded PostgreSQL" in out and "Jenkins EMULATOR" in out
    assert "every job built exactly once: yes" in out
    assert "RESULT: correct" in out
    assert "demo/does-not-exist" in out and "removed" in out
