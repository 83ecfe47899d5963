"""One source of truth for dependencies (pyproject.toml), the layer's requirements generated from it, a lock
that satisfies them, and a command line that needs neither boto3 nor the X-Ray SDK (issue 12 item 13)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from scripts.layer_requirements import LAYER_REQUIREMENTS, LOCK, layer_requirements, merged, requirement_text

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_layer_requirements_are_generated_from_pyproject():
    assert LAYER_REQUIREMENTS.read_text() == layer_requirements(PYPROJECT), (
        "layers/shared/requirements.txt disagrees with pyproject.toml: run `make lock`")


def test_every_dependency_has_a_lower_and_an_upper_bound():
    project = PYPROJECT["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    for requirement in requirements:
        if requirement.name == project["name"]:
            continue  # an extra that names others of this project
        operators = {spec.operator for spec in requirement.specifier}
        assert operators & {">=", ">", "~="} and operators & {"<", "<=", "~="}, str(requirement)


def test_the_cli_and_the_demo_need_no_aws_packages():
    project = PYPROJECT["project"]
    names = {Requirement(r).name for r in project["dependencies"] + project["optional-dependencies"]["demo"]}
    assert not names & {"boto3", "botocore", "aws-xray-sdk"}
    assert all(not Requirement(r).extras for r in project["dependencies"])  # powertools without [tracer]


def test_the_lock_pins_every_layer_requirement_within_its_bounds():
    pins = {}
    for line in LOCK.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split(" ")[0].split("==")
            pins[Requirement(name).name] = version
    for line in LAYER_REQUIREMENTS.read_text().splitlines():
        if line and not line.startswith("#"):
            requirement = Requirement(line)
            assert requirement.name in pins, f"{requirement.name} is not in the lock: run `make lock`"
            assert requirement.specifier.contains(pins[requirement.name]), (
                f"the lock pins {requirement.name}=={pins[requirement.name]}, outside {requirement}: run `make lock`")
    assert "--hash=sha256:" in LOCK.read_text()


@pytest.mark.parametrize(
    "requirements, expected",
    [
        (["b>=3,<4", "a<2,>=1"], ["a>=1,<2", "b>=3,<4"]),
        (["pkg>=3,<4", "pkg[tracer]>=3,<4"], ["pkg[tracer]>=3,<4"]),
        (["Pkg_Name>=1,<2", "pkg-name[y]>=1,<2", "pkg-name[x]>=1,<2", "other>=1,<2"], ["other>=1,<2", "pkg-name[x,y]>=1,<2"]),
    ],
)
def test_merged_requirements_combine_extras_of_one_package(requirements, expected):
    assert [requirement_text(r) for r in merged(requirements)] == expected


def test_merging_refuses_two_bounds_for_one_package():
    with pytest.raises(ValueError, match="pkg"):
        merged(["pkg>=3,<4", "pkg[tracer]>=3.1,<4"])


BLOCK_AWS = """
import runpy, sys
class BlockAws:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore", "aws_xray_sdk"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, BlockAws())
sys.argv = ["jenkins-dispatch", *sys.argv[1:]]
runpy.run_module("jenkins_dispatch.cli", run_name="__main__")
"""


def _cli_without_aws(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_SECRET_ARN")} | env
    return subprocess.run([sys.executable, "-c", BLOCK_AWS, *args], capture_output=True, text=True, timeout=60,
                          env=environment)


def test_the_cli_works_without_boto3_or_the_xray_sdk(database_url, queue):
    queue.enqueue("deploy", {"ENV": "prod"})
    proc = _cli_without_aws("stats", "--json", DATABASE_URL=database_url)
    assert proc.returncode == 0, proc.stderr
    assert '"pending"' in proc.stdout and proc.stderr == ""


def test_a_secret_arn_without_boto3_says_which_extra_to_install():
    proc = _cli_without_aws("stats", DB_SECRET_ARN="arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf",
                            DATABASE_URL="")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "jenkins-dispatch: error: DB_SECRET_ARN is set, but reading secrets from Secrets Manager needs boto3, "
        "which is not installed: pip install 'jenkins-dispatch[aws]'"
    ]


def test_iam_database_auth_without_boto3_says_which_extra_to_install():
    proc = _cli_without_aws("stats", DB_IAM_AUTH="true", DB_HOST="127.0.0.1", DB_USER="dispatch", AWS_REGION="us-east-1",
                            DATABASE_URL="")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "jenkins-dispatch: error: DB_IAM_AUTH=true needs boto3 to make a token, which is not installed: "
        "pip install 'jenkins-dispatch[aws]'"
    ]


def test_serve_the_dispatcher_and_the_webhook_load_without_aws_packages():
    """`serve` and `dispatch` run the same modules as the Lambdas: none of them may need boto3 or X-Ray to load."""
    load = BLOCK_AWS.split("sys.argv")[0] + (
        "import jenkins_dispatch.serve, jenkins_dispatch.dispatching.dispatcher, jenkins_dispatch.callbacks.webhook, jenkins_dispatch.operating.operator\n"
        "from jenkins_dispatch.observability import subsegment\n"
        "with subsegment('x'): pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'aws_xray_sdk')))\n")
    proc = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_lambda_handlers_need_nothing_the_layer_leaves_out():
    """waitress, Jinja2 and prometheus-client stay out of the layer (scripts/layer_requirements.py): the three
    handlers must load, and the webhook answer, with them unimportable."""
    from scripts.layer_requirements import OUTSIDE_LAMBDA_ONLY

    blocked = sorted(name.replace("-", "_") for name in OUTSIDE_LAMBDA_ONLY)
    load = (
        "import json, runpy, sys\n"
        f"BLOCKED = {blocked!r}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "handlers = {name: runpy.run_path(f'functions/{name}/app.py') for name in ('dispatcher', 'webhook', 'migrate')}\n"
        "event = json.load(open('events/webhook-get.json'))\n"
        "print(handlers['webhook']['handle_http_event'](event)['statusCode'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED))\n")
    proc = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, WEBHOOK_SECRET="example-webhook-secret"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[-3:] == ["405", "[]", ""], proc.stdout


def test_the_wheel_ships_the_package_alone(tmp_path):
    """`pip install jenkins-dispatch` gets jenkins_dispatch and its metadata: not the Jenkins emulator (setup.py
    adds it to editable installs only), the demo, the tests or the scripts. Built from a copy of what the build
    reads, so the checkout is left as it was."""
    source = tmp_path / "source"
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "layers/shared/jenkins_dispatch", source / "layers/shared/jenkins_dispatch", ignore=ignore)
    shutil.copytree(ROOT / "jenkins_emulator", source / "jenkins_emulator", ignore=ignore)  # there, and left out
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [wheel] = (tmp_path / "dist").glob("jenkins_dispatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        entry_points = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")))
    assert {top for top in tops if not top.endswith(".dist-info")} == {"jenkins_dispatch"}, sorted(tops)
    assert b"jenkins-dispatch = jenkins_dispatch.cli:main" in entry_points


def test_a_development_install_runs_the_emulator_from_any_folder(tmp_path):
    """docs/development.md's promise: `pip install -e .[dev]` installs the emulator (this suite's own environment is such an
    install): `python -m jenkins_emulator --port 0` prints its base URL first, run away from the checkout."""
    proc = subprocess.Popen([sys.executable, "-m", "jenkins_emulator", "--port", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert first.startswith("http://127.0.0.1:") and first.strip().endswith("/"), first
