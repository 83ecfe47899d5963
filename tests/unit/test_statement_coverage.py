"""The statement coverage's decisions (tests/statement_coverage.py): which run is the whole suite, and what a
record of (engine, statement) run says. Pure: tests/system/test_statement_coverage.py runs the plugin itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.statement_coverage import covers_whole_suite, verdict

ROOT = Path("/repo")
TESTS = ROOT / "tests"


@pytest.mark.parametrize("args, invocation_dir, whole", [
    (["tests"], ROOT, True),  # `pytest` (testpaths) and `pytest tests`
    (["."], TESTS, True),
    (["/repo/tests/"], Path("/elsewhere"), True),
    (["tests/unit"], ROOT, False),
    (["tests/integration/test_queue.py"], ROOT, False),
    (["tests/integration/test_queue.py::test_enqueue"], ROOT, False),
    (["tests", "tests/unit"], ROOT, False),  # the same folder twice: its tests run once, but say what was meant
    (["tests", "tests/unit/test_db.py::test_x"], ROOT, False),
    (["."], ROOT, False),  # the repository: not the suite's folder
    ([], ROOT, False),
])
def test_only_the_tests_folder_itself_is_the_whole_suite(args, invocation_dir, whole) -> None:
    assert covers_whole_suite(args, invocation_dir, [TESTS]) is whole


DEFINED = {"postgresql": {"a", "b", "c"}, "mysql": {"a", "b", "c"}}


@pytest.mark.parametrize("ran, declared, checked, summary, problems", [
    ({("postgresql", n) for n in "abc"} | {("mysql", n) for n in "abc"}, {}, ["postgresql", "mysql"],
     "statements: 3/3 on postgresql, 3/3 on mysql", []),
    ({("postgresql", n) for n in "abc"} | {("mysql", "a")}, {}, ["postgresql", "mysql"],
     "statements: 3/3 on postgresql, 1/3 on mysql", ["never ran on mysql: b, c"]),
    # A name ran on the other engine only: it still never ran here.
    ({("postgresql", "a"), ("postgresql", "b"), ("mysql", "c")}, {}, ["postgresql", "mysql"],
     "statements: 2/3 on postgresql, 1/3 on mysql", ["never ran on postgresql: c", "never ran on mysql: a, b"]),
    ({("postgresql", n) for n in "abc"} | {("mysql", "a"), ("mysql", "b")}, {"mysql": {"c": "why"}},
     ["postgresql", "mysql"], "statements: 3/3 on postgresql, 2/3 on mysql (1 declared not run there)", []),
    # A declaration the run proves untrue fails too.
    ({("postgresql", n) for n in "abc"} | {("mysql", n) for n in "abc"}, {"mysql": {"c": "why"}},
     ["postgresql", "mysql"], "statements: 3/3 on postgresql, 3/3 on mysql (1 declared not run there)",
     ["declared not run on mysql, yet ran there: c"]),
    # An engine not checked (no server, or part of the suite) is counted, never blamed.
    ({("postgresql", n) for n in "abc"}, {}, ["postgresql"], "statements: 3/3 on postgresql, 0/3 on mysql", []),
    ({("postgresql", "a")}, {}, [], "statements: 1/3 on postgresql, 0/3 on mysql", []),
    # A name no engine defines (a statement renamed since) is not counted.
    ({("postgresql", n) for n in "abcz"}, {}, ["postgresql"], "statements: 3/3 on postgresql, 0/3 on mysql", []),
])
def test_the_verdict_names_each_statement_never_run_on_its_engine(ran, declared, checked, summary, problems) -> None:
    assert verdict(ran, DEFINED, declared, checked) == (summary, problems)
