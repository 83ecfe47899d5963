"""Which named statement ran on which engine: a run of the whole suite fails unless every statement of each
engine's SQL ran on that engine, or its block says why it never does there (``-- not run on this engine: WHY``,
read by ``store/statements.py``).

Most statements differ in text between engines, so a statement only ever run on PostgreSQL is MySQL SQL that no
test has sent to a server. ``tests/conftest.py`` registers ``StatementCoverage`` in every pytest process. It wraps
``run`` of each engine's session class, and ``Session.transaction`` (whose opening statement PostgreSQL sends in
one text with its BEGIN), in the test process only: the package's code is unchanged and costs nothing more outside
the tests. A statement counts once the server ran it without an error, and is known by its name (its text is
looked up among the engine's loaded statements, whichever file or class holds it).

Under xdist each worker records its own and hands them over in ``workeroutput``; the controller unites them.
Statements run by the processes a test starts (the CLI, ``serve``, racing children) are not seen: a statement only
such a process runs on an engine needs a test that runs it in the test process too.

"The whole suite": what a bare ``pytest`` runs, its ``testpaths`` (``pytest``, ``pytest tests``, ``make test``),
nothing deselected (``-k``, ``-m``, ``--lf``), not stopped early (``-x``). An engine without a server here
(MySQL, whose tests are then skipped) is not checked. Any run that recorded a statement ends with one line:
``statements: 79/80 on mysql (1 declared not run there), 80/80 on postgresql``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from jenkins_dispatch.store import dialects, statements
from jenkins_dispatch.store.session import Session

from .engines import has_server

OUTPUT_KEY = "statements_ran"  # a worker's workeroutput entry: {"ran": ["engine name", ...], "deselected": N}
DECLARATION = "-- not run on this engine: WHY"
PLUGIN_NAME = "statement_coverage"


def covers_whole_suite(args: Iterable[str], invocation_dir: Path, suite: Iterable[Path]) -> bool:
    """Whether the command line's ``args`` name the ``suite``'s folders themselves, and nothing else or below."""
    named = {None if "::" in arg else (invocation_dir / arg).resolve() for arg in args}
    return named == {folder.resolve() for folder in suite}


def suite_folders(config: pytest.Config) -> list[Path]:
    """What a bare ``pytest`` runs: the ``testpaths`` of the configuration (``tests``), else the rootdir."""
    return [config.rootpath / path for path in config.getini("testpaths")] or [config.rootpath]


def verdict(ran: Collection[tuple[str, str]], defined: Mapping[str, Collection[str]],
            declared: Mapping[str, Mapping[str, str]], checked: Collection[str]) -> tuple[str, list[str]]:
    """The summary line and the problems found (none: every ``checked`` engine covered). ``defined``: each
    engine's statement names; ``declared``: those its SQL says it never runs there, with why."""
    parts, problems = [], []
    for engine, names in defined.items():
        ran_here = {name for dialect, name in ran if dialect == engine} & set(names)
        never_run = set(declared.get(engine, {}))
        part = f"{len(ran_here)}/{len(names)} on {engine}"
        parts.append(part + (f" ({len(never_run)} declared not run there)" if never_run else ""))
        if engine not in checked:
            continue
        missing = sorted(set(names) - ran_here - never_run)
        if missing:
            problems.append(f"never ran on {engine}: {', '.join(missing)}")
        untrue = sorted(ran_here & never_run)
        if untrue:
            problems.append(f"declared not run on {engine}, yet ran there: {', '.join(untrue)}")
    return "statements: " + ", ".join(parts), problems


class StatementCoverage:
    """One pytest process's record of (engine, statement name) run, and, in the process that reports, the verdict."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.ran: set[tuple[str, str]] = set()
        self.deselected = 0
        self.report: list[str] = []
        self._restore: list[Callable[[], None]] = []
        self._names = {engine: {sql: name for name, sql in statements.load(engine).items()}
                       for engine in dialects.engines()}
        for engine in dialects.engines():
            self._wrap(dialects.session_class(engine), "run", self._recording_run)
        self._wrap(Session, "transaction", self._recording_transaction)

    # ------------------------------------------------------------------ recording
    def _wrap(self, owner: type, attribute: str, wrapper: Callable[[Callable], Callable]) -> None:
        original = owner.__dict__[attribute]
        setattr(owner, attribute, functools.wraps(original)(wrapper(original)))
        self._restore.append(lambda: setattr(owner, attribute, original))

    def _record(self, session: Session, sql: str) -> None:
        name = self._names[session.dialect].get(sql)
        if name is not None:
            self.ran.add((session.dialect, name))

    def _recording_run(self, original: Callable) -> Callable:
        def run(session: Session, sql: str, **params):
            rows = original(session, sql, **params)
            self._record(session, sql)
            return rows
        return run

    def _recording_transaction(self, original: Callable) -> Callable:
        @contextmanager
        def transaction(session: Session, opening: str | None = None) -> Iterator[Session]:
            with original(session, opening) as inside:
                if opening is not None:  # BEGIN and its opening went through
                    self._record(session, opening)
                yield inside
        return transaction

    # ------------------------------------------------------------------ hooks
    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """xdist's controller: a worker's record joins ours."""
        output = getattr(node, "workeroutput", {}).get(OUTPUT_KEY)
        if output is not None:
            self.ran |= {tuple(entry.split(" ", 1)) for entry in output["ran"]}
            self.deselected += output["deselected"]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: the controller reports
            workeroutput[OUTPUT_KEY] = {"ran": sorted(f"{engine} {name}" for engine, name in self.ran),
                                        "deselected": self.deselected}
            return
        if not self.ran:
            return  # nothing touched a database (tests/unit): nothing to say
        maxfail = self.config.option.maxfail
        whole = (covers_whole_suite(self.config.args, self.config.invocation_params.dir, suite_folders(self.config))
                 and not self.deselected and not (maxfail and session.testsfailed >= maxfail)
                 and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED))
        engines = dialects.engines()
        checked = [engine for engine in engines if has_server(engine)] if whole else []
        summary, problems = verdict(
            self.ran, {engine: set(statements.load(engine)) for engine in engines},
            {engine: statements.not_run(statements.load(engine)) for engine in engines}, checked)
        unchecked = [engine for engine in engines if engine not in checked]
        if not whole:
            summary += " (part of the suite ran: not checked)"
        elif unchecked:
            summary += f" ({', '.join(unchecked)} not checked: no server)"
        self.report = [summary]
        if problems:
            self.report += [f"statement coverage: {problem}" for problem in problems]
            self.report.append("statement coverage: run each in a test on that engine, or say why it never runs "
                               f"there in a line above its SQL: {DECLARATION}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for line in self.report:
            terminalreporter.write_line(line, red=line.startswith("statement coverage"))

    def pytest_unconfigure(self) -> None:
        for restore in reversed(self._restore):
            restore()
