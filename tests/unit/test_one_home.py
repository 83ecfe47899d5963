"""One home per rule (issue 22): each rule the package applies in several places is written once, and these
tests say where, so a second copy fails here rather than drifting apart from the first."""

from __future__ import annotations

import ast
from pathlib import Path

from jenkins_dispatch.config import DatabaseSettings, JenkinsSettings, Settings
from jenkins_dispatch.jenkins.client import MIN_POOLED_CONNECTIONS, jenkins_client

PACKAGE = Path(__file__).resolve().parents[2] / "layers/shared/jenkins_dispatch"


def _sources() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
            for path in sorted(PACKAGE.rglob("*.py"))]


def _calls(tree: ast.Module, name: str) -> int:
    """Calls of ``name`` (a bare name or an attribute) in ``tree``."""
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
               and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name))


def _homes_of_call(name: str) -> list[str]:
    return [module for module, tree in _sources() if _calls(tree, name)]


# --------------------------------------------------------------------------- the Jenkins client

JENKINS = JenkinsSettings(url="https://ci.example.com/jenkins", user="bot", api_token="t0ken", timeout_seconds=7.5,
                          verify_tls=False, search_window=123)


def test_a_jenkins_client_carries_every_jenkins_setting() -> None:
    with jenkins_client(JENKINS) as client:
        assert client.base_url == "https://ci.example.com/jenkins/"
        assert client.user == "bot"
        assert client._session.auth == ("bot", "t0ken")
        assert client.timeout_seconds == 7.5
        assert client._session.verify is False
        assert client.search_window == 123
        assert client._session.get_adapter("https://x/")._pool_maxsize == MIN_POOLED_CONNECTIONS


def test_a_dispatcher_client_is_pooled_for_its_trigger_threads() -> None:
    settings = Settings(database=DatabaseSettings(),
                        jenkins=JENKINS, max_parallel_triggers=40)
    with jenkins_client(settings) as client:
        assert client.search_window == 123
        assert client._session.get_adapter("https://x/")._pool_maxsize == 40


def test_only_the_jenkins_package_builds_a_jenkins_client() -> None:
    """The doctor once built its own and left out the search window and the pool: everyone uses jenkins_client."""
    assert _homes_of_call("JenkinsClient") == ["jenkins/client.py"]


# --------------------------------------------------------------------------- DISPATCH_ID and dispatch ids

def _string_constants(tree: ast.Module) -> list[str]:
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_the_dispatch_id_parameter_is_named_once() -> None:
    homes = [module for module, tree in _sources() if "DISPATCH_ID" in _string_constants(tree)]
    assert homes == ["jenkins/answers.py"]


def test_the_dispatch_id_format_is_written_once_in_python() -> None:
    """The SQL builds it (tests/integration/test_dispatch_ids.py checks that its output parses); Python only
    reads it, in store/dispatch_ids.py."""
    homes = [module for module, tree in _sources()
             if any(text.startswith(("jd-", "legacy-")) for text in _string_constants(tree))]
    assert homes == ["store/dispatch_ids.py"]
