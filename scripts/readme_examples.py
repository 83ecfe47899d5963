"""The documentation's console examples, run for real, so they cannot drift from what the commands print.

They live in docs/operating.md (the README links to them; it kept its name from when they lived in README.md).

    python -m scripts.readme_examples --check    run them and compare; exit 1 with a diff when they differ
    python -m scripts.readme_examples --write    run them and put what they printed into docs/operating.md

A marked example is a fenced ``console`` block on the line after ``<!-- example: NAME -->``. Its ``$ `` lines
are commands, run in order by bash, every block sharing one fresh database (on DATABASE_URL's server, else
127.0.0.1:5432, else an embedded PostgreSQL) and the environment below; the lines under a command are what it
prints (stdout and stderr). Special commands:

* ``export NAME=VALUE ...`` sets variables for the commands after it. DATABASE_URL is replaced by the fresh
  database, and a URL equal to an emulator's shown URL by that emulator's real one.
* ``COMMAND &`` starts COMMAND in the background (``--port N`` becomes ``--port 0``) and takes the lines it
  prints at once as its output; its first line is its URL, shown as ``http://127.0.0.1:N/``.

Before comparing, both sides are normalised: timestamps, ages, durations and the random half of dispatch ids
become placeholders and runs of spaces become one. To add an example, mark a console block; that is all.
"""

from __future__ import annotations

import argparse
import difflib
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_FILE = ROOT / "docs" / "operating.md"
MARK = re.compile(r"^<!-- example: ([\w-]+) -->$")
SHOWN_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
COMMAND_TIMEOUT_SECONDS = 60

NORMALISERS = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"\d{4}-[\d:T -]*…"), "<time>…"),  # a time `ls` cut short to fit its line
    (re.compile(r"\b(jd-\d+-)[0-9a-f]{6,}\b"), r"\1<hex>"),
    (re.compile(r'("duration_ms": )\d+'), r"\1<ms>"),
    (re.compile(r"(?<![\w.])\d+(\.\d+)?(ms|s|m|h|d)\b"), "<age>"),
    (re.compile(r"\bPostgreSQL \d+(\.\d+)*"), "PostgreSQL <version>"),
    (re.compile(r"\bby [\w.-]+@[\w.-]+"), "by <user>@<host>"),  # who paused: the machine's user and name
    (re.compile(r" {2,}"), " "),
]


@dataclass
class Step:
    command: str
    output: list[str] = field(default_factory=list)


@dataclass
class Example:
    name: str
    first_line: int  # index in the document's lines of the block's first line inside the fence
    end_line: int  # index of the closing fence
    steps: list[Step]


def parse_examples(text: str) -> list[Example]:
    """Every marked console block of ``text``, with its commands and the output shown under each."""
    lines = text.split("\n")
    examples = []
    for index, line in enumerate(lines):
        mark = MARK.match(line.strip())
        if not mark:
            continue
        if index + 1 >= len(lines) or lines[index + 1].strip() != "```console":
            raise ValueError(f"line {index + 1}: example {mark.group(1)} is not followed by a ```console block")
        end = next(i for i in range(index + 2, len(lines)) if lines[i].strip() == "```")
        steps: list[Step] = []
        for body in lines[index + 2:end]:
            if body.startswith("$ "):
                steps.append(Step(body[2:]))
            elif steps:
                steps[-1].output.append(body)
            elif body.strip():
                raise ValueError(f"line {index + 3}: example {mark.group(1)} shows output before any command")
        examples.append(Example(mark.group(1), index + 2, end, steps))
    return examples


def normalise(line: str) -> str:
    """What may differ from run to run (times, ages, random ids) replaced by placeholders."""
    for pattern, replacement in NORMALISERS:
        line = pattern.sub(replacement, line)
    return line.rstrip()


class Session:
    """Runs example commands one after the other in one environment; background processes end with it."""

    def __init__(self, database_url: str):
        self.database_url = database_url
        bin_dir = str(Path(sys.executable).parent)  # this interpreter's `python` and `jenkins-dispatch` first
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "JENKINS_", "DB_"))}
        self.env["PATH"] = bin_dir + os.pathsep + self.env.get("PATH", "")
        self.shown: dict[str, str] = {}  # real text → what the document shows instead
        self.background: list[subprocess.Popen] = []

    def run(self, command: str) -> list[str]:
        if command.startswith("export "):
            self._export(command)
            return []
        if command.rstrip().split("#")[0].rstrip().endswith("&"):
            return self._start(command.split("#")[0].rstrip()[:-1])
        proc = subprocess.run(["bash", "-c", command], env=self.env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_SECONDS)
        return [self._as_shown(line) for line in proc.stdout.splitlines()]

    def _export(self, command: str) -> None:
        real_urls = {shown: real for real, shown in self.shown.items()}
        for assignment in shlex.split(command, comments=True)[1:]:
            name, _, value = assignment.partition("=")
            if name == "DATABASE_URL":
                self.shown[self.database_url] = value
                real, shown = urlsplit(self.database_url), urlsplit(value)
                # `doctor` names the server and the database on their own, not as a URL.
                self.shown[f"{real.hostname}:{real.port or 5432} (database {real.path.lstrip('/')})"] = (
                    f"{shown.hostname}:{shown.port or 5432} (database {shown.path.lstrip('/')})")
                value = self.database_url
            self.env[name] = real_urls.get(value, value)

    def _start(self, command: str) -> list[str]:
        shown_port = re.search(r"--port (\d+)", command)
        proc = subprocess.Popen(["bash", "-c", "exec " + re.sub(r"--port \d+", "--port 0", command)], env=self.env,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.background.append(proc)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in proc.stdout], daemon=True).start()
        printed = [lines.get(timeout=COMMAND_TIMEOUT_SECONDS)]
        if shown_port and printed[0].startswith("http://"):
            self.shown[printed[0]] = f"http://127.0.0.1:{shown_port.group(1)}/"
        while True:
            try:
                printed.append(lines.get(timeout=0.3))
            except queue.Empty:
                return [self._as_shown(line) for line in printed]

    def _as_shown(self, line: str) -> str:
        for real, shown in self.shown.items():
            line = line.replace(real, shown).replace(real.rstrip("/"), shown.rstrip("/"))
        return line

    def close(self) -> None:
        for proc in self.background:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_examples(examples: list[Example], database_url: str) -> list[list[list[str]]]:
    """What each command of each example printed, as the document would show it."""
    session = Session(database_url)
    try:
        return [[session.run(step.command) for step in example.steps] for example in examples]
    finally:
        session.close()


def differences(examples: list[Example], printed: list[list[list[str]]]) -> list[str]:
    """A unified diff per example whose normalised output differs from what the document shows."""
    report = []
    for example, outputs in zip(examples, printed, strict=True):
        shown = [normalise(line) for step in example.steps for line in [f"$ {step.command}", *step.output]]
        real = [normalise(line) for step, out in zip(example.steps, outputs, strict=True)
                for line in [f"$ {step.command}", *out]]
        if shown != real:
            report.append("\n".join(difflib.unified_diff(shown, real, f"{EXAMPLES_FILE.name} ({example.name})", "real run",
                                                         lineterm="")))
    return report


def rewritten(text: str, examples: list[Example], printed: list[list[list[str]]]) -> str:
    """``text`` with each example's output replaced by what its commands printed."""
    lines = text.split("\n")
    for example, outputs in sorted(zip(examples, printed, strict=True), key=lambda pair: -pair[0].first_line):
        body = [line for step, out in zip(example.steps, outputs, strict=True) for line in [f"$ {step.command}", *out]]
        lines[example.first_line:example.end_line] = body
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.readme_examples", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 (with a diff) if an example differs")
    mode.add_argument("--write", action="store_true", help=f"put the real output into {EXAMPLES_FILE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.pg_server import postgres_server, scratch_database

    text = EXAMPLES_FILE.read_text()
    examples = parse_examples(text)
    with ExitStack() as stack:
        admin_url, _ = stack.enter_context(postgres_server())
        printed = run_examples(examples, stack.enter_context(scratch_database(admin_url, prefix="jd_readme")))
    if args.write:
        EXAMPLES_FILE.write_text(rewritten(text, examples, printed))
        return 0
    report = differences(examples, printed)
    print("\n\n".join(report) or f"{EXAMPLES_FILE.relative_to(ROOT)}: {len(examples)} examples match a real run", file=sys.stderr if report else sys.stdout)
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
