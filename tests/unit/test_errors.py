"""errors.py is the one home of the package's error classes: every public exception class defined anywhere in the
package is defined there, derives from DispatchError, and says what to do about it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import jenkins_dispatch
from jenkins_dispatch import errors
from jenkins_dispatch.errors import OPERATION_FAILED, DispatchError


def _modules():
    for info in pkgutil.walk_packages(jenkins_dispatch.__path__, "jenkins_dispatch."):
        yield importlib.import_module(info.name)


def _exceptions_defined_in(module) -> list[type[BaseException]]:
    return [value for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__]


def test_every_public_exception_class_is_defined_in_errors_py() -> None:
    elsewhere = [f"{cls.__module__}.{cls.__name__}" for module in _modules() if module is not errors
                 for cls in _exceptions_defined_in(module) if not cls.__name__.startswith("_")]
    assert elsewhere == []


ERROR_CLASSES = _exceptions_defined_in(errors)


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=[cls.__name__ for cls in ERROR_CLASSES])
def test_each_error_derives_from_the_base_and_says_what_to_do(cls) -> None:
    assert issubclass(cls, DispatchError)
    doc = " ".join((cls.__doc__ or "").split())
    # The house style: what happened, a colon, what to do about it.
    assert ":" in doc and len(doc) > 40, f"{cls.__name__}: say what the user should do"


def test_private_control_flow_exceptions_are_named_in_errors_py() -> None:
    """The exceptions left outside errors.py are private to their module, and errors.py says which and why."""
    private = [cls.__name__ for module in _modules() if module is not errors for cls in _exceptions_defined_in(module)]
    assert private and all(name.startswith("_") and name in errors.__doc__ for name in private), private


@pytest.mark.parametrize(("error", "operation_failed"), [
    (errors.DatabaseUnavailable("db down"), True),
    (errors.JenkinsAuthRejected("401"), True),
    (errors.SearchInconclusive("too many builds"), True),
    (errors.InvalidJobPath("a//b"), False),
    (errors.RejectedNotification("no body"), False),
    (errors.NotFound("no job 7"), False),
    (errors.ConfigError("LEASE_SECONDS"), False),
])
def test_the_cli_exit_code_follows_the_class(error, operation_failed) -> None:
    """exit 1 (the operation failed) for OPERATION_FAILED, exit 2 (bad input, nothing changed) for the rest."""
    assert isinstance(error, OPERATION_FAILED) is operation_failed
    assert isinstance(error, DispatchError)


def test_an_invalid_job_path_is_still_a_value_error() -> None:
    with pytest.raises(ValueError):
        raise errors.InvalidJobPath("a//b")
