"""The time page's pure parts: buckets with gaps filled, chart geometry, nearest-rank percentiles, timings."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from jenkins_dispatch.operating.timeline import (
    CHART_HEIGHT,
    CHART_PAD,
    DEPTH,
    bin_bounds,
    bin_of,
    buckets,
    chart,
    histogram_percentile,
    percentile,
    timings,
)

NOW = datetime(2026, 1, 2, 10, 7, 30, tzinfo=UTC)


def test_buckets_fill_the_window_oldest_first():
    end = int(NOW.timestamp()) // 300 * 300
    rows = [{"bucket_epoch": end, "completed": 3, "failed": 1, "cancelled": None}]
    series = buckets(rows, 3600, 300, NOW)
    assert len(series) == 12 and series[-1] == {"at": end, "started": 0, "completed": 3, "failed": 1, "cancelled": 0}
    assert all(s["completed"] == 0 for s in series[:-1]) and series[0]["at"] == end - 11 * 300


def test_chart_scales_to_the_largest_count():
    series = [{"at": 0, "started": 0, "completed": 0, "failed": 0, "cancelled": 0},
              {"at": 300, "started": 1, "completed": 4, "failed": 2, "cancelled": 0}]
    drawn = chart("hour", series, 300)
    assert drawn.top == 4 and drawn.totals == {"started": 1, "completed": 4, "failed": 2, "cancelled": 0}
    last = drawn.lines["completed"].split()[-1]
    assert float(last.split(",")[1]) == CHART_PAD  # the top of the box
    assert float(drawn.lines["cancelled"].split()[0].split(",")[1]) == CHART_HEIGHT - CHART_PAD
    assert set(drawn.lines["failed"]) <= set("0123456789., ")  # numbers only: nothing to escape


@pytest.mark.parametrize(("values", "share", "expected"), [
    ([], .5, None), ([7.0], .95, 7.0), ([1, 2, 3, 4], .5, 2), ([*range(1, 101)], .95, 95), ([3, 1, 2], .5, 2),
])
def test_nearest_rank_percentile(values, share, expected):
    assert percentile(values, share) == expected


def test_timings_overall_and_per_job_busiest_first():
    rows = [{"job_name": "a", "finished": 2, "waits": [1, 3], "builds": [10, 30]},
            {"job_name": "b", "finished": 1, "waits": [None], "builds": [None]},  # cancelled before it started
            {"job_name": "c", "finished": 3, "waits": [5, 5, 5], "builds": [50, 50, 50]}]
    found = timings(rows)
    assert found["overall"]["rows"] == 6 and found["overall"]["build_p95"] == 50 and found["sample"] == 6
    assert [j["job_name"] for j in found["jobs"]] == ["c", "a", "b"]
    assert found["jobs"][1]["wait_p50"] == 1 and found["jobs"][2]["wait_p50"] is None
    assert found["jobs"][2]["rows"] == 1


def test_the_depth_chart_totals_are_its_highest_levels():
    series = [{"at": 0, "pending": 7, "processing": 2}, {"at": 300, "pending": 3, "processing": 5}]
    assert chart("hour", series, 300, DEPTH).totals == {"pending": 7, "processing": 5}


@pytest.mark.parametrize(("seconds", "expected"), [
    (0, 0), (0.99, 0), (1, 1), (1.41, 1), (1.42, 2), (2, 3), (3, 4), (60, 12), (3600, 24), (1e9, 47),
])
def test_bins_are_half_octaves(seconds, expected):
    assert bin_of(seconds) == expected
    low, high = bin_bounds(expected)
    assert low <= seconds < high


def test_a_histogram_percentile_lies_in_the_bin_of_the_exact_one_so_within_a_factor_root_two():
    rng = random.Random(25)
    for _ in range(200):
        values = [rng.lognormvariate(rng.uniform(0, 7), rng.uniform(.1, 2)) for _ in range(rng.randint(1, 300))]
        bins: dict[int, int] = {}
        for v in values:
            bins[bin_of(v)] = bins.get(bin_of(v), 0) + 1
        for share in (.5, .95):
            exact, estimate = percentile(values, share), histogram_percentile(bins, share)
            assert bin_of(estimate) == bin_of(exact) or estimate == bin_bounds(bin_of(exact))[1]
            if exact >= 1:
                assert 1 / math.sqrt(2) <= estimate / exact <= math.sqrt(2)


def test_an_empty_histogram_has_no_percentile():
    assert histogram_percentile({}, .5) is None


def test_each_point_has_its_value_on_hover_and_the_right_edge_is_now():
    """Issue 36: no values on hover, and the right edge read "22:10" at 22:06 (the end of the bucket under way)."""
    end = int(NOW.timestamp()) // 300 * 300
    series = buckets([{"bucket_epoch": end, "completed": 3, "failed": 1}], 3600, 300, NOW)
    drawn = chart("hour", series, 300)
    assert drawn.last == "now" and drawn.first == "09:10"
    titles = [m.title for m in drawn.marks]
    assert len(titles) == 12 and titles[0] == "09:10–09:15 UTC: started 0, completed 0, failed 0, cancelled 0"
    assert titles[-1] == "10:05–now UTC: started 0, completed 3, failed 1, cancelled 0"
    # Each band is centred on its bucket's point, and the bands tile the box without a gap.
    last_x = float(drawn.lines["failed"].split()[-1].split(",")[0])
    assert abs(drawn.marks[-1].x + drawn.marks[-1].width / 2 - last_x) < 0.2
    assert all(abs(a.x + a.width - b.x) < 0.2 for a, b in zip(drawn.marks, drawn.marks[1:], strict=False))
    week = chart("week", buckets([], 7 * 86_400, 6 * 3600, NOW), 6 * 3600)
    assert week.last == "now" and week.marks[0].title.startswith("12-26 12:00–12-26 18:00 UTC: started 0")
