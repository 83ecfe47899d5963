"""The README's console examples are a real run (issue 12 item 10): scripts/readme_examples.py repeats them."""

from __future__ import annotations

import pytest

from scripts.readme_examples import README, differences, normalise, parse_examples, rewritten, run_examples

from ..pg_server import postgres_server, scratch_database


@pytest.fixture
def fresh_database_url():
    """An empty database: the examples start with `migrate`, whose output names what it applied."""
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_readme") as url:
        yield url


def test_the_readme_examples_print_what_the_readme_shows(fresh_database_url):
    examples = parse_examples(README.read_text())
    assert {"setup", "enqueue", "dispatch", "later"} <= {example.name for example in examples}
    report = differences(examples, run_examples(examples, fresh_database_url))
    assert not report, "README examples drifted (python -m scripts.readme_examples --write):\n" + "\n\n".join(report)


DRIFTED = """\
<!-- example: drift -->
```console
$ export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres
$ echo "job $(( 0 + 1 )) in $DATABASE_URL"
job 103 in postgresql://postgres@127.0.0.1:5432/postgres
```
"""


def test_a_drifted_example_is_reported_and_rewritten():
    examples = parse_examples(DRIFTED)
    printed = run_examples(examples, "postgresql://u@db.invalid/scratch")  # mapped back to what the README shows
    report = differences(examples, printed)
    assert len(report) == 1 and "-job 103 in postgresql://postgres@127.0.0.1:5432/postgres" in report[0]
    assert "+job 1 in postgresql://postgres@127.0.0.1:5432/postgres" in report[0]
    assert "\njob 1 in postgresql://postgres@127.0.0.1:5432/postgres\n```" in rewritten(DRIFTED, examples, printed)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("6   nightly   pending  2026-11-30 20:37:05  -", "6 nightly pending <time> -"),
        ("dispatch_id          jd-1-a6a9c8f6b3", "dispatch_id jd-1-<hex>"),
        ('  "duration_ms": 179,', ' "duration_ms": <ms>,'),
        ("pending 2 (due 1)  oldest pending 2s", "pending 2 (due 1) oldest pending <age>"),
        ("since 2026-11-30T15:24:01+00:00 after 1.5s", "since <time> after <age>"),
        ("enqueued job 12", "enqueued job 12"),
        ("applied 0001_queue, 0002_wakeup", "applied 0001_queue, 0002_wakeup"),
    ],
)
def test_normalise_hides_only_what_changes_from_run_to_run(line, expected):
    assert normalise(line) == expected


def test_parse_examples_reads_commands_and_their_output():
    text = "intro\n<!-- example: two -->\n```console\n$ a\nout 1\nout 2\n$ b\n```\n```console\n$ unmarked\n```\n"
    (example,) = parse_examples(text)
    assert example.name == "two" and [(s.command, s.output) for s in example.steps] == [("a", ["out 1", "out 2"]), ("b", [])]
    with pytest.raises(ValueError, match="not followed by a ```console block"):
        parse_examples("<!-- example: lost -->\ntext\n")
