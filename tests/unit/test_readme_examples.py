"""scripts/readme_examples.py without running anything: how examples are parsed and what normalising hides."""

from __future__ import annotations

import pytest

from scripts.readme_examples import normalise, parse_examples


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
