"""The demo's summary of errors (issue 36): grouped by kind, the deliberate ones said to be, a surprise first."""

from __future__ import annotations

import pytest

from demo.__main__ import ErrorGroup, error_groups


def row(error: str, on_purpose: bool = True, controller: str = "default") -> dict:
    return {"LAST ERROR": error, "on_purpose": on_purpose, "CONTROLLER": controller}


FAILED = "Jenkins build #{} finished FAILURE"
UNKNOWN = "Jenkins has no job 'demo/does-not-exist' (404): check the job path"


@pytest.mark.parametrize(("rows", "several", "groups"), [
    # Five builds that failed alike were five lines "error ×1: Jenkins build #6 finished FAILURE", …
    ([row(FAILED.format(n)) for n in (6, 9, 12, 15, 18)] + [row(UNKNOWN), row("")], False,
     [ErrorGroup("Jenkins build #N finished FAILURE", 5, True), ErrorGroup(UNKNOWN, 1, True)]),
    # ... a failure nobody meant comes first, however rare.
    ([row(FAILED.format(n)) for n in (6, 9)] + [row("HTTP 500 from Jenkins", on_purpose=False)], False,
     [ErrorGroup("HTTP 500 from Jenkins", 1, False), ErrorGroup("Jenkins build #N finished FAILURE", 2, True)]),
    # One row of a kind that was not meant makes the kind a surprise.
    ([row(FAILED.format(6)), row(FAILED.format(7), on_purpose=False)], False,
     [ErrorGroup("Jenkins build #N finished FAILURE", 2, False)]),
    # Two controllers: each controller's builds are their own.
    ([row(FAILED.format(6)), row(FAILED.format(6), controller="eu"), row(FAILED.format(8), controller="eu")], True,
     [ErrorGroup("Jenkins build #N finished FAILURE", 2, True, "eu"),
      ErrorGroup("Jenkins build #N finished FAILURE", 1, True, "default")]),
])
def test_errors_are_grouped_by_kind_and_the_deliberate_ones_said_to_be(rows, several, groups) -> None:
    assert error_groups(rows, several) == groups


def test_a_group_reads_as_one_line() -> None:
    assert ErrorGroup("Jenkins build #N finished FAILURE", 5, True, "eu").line() == \
        "error ×5 on eu: Jenkins build #N finished FAILURE  (on purpose: part of the demo)"
    assert ErrorGroup("HTTP 500", 1, False).line() == "error ×1: HTTP 500"
