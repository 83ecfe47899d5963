"""The rate lever's pure parts: reading a rate from the form, what its confirmation says, and the overview's jobs
with their rates."""

from __future__ import annotations

import pytest

from jenkins_dispatch.errors import InvalidInput
from jenkins_dispatch.operating.overview import other_controllers_limits, with_rates
from jenkins_dispatch.store.queue import RateWindow
from jenkins_dispatch.ui import forms
from jenkins_dispatch.ui.pages import rate_change


@pytest.mark.parametrize(("text", "expected"), [(None, None), ("", None), ("  ", None), ("1", 1), (" 10 ", 10),
                                                ("999999999", 999_999_999), ("2147483647", 2_147_483_647)])
def test_rate_reads_a_count_or_blank(text, expected):
    assert forms.rate(text) == expected


@pytest.mark.parametrize("text", ["0", "00", "-1", "1.5", "many", "1e3", "2147483648"])
def test_rate_refuses_anything_else(text):
    """The range is the column's (and `limits set --per-minute`'s): 1 to 2147483647."""
    with pytest.raises(InvalidInput, match="per_minute: expected a whole number from 1 to 2147483647"):
        forms.rate(text)


@pytest.mark.parametrize(("per_minute", "current", "said"), [
    (10, RateWindow(per_minute=5, started=3),
     "limits deploy to 10 starts per minute: 3 started in the last minute (it has a rate of 5)"),
    (2, None, "limits deploy to 2 starts per minute (it has no rate: its starts are counted from now)"),
    (None, RateWindow(per_minute=4, started=4),
     "removes the rate of deploy (4 per minute: 4 started in the last minute): it starts as fast as its cap and the "
     "global cap allow"),
])
def test_a_rate_change_says_what_changes_and_the_last_minute(per_minute, current, said):
    assert rate_change("deploy", per_minute, current) == said


def test_the_overviews_jobs_carry_their_rate_on_the_default_controller_only():
    jobs = [{"job_name": "deploy", "cap": 2}, {"job_name": "build", "cap": None}, {"job_name": "test", "cap": 1}]
    limits = [
        {"job_name": "deploy", "controller": "default", "per_minute": 10, "started_last_minute": 3},
        {"job_name": "build", "controller": "eu", "per_minute": 5, "started_last_minute": 5},
        {"job_name": "test", "controller": "default", "per_minute": None, "started_last_minute": 0},
    ]
    assert [(j["job_name"], j["cap"], j["rate"], j["started_last_minute"]) for j in with_rates(jobs, limits)] == [
        ("deploy", 2, 10, 3), ("build", None, None, 0), ("test", 1, None, 0)]
    # ... and the other controllers' caps and rates are listed beside them, by controller and job.
    more = [*limits, {"job_name": "Alpha", "controller": "eu", "per_minute": None, "started_last_minute": 0},
            {"job_name": "deploy", "controller": "ap", "per_minute": 1, "started_last_minute": 0}]
    assert [(r["controller"], r["job_name"]) for r in other_controllers_limits(more)] == [
        ("ap", "deploy"), ("eu", "Alpha"), ("eu", "build")]
