"""The web page's picture of time: outcomes per bucket over the last hour, day and week, and queue wait and build
duration (p50/p95) overall and per job. The reads are bounded: the charts count the finished_at index over their
window, the timings read the latest rows through it with a LIMIT. Everything else here is pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..store.queue import Queue

# (name, window, bucket), seconds: 12 points an hour, 24 a day, 28 a week.
WINDOWS = (("hour", 3600, 300), ("day", 86_400, 3600), ("week", 7 * 86_400, 6 * 3600))
OUTCOMES = ("completed", "failed", "cancelled")
TIMING_SAMPLE = 1000  # the latest finished rows the percentiles are computed over
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 480, 120, 24


@dataclass(frozen=True)
class Chart:
    """One chart ready for the template: a polyline per outcome, the largest count, the first and last label."""

    name: str
    lines: dict[str, str]  # outcome → "x,y x,y ..." (numbers only)
    top: int
    totals: dict[str, int]
    first: str
    last: str


def buckets(rows: Sequence[dict], window: int, bucket: int, now: datetime) -> list[dict]:
    """Pure: one entry per bucket of the window, oldest first, buckets without outcomes as zeros."""
    end = int(now.timestamp()) // bucket * bucket
    found = {int(r["bucket_epoch"]): r for r in rows}
    return [{"at": start, **{k: int(found.get(start, {}).get(k) or 0) for k in OUTCOMES}}
            for start in range(end - window + bucket, end + 1, bucket)]


def chart(name: str, series: Sequence[dict], bucket: int) -> Chart:
    """Pure: the polylines of ``series`` (from ``buckets``) in a CHART_WIDTH × CHART_HEIGHT box."""
    top = max([1] + [s[k] for s in series for k in OUTCOMES])
    step = (CHART_WIDTH - 2 * CHART_PAD) / max(1, len(series) - 1)
    lines = {}
    for outcome in OUTCOMES:
        points = []
        for i, s in enumerate(series):
            x = CHART_PAD + i * step
            y = CHART_HEIGHT - CHART_PAD - (CHART_HEIGHT - 2 * CHART_PAD) * s[outcome] / top
            points.append(f"{x:.1f},{y:.1f}")
        lines[outcome] = " ".join(points)
    label = "%H:%M" if bucket < 86_400 else "%m-%d"
    first = datetime.fromtimestamp(series[0]["at"], UTC).strftime(label if bucket < 3600 else "%m-%d %H:%M")
    last = datetime.fromtimestamp(series[-1]["at"] + bucket, UTC).strftime(label if bucket < 3600 else "%m-%d %H:%M")
    return Chart(name, lines, top, {k: sum(s[k] for s in series) for k in OUTCOMES}, first, last)


def percentile(values: Sequence[float], share: float) -> float | None:
    """Pure: the nearest-rank percentile (``share`` in 0..1) of ``values``; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def timings(rows: Sequence[dict]) -> dict[str, Any]:
    """Pure: queue wait and build duration p50/p95 over ``rows`` (from ``Queue.recent_timings``), overall and per
    job (busiest first); rows whose build never started count in neither."""
    def summary(subset: Sequence[dict]) -> dict[str, Any]:
        waits = [float(r["wait_seconds"]) for r in subset if r["wait_seconds"] is not None]
        builds = [float(r["build_seconds"]) for r in subset if r["build_seconds"] is not None]
        return {"rows": len(subset), "wait_p50": percentile(waits, .5), "wait_p95": percentile(waits, .95),
                "build_p50": percentile(builds, .5), "build_p95": percentile(builds, .95)}

    per_job: dict[str, list[dict]] = {}
    for r in rows:
        per_job.setdefault(r["job_name"], []).append(r)
    jobs = sorted(per_job.items(), key=lambda item: (-len(item[1]), item[0]))
    return {"overall": summary(rows), "jobs": [dict(summary(subset), job_name=name) for name, subset in jobs],
            "sample": len(rows)}


def time_on_the_page(queue: Queue, now: datetime | None = None) -> dict[str, Any]:
    """What the time page shows: a chart per window and the timings of the latest finished rows."""
    now = now or datetime.now(UTC)
    charts = [chart(name, buckets(queue.finished_per_bucket(window, bucket), window, bucket, now), bucket)
              for name, window, bucket in WINDOWS]
    return {"charts": charts, "timings": timings(queue.recent_timings(TIMING_SAMPLE)), "sample_limit": TIMING_SAMPLE,
            "width": CHART_WIDTH, "height": CHART_HEIGHT, "pad": CHART_PAD}
