"""The one packaging rule pyproject.toml cannot state (everything else is there).

The Jenkins emulator (jenkins_emulator/) is for development: an editable install — `pip install -e .[dev]` (docs/development.md)
and `make install` — gets it, so `python -m jenkins_emulator` works from any folder; a built wheel
(`pip install jenkins-dispatch`) never carries it. setuptools builds an editable install through its
``editable_wheel`` command, and a wheel through ``bdist_wheel``: that is how the two are told apart.
tests/system/test_dependencies.py checks both.
"""

import sys

from setuptools import find_packages, setup

packages = find_packages("layers/shared", include=["jenkins_dispatch", "jenkins_dispatch.*"])
package_dir = {"": "layers/shared"}
if "editable_wheel" in sys.argv:
    packages.append("jenkins_emulator")
    package_dir["jenkins_emulator"] = "jenkins_emulator"

setup(packages=packages, package_dir=package_dir)
