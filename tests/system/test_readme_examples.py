"""The documentation's console examples (docs/operating.md, linked from the README) are a real run (issue 12 item 10):
scripts/readme_examples.py repeats them."""

from __future__ import annotations

import pytest

from scripts.readme_examples import EXAMPLES_FILE, differences, parse_examples, rewritten, run_examples

from ..pg_server import postgres_server, scratch_database


@pytest.fixture
def fresh_database_url():
    """An empty database: the examples start with `migrate`, whose output names what it applied."""
    with postgres_server() as (admin_url, _), scratch_database(admin_url, prefix="jd_readme") as url:
        yield url


DRIFTED = """\
<!-- example: drift -->
```console
$ export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres
$ echo "job $(( 0 + 1 )) in $DATABASE_URL"
job 103 in postgresql://postgres@127.0.0.1:5432/postgres
```
"""


def test_the_documented_examples_print_what_the_document_shows(fresh_database_url):
    examples = parse_examples(EXAMPLES_FILE.read_text())
    assert {"setup", "enqueue", "dispatch", "later", "steer", "doctor"} <= {example.name for example in examples}
    report = differences(examples, run_examples(examples, fresh_database_url))
    assert not report, "docs/operating.md examples drifted (python -m scripts.readme_examples --write):\n" + "\n\n".join(report)


def test_a_drifted_example_is_reported_and_rewritten():
    examples = parse_examples(DRIFTED)
    printed = run_examples(examples, "postgresql://u@db.invalid/scratch")  # mapped back to what the document shows
    report = differences(examples, printed)
    assert len(report) == 1 and "-job 103 in postgresql://postgres@127.0.0.1:5432/postgres" in report[0]
    assert "+job 1 in postgresql://postgres@127.0.0.1:5432/postgres" in report[0]
    assert "\njob 1 in postgresql://postgres@127.0.0.1:5432/postgres\n```" in rewritten(DRIFTED, examples, printed)
