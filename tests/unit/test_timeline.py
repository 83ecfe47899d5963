"""The time page's pure parts: buckets with gaps filled, chart geometry, nearest-rank percentiles, timings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jenkins_dispatch.operating.timeline import CHART_HEIGHT, CHART_PAD, buckets, chart, percentile, timings

NOW = datetime(2026, 1, 2, 10, 7, 30, tzinfo=UTC)


def test_buckets_fill_the_window_oldest_first():
    end = int(NOW.timestamp()) // 300 * 300
    rows = [{"bucket_epoch": end, "completed": 3, "failed": 1, "cancelled": None}]
    series = buckets(rows, 3600, 300, NOW)
    assert len(series) == 12 and series[-1] == {"at": end, "completed": 3, "failed": 1, "cancelled": 0}
    assert all(s["completed"] == 0 for s in series[:-1]) and series[0]["at"] == end - 11 * 300


def test_chart_scales_to_the_largest_count():
    series = [{"at": 0, "completed": 0, "failed": 0, "cancelled": 0},
              {"at": 300, "completed": 4, "failed": 2, "cancelled": 0}]
    drawn = chart("hour", series, 300)
    assert drawn.top == 4 and drawn.totals == {"completed": 4, "failed": 2, "cancelled": 0}
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
    rows = [{"job_name": "a", "status": "completed", "wait_seconds": w, "build_seconds": b}
            for w, b in ((1, 10), (3, 30))]
    rows += [{"job_name": "b", "status": "cancelled", "wait_seconds": None, "build_seconds": None}]
    rows += [{"job_name": "c", "status": "completed", "wait_seconds": 5, "build_seconds": 50}] * 3
    found = timings(rows)
    assert found["overall"]["rows"] == 6 and found["overall"]["build_p95"] == 50
    assert [j["job_name"] for j in found["jobs"]] == ["c", "a", "b"]
    assert found["jobs"][1]["wait_p50"] == 1 and found["jobs"][2]["wait_p50"] is None
