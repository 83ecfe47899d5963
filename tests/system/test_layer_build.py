"""The Lambda layer as `sam build` makes it (layers/shared/Makefile), for arm64 and for x86_64.

Each architecture's layer is built once into a temporary folder, from the hash-pinned lock (wheels from
PyPI, for that platform whatever this machine is). Then:
- its compiled wheels are for that architecture: the WHEEL tags and the ELF header of every ``.so``;
- it ships what a handler imports and nothing else (no CLI, no ``serve``, no web page, no operator commands),
  checked against the handlers' import graph read from the source;
- the RDS CA bundle it carries is the checked-in one, where the package looks for it;
- every handler imports from that layer alone (plus what the Lambda runtime provides: boto3) in a fresh
  Python 3.12 of the same architecture - on this machine's own architecture; another one's interpreter is
  not available here (no emulated arm64 CPython 3.12), so there the tags and ELF headers are the proof.
And the build refuses a missing or altered CA bundle before downloading anything.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

# Each layer is built from PyPI wheels (a cold pip cache on a fresh machine takes a minute or more).
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
LAYER_SOURCE = ROOT / "layers" / "shared"
PACKAGE = LAYER_SOURCE / "jenkins_dispatch"
HANDLERS = ("dispatcher", "webhook", "migrate")
# What no handler imports, so the layer leaves it out (layers/shared/Makefile, LAMBDA_NEVER_IMPORTS).
NEVER_IN_LAYER = ("cli", "serve.py", "http_service.py", "ui", "operating")
# architecture -> (ELF e_machine, the word in wheel platform tags and extension file names)
ARCHITECTURES = {"arm64": (183, "aarch64"), "x86_64": (62, "x86_64")}
HOST = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())


def _python312() -> str | None:
    candidates = [shutil.which("python3.12"), *sorted(glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"],
                                        capture_output=True).returncode == 0:
            return candidate
    return None


def _make(*args: str, cwd: Path = LAYER_SOURCE, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(cwd), *args], capture_output=True, text=True,
                          timeout=900, env=env)


@pytest.fixture(scope="module", params=sorted(ARCHITECTURES))
def layer(request, tmp_path_factory) -> tuple[str, Path]:
    """(architecture, the built layer's python/ folder)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    arch = request.param
    out = tmp_path_factory.mktemp(f"layer-{arch}")
    result = _make("build-SharedLayer", f"ARTIFACTS_DIR={out}", f"LAMBDA_ARCH={arch}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"on {arch}" in result.stdout
    return arch, out / "python"


# --------------------------------------------------------------------------- what the handlers import

def _module_file(name: str) -> Path | None:
    path = PACKAGE.parent.joinpath(*name.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else None


def _imports(path: Path, module: str) -> set[str]:
    """The package's modules ``path`` imports anywhere (top level or inside functions), and their parents."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names if _module_file(f"{name}.{a.name}"))
    ours = {n for n in found if n.split(".")[0] == "jenkins_dispatch"}
    return {".".join(n.split(".")[:i]) for n in ours for i in range(1, len(n.split(".")) + 1)}


def handler_closure() -> set[str]:
    """Every module of the package a handler can reach through its imports."""
    todo = [m for h in HANDLERS for m in _imports(ROOT / "functions" / h / "app.py", "app")]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        todo.extend(_imports(path, name))
    return seen


def test_no_handler_reaches_what_the_layer_leaves_out():
    reached = {str(_module_file(m).relative_to(PACKAGE)) for m in handler_closure()}
    for left_out in NEVER_IN_LAYER:
        assert not [r for r in reached if r == left_out or r.startswith(left_out + "/")], left_out
    assert {"custom_resource.py", "dispatching/dispatcher.py", "callbacks/webhook.py"} <= reached
    makefile = (LAYER_SOURCE / "Makefile").read_text()
    assert f"LAMBDA_NEVER_IMPORTS ?= {' '.join(NEVER_IN_LAYER)}" in makefile


# --------------------------------------------------------------------------- the built layers

def test_the_layer_ships_what_lambda_imports_and_nothing_else(layer):
    _arch, site = layer
    package = site / "jenkins_dispatch"
    for left_out in NEVER_IN_LAYER:
        assert not (package / left_out).exists(), f"{left_out} is in the layer"
    for module in handler_closure():
        relative = _module_file(module).relative_to(PACKAGE.parent)
        assert (site / relative).exists(), f"{relative} is missing from the layer"
    # The SQL the store reads at run time, and no stray source-tree files.
    assert list((package / "store" / "dialects" / "postgresql" / "migrations").glob("0001_*.sql"))
    assert list((package / "store" / "dialects" / "mysql" / "migrations").glob("0001_*.sql"))
    assert not list(package.rglob("__pycache__/*.cpython-311.pyc"))


def test_compiled_wheels_are_for_the_layer_architecture(layer):
    arch, site = layer
    machine, word = ARCHITECTURES[arch]
    platform_wheels = {}
    for wheel in site.glob("*.dist-info/WHEEL"):
        fields = [line.split(":", 1) for line in wheel.read_text().splitlines() if ":" in line]
        tags = [v.strip() for k, v in fields if k == "Tag"]
        if any(not t.endswith("-any") for t in tags):
            platform_wheels[wheel.parent.name] = tags
    assert {name.split("-")[0] for name in platform_wheels} >= {"charset_normalizer", "wrapt"}, platform_wheels
    for name, tags in platform_wheels.items():
        assert all(t.endswith(word) and "cp312" in t for t in tags), (name, tags)
    shared = list(site.rglob("*.so"))
    assert shared, "no compiled extension in the layer"
    for so in shared:
        header = so.read_bytes()[:20]
        assert header[:4] == b"\x7fELF", so
        assert int.from_bytes(header[18:20], "little") == machine, f"{so.name} is not an {arch} ELF"
        assert f"-{word}-linux-gnu" in so.name or ".abi3." in so.name or "cpython" not in so.name, so.name


def test_the_layer_carries_the_checked_in_rds_ca_bundle_where_the_package_looks(layer):
    _arch, site = layer
    from jenkins_dispatch.store import db

    expected_place = site / db.BUNDLED_RDS_CA.relative_to(PACKAGE.parent)
    assert expected_place.read_bytes() == (LAYER_SOURCE / "rds-ca-bundle.pem").read_bytes()


CHILD = """
import json, os, sys
runtime = {runtime!r}
sys.path[:0] = [{fn_dir!r}, {layer!r}]
sys.path.append(runtime)
import app
assert callable(app.lambda_handler)
from jenkins_dispatch.store import db
allowed = ({fn_dir!r}, {layer!r}, runtime, sys.base_prefix)
outside = sorted({{getattr(m, "__file__", None) or "" for m in list(sys.modules.values())}}
                 - {{""}})
outside = [f for f in outside if not os.path.abspath(f).startswith(tuple(os.path.abspath(a) for a in allowed))]
print(json.dumps({{"package": db.__file__, "bundle": db.BUNDLED_RDS_CA.exists(), "outside": outside}}))
"""


@pytest.mark.parametrize("handler", HANDLERS)
def test_every_handler_imports_from_the_built_layer_alone(layer, handler, tmp_path):
    arch, site = layer
    if arch != HOST:
        pytest.skip(f"no {arch} CPython 3.12 on this {HOST} machine: the wheel tags and ELF headers are checked")
    python = _python312()
    if python is None:
        pytest.skip("no Python 3.12 (the Lambda runtime's) on this machine")
    import boto3

    # What the Lambda runtime adds to the layer: boto3, botocore, s3transfer (pure Python).
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for name in ("boto3", "botocore", "s3transfer"):
        (runtime / name).symlink_to(Path(boto3.__file__).resolve().parents[1] / name)
    fn_dir = ROOT / "functions" / handler
    code = CHILD.format(runtime=str(runtime), fn_dir=str(fn_dir), layer=str(site))
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
           "POWERTOOLS_SERVICE_NAME": "jenkins-dispatch", "POWERTOOLS_METRICS_NAMESPACE": "JenkinsDispatch",
           "AWS_LAMBDA_FUNCTION_NAME": f"jenkins-dispatch-{handler}"}
    # -I -S: no site-packages, no user site, no PYTHON* variables: only the layer, the runtime and the stdlib.
    result = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["package"].startswith(str(site)), seen
    assert seen["bundle"] is True, "the layer's RDS CA bundle is not where store/db.py looks"
    assert seen["outside"] == [], seen["outside"]


# --------------------------------------------------------------------------- the CA bundle check

def _layer_copy(tmp_path: Path) -> Path:
    """The layer's build inputs in a scratch folder (the package itself is not needed to fail the check)."""
    copy = tmp_path / "shared"
    copy.mkdir()
    for name in ("Makefile", "requirements.lock", "rds-ca-bundle.pem", "rds-ca-bundle.pem.sha256"):
        shutil.copy2(LAYER_SOURCE / name, copy / name)
    (copy / "jenkins_dispatch").mkdir()
    return copy


def test_the_build_checks_the_bundle_before_anything_else(tmp_path):
    result = _make("check-rds-ca-bundle", cwd=_layer_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "matches rds-ca-bundle.pem.sha256" in result.stdout


@pytest.mark.parametrize("damage", ["altered", "missing", "checksum missing"])
def test_the_build_fails_loudly_without_the_right_bundle(tmp_path, damage):
    copy = _layer_copy(tmp_path)
    bundle = copy / "rds-ca-bundle.pem"
    if damage == "altered":
        text = bundle.read_bytes()
        bundle.write_bytes(text.replace(b"MII", b"MIJ", 1))  # one certificate byte changed
    elif damage == "missing":
        bundle.unlink()
    else:
        (copy / "rds-ca-bundle.pem.sha256").unlink()
    out = tmp_path / "out"
    result = _make("build-SharedLayer", f"ARTIFACTS_DIR={out}", cwd=copy)
    assert result.returncode != 0, result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("layer: ERROR")]
    assert len(errors) == 1, result.stderr
    assert {"altered": "SHA-256", "missing": "is missing", "checksum missing": "cannot be checked"}[damage] in errors[0]
    assert not out.exists(), "the build went on to download wheels"


def test_the_refresh_target_replaces_bundle_and_checksum_together_or_not_at_all(tmp_path):
    """`make rds-ca-refresh` (here from a file:// URL: AWS's trust store is not reachable from the test machines)
    writes a bundle the build then accepts; a download without certificates changes nothing."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    copy = _layer_copy(tmp_path)
    target = copy / "rds-ca-bundle.pem"
    source = tmp_path / "global-bundle.pem"
    certificates = target.read_text().split("-----END CERTIFICATE-----\n")
    source.write_text("-----END CERTIFICATE-----\n".join(certificates[:3]) + "-----END CERTIFICATE-----\n")

    def refresh(url: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "sam.mk"), "rds-ca-refresh",
                               f"RDS_CA_URL={url}", f"RDS_CA_BUNDLE={target}"], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)

    result = refresh(source.as_uri())
    assert result.returncode == 0, result.stderr
    assert "3 certificates" in result.stdout
    assert target.read_bytes() == source.read_bytes()
    assert _make("check-rds-ca-bundle", cwd=copy).returncode == 0
    before = (target.read_bytes(), (copy / "rds-ca-bundle.pem.sha256").read_bytes())
    junk = tmp_path / "junk.pem"
    junk.write_text("<html>not a bundle</html>\n")
    result = refresh(junk.as_uri())
    assert result.returncode != 0 and "no certificate" in result.stderr
    assert (target.read_bytes(), (copy / "rds-ca-bundle.pem.sha256").read_bytes()) == before
