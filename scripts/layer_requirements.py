"""The Lambda layer's requirements, generated from pyproject.toml (the one place dependencies are declared).

    python -m scripts.layer_requirements --check    exit 1 if layers/shared/requirements.txt is stale
    python -m scripts.layer_requirements --write    regenerate it (`make lock` does this, then locks it)

The layer needs the package's own dependencies plus its ``aws`` extra, except what the Lambda runtime already
has (boto3) and what only the long-running commands use (prometheus-client for `serve`, jinja2 for `ui`, waitress
for both); requirements that name one package twice (``aws-lambda-powertools`` and
``aws-lambda-powertools[tracer]``) become one line with the extras combined.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LAYER_REQUIREMENTS = ROOT / "layers/shared/requirements.txt"
LOCK = ROOT / "layers/shared/requirements.lock"

# Shipped with every Python Lambda runtime; the layer's build also strips botocore, which aws-xray-sdk pulls in.
PROVIDED_BY_LAMBDA = {"boto3"}
# Used only by the commands that run outside Lambda: `serve`'s GET /metrics (the Lambda functions publish EMF
# instead), the web page `ui` (its templates), and the HTTP server both run (API Gateway is Lambda's).
OUTSIDE_LAMBDA_ONLY = {"prometheus-client", "jinja2", "waitress"}

HEADER = """\
# Runtime dependencies of the shared layer. GENERATED from pyproject.toml (dependencies + the "aws" extra,
# less what the Lambda runtime provides) by `make lock`: edit pyproject.toml, not this file.
# The layer is built from requirements.lock, which pins these (and what they need) for Python 3.12.
"""


def merged(requirements: Iterable[str]) -> list[Requirement]:
    """One requirement per package, extras combined, sorted by name; two different bounds for one package is an error."""
    by_name: dict[str, Requirement] = {}
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        requirement.name = name
        known = by_name.get(name)
        if known is None:
            by_name[name] = requirement
            continue
        if known.specifier != requirement.specifier:
            raise ValueError(f"{name} has two different bounds in pyproject.toml: {known.specifier} and {requirement.specifier}")
        known.extras |= requirement.extras
    return [by_name[name] for name in sorted(by_name)]


def requirement_text(requirement: Requirement) -> str:
    """``name[extras]>=low,<high``: lower bounds first, as people write them."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    bounds = sorted((str(spec) for spec in requirement.specifier), key=lambda spec: (not spec.startswith(">"), spec))
    return requirement.name + extras + ",".join(bounds)


def layer_requirements(pyproject: dict) -> str:
    """The text of layers/shared/requirements.txt for this pyproject (parsed)."""
    project = pyproject["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["aws"]
    lines = [requirement_text(r) for r in merged(wanted) if r.name not in PROVIDED_BY_LAMBDA | OUTSIDE_LAMBDA_ONLY]
    return HEADER + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.layer_requirements", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if the file disagrees with pyproject.toml")
    mode.add_argument("--write", action="store_true", help="regenerate the file")
    args = parser.parse_args(argv)
    text = layer_requirements(tomllib.loads(PYPROJECT.read_text()))
    if args.write:
        LAYER_REQUIREMENTS.write_text(text)
        return 0
    if LAYER_REQUIREMENTS.read_text() != text:
        print(f"{LAYER_REQUIREMENTS.relative_to(ROOT)} disagrees with pyproject.toml: run `make lock`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
