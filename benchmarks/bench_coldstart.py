"""Cold-import time of each Lambda handler module, as Lambda would pay it on a cold start.

Each measurement is a fresh interpreter importing ``functions/<name>/app.py`` with the built layer
(``.aws-sam/build/SharedLayer/python``, precompiled for 3.12 by ``make build``) first on ``sys.path``,
and boto3/botocore appended (Lambda's runtime provides them). One discarded warm-up run lets the
interpreter cache what the layer does not ship; the median of the next runs is reported.

The layer is built for one architecture (``make build`` arm64, ``make build ARCH=x86_64``), read from its
compiled extensions' ELF headers: it is measured only on a machine of that architecture (an emulated
interpreter would measure the emulator); on another the rows say so instead of a number.

    python -m benchmarks.bench_coldstart          # table
    python -m benchmarks.bench_coldstart --json   # machine-readable
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILT_LAYER = ROOT / ".aws-sam" / "build" / "SharedLayer" / "python"
SOURCE_LAYER = ROOT / "layers" / "shared"
HANDLERS = ("dispatcher", "webhook", "migrate")
RUNS = 5
TARGET_MS = 300.0
ELF_MACHINES = {62: "x86_64", 183: "arm64"}
HOST_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())

CHILD = """
import sys, time
sys.path[:0] = [{fn_dir!r}, {layer!r}]
sys.path.append({runtime_dir!r})
started = time.perf_counter()
import app  # noqa
assert callable(app.lambda_handler)
print(round((time.perf_counter() - started) * 1000, 2))
"""


def _python312() -> str | None:
    candidates = [shutil.which("python3.12"), *sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))]
    for candidate in candidates:
        if candidate and subprocess.run(
            [candidate, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"], capture_output=True
        ).returncode == 0:
            return candidate
    return None


def layer_architecture(layer: Path) -> str | None:
    """arm64 or x86_64, from the ELF header of the layer's first compiled extension (None: none found)."""
    for so in sorted(layer.rglob("*.so")):
        header = so.read_bytes()[:20]
        if header[:4] == b"\x7fELF":
            return ELF_MACHINES.get(int.from_bytes(header[18:20], "little"), "unknown")
    return None


def _runtime_dir() -> str:
    """A folder holding only what Lambda's runtime adds (boto3, botocore, s3transfer)."""
    import boto3

    site = Path(boto3.__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="jd-runtime-"))
    for name in ("boto3", "botocore", "s3transfer"):
        (folder / name).symlink_to(site / name)
    return str(folder)


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "POWERTOOLS", "DATABASE_URL"))}
    env.update(
        AWS_LAMBDA_FUNCTION_NAME="bench-coldstart",  # as on Lambda: tracing on, so Tracer really loads
        AWS_DEFAULT_REGION=env.get("AWS_DEFAULT_REGION", "us-east-1"),
        AWS_REGION=env.get("AWS_REGION", "us-east-1"),
        POWERTOOLS_SERVICE_NAME="jenkins-dispatch",
        POWERTOOLS_METRICS_NAMESPACE="JenkinsDispatch",
        PYTHONDONTWRITEBYTECODE="",
    )
    env.pop("PYTHONDONTWRITEBYTECODE")
    return env


def _once(python: str, code: str, env: dict) -> float:
    result = subprocess.run([python, "-s", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed")
    return float(result.stdout.strip().splitlines()[-1])


def run(runs: int = RUNS) -> list[dict]:
    layer = BUILT_LAYER if BUILT_LAYER.is_dir() else SOURCE_LAYER
    # The source layer carries our package only: its dependencies are in this interpreter's environment, not in
    # a bare Python 3.12's (run `make build` for the Lambda's own picture).
    python = (_python312() or sys.executable) if layer == BUILT_LAYER else sys.executable
    arch = layer_architecture(layer) if layer == BUILT_LAYER else HOST_ARCH
    runtime_dir = _runtime_dir()
    env = _env()
    rows = []
    try:
        for name in HANDLERS:
            fn_dir = ROOT / "functions" / name
            row = {"handler": f"functions/{name}/app.py", "python": Path(python).name, "arch": arch,
                   "layer": "built (precompiled)" if layer == BUILT_LAYER else "source", "runs": runs}
            if not (fn_dir / "app.py").exists():
                rows.append({**row, "median_ms": None, "error": "app.py missing"})
                continue
            if arch not in (None, HOST_ARCH):
                rows.append({**row, "median_ms": None,
                             "error": f"layer built for {arch}: not measurable on this {HOST_ARCH} machine"})
                continue
            code = CHILD.format(fn_dir=str(fn_dir), layer=str(layer), runtime_dir=runtime_dir)
            try:
                _once(python, code, env)  # warm-up: caches .pyc of files the layer does not ship
                times = [_once(python, code, env) for _ in range(runs)]
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                rows.append({**row, "median_ms": None, "error": str(exc)})
                continue
            median = statistics.median(times)
            rows.append({**row, "median_ms": median, "min_ms": min(times), "max_ms": max(times),
                         "target_ms": TARGET_MS, "ok": median < TARGET_MS})
    finally:
        shutil.rmtree(runtime_dir, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rows = run()
    if "--json" in argv:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'handler':<28} {'median ms':>10} {'min':>8} {'max':>8}  {'target':>7}  notes")
    for r in rows:
        if r.get("median_ms") is None:
            print(f"{r['handler']:<28} {'-':>10} {'-':>8} {'-':>8}  {'-':>7}  {r['error']}")
            continue
        print(f"{r['handler']:<28} {r['median_ms']:>10.1f} {r['min_ms']:>8.1f} {r['max_ms']:>8.1f}  "
              f"{'<' + str(int(r['target_ms'])):>7}  {'ok' if r['ok'] else 'SLOW'} "
              f"({r['python']} on {r['arch']}, {r['layer']} layer, median of {r['runs']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
