"""The web page's picture of time: builds started and finished (by outcome) and the queue's depth per bucket over the
last hour, day and week, and queue wait and build duration (p50/p95) overall and per job.

Nothing here counts the history. The charts and the overall percentiles read small aggregates the write path keeps
(a trigger counts every finish into five-minute rows and hourly histograms, migrations 0012_job_stats.sql on PostgreSQL, 0009_job_stats.sql on MySQL; the
dispatcher's gauges keep the queue depth): at most a few thousand rows for a week, however many rows finished. The
per-job table reads the latest TIMING_SAMPLE finished rows through the finished_at index (a LIMIT, not a scan).
Everything else here is pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..store.reports import Reports

# (name, window, bucket), seconds: 12 points an hour, 24 a day, 28 a week.
WINDOWS = (("hour", 3600, 300), ("day", 86_400, 3600), ("week", 7 * 86_400, 6 * 3600))
# The aggregates' buckets older than this are never shown: `prune` deletes them (Levers.prune_aggregates).
SHOWN_SECONDS = max(window for _, window, _ in WINDOWS)
OUTCOMES = ("started", "completed", "failed", "cancelled")
DEPTH = ("pending", "processing")
TIMING_SAMPLE = 1000  # the latest finished rows the per-job percentiles are computed over
TIMING_WINDOW = 86_400  # the overall percentiles: the rows finished in the last 24 hours (whole hours)
BINS = 48  # the histograms' bins (0012_job_stats.sql): 0 is under 1 s, k ≥ 1 holds [2^((k-1)/2), 2^(k/2)) s
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 480, 120, 24


@dataclass(frozen=True)
class Mark:
    """One bucket of a chart, a band as tall as the box around its points, with what a person reads on hover (an
    SVG <title>): the bucket and every series' value in it."""

    x: float
    width: float
    title: str


@dataclass(frozen=True)
class Chart:
    """One chart ready for the template: a polyline per outcome, a mark per point, the largest count, the first
    label and the last ("now": the right edge is the bucket under way)."""

    name: str
    lines: dict[str, str]  # series (an outcome, pending, processing) → "x,y x,y ..." (numbers only)
    top: int
    totals: dict[str, int]  # each series summed (outcomes) or at its highest (depth)
    first: str
    last: str
    marks: list[Mark]


def buckets(rows: Sequence[dict], window: int, bucket: int, now: datetime,
            keys: Sequence[str] = OUTCOMES) -> list[dict]:
    """Pure: one entry per bucket of the window, oldest first, buckets without rows as zeros."""
    end = int(now.timestamp()) // bucket * bucket
    found = {int(r["bucket_epoch"]): r for r in rows}
    return [{"at": start, **{k: int(found.get(start, {}).get(k) or 0) for k in keys}}
            for start in range(end - window + bucket, end + 1, bucket)]


def chart(name: str, series: Sequence[dict], bucket: int, keys: Sequence[str] = OUTCOMES) -> Chart:
    """Pure: the polylines of ``series`` (from ``buckets``) in a CHART_WIDTH × CHART_HEIGHT box. Totals are sums
    for outcomes, the highest value for the queue's depth (a level, not a count of events)."""
    top = max([1] + [s[k] for s in series for k in keys])
    step = (CHART_WIDTH - 2 * CHART_PAD) / max(1, len(series) - 1)
    label = "%H:%M" if bucket < 3600 else "%m-%d %H:%M"

    def shown(epoch: int) -> str:
        return datetime.fromtimestamp(epoch, UTC).strftime(label)

    lines = {}
    for outcome in keys:
        points = []
        for i, s in enumerate(series):
            x = CHART_PAD + i * step
            y = CHART_HEIGHT - CHART_PAD - (CHART_HEIGHT - 2 * CHART_PAD) * s[outcome] / top
            points.append(f"{x:.1f},{y:.1f}")
        lines[outcome] = " ".join(points)
    marks = []
    for i, s in enumerate(series):
        until = "now" if i == len(series) - 1 else shown(s["at"] + bucket)
        values = ", ".join(f"{k} {s[k]}" for k in keys)
        marks.append(Mark(round(CHART_PAD + (i - 0.5) * step, 1), round(step, 1),
                          f"{shown(s['at'])}–{until} UTC: {values}"))
    total = max if keys == DEPTH else sum
    return Chart(name, lines, top, {k: total(s[k] for s in series) for k in keys}, shown(series[0]["at"]), "now",
                 marks)


def percentile(values: Sequence[float], share: float) -> float | None:
    """Pure: the nearest-rank percentile (``share`` in 0..1) of ``values``; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def bin_of(seconds: float) -> int:
    """Pure: the histogram bin of a duration, as the trigger computes it (0012_job_stats.sql)."""
    if seconds < 1:
        return 0
    return min(BINS - 1, 1 + math.floor(2 * math.log2(seconds)))


def bin_bounds(k: int) -> tuple[float, float]:
    """Pure: the durations bin ``k`` holds, [low, high) seconds (the last bin has no upper end: inf)."""
    if k == 0:
        return 0.0, 1.0
    return 2 ** ((k - 1) / 2), (math.inf if k == BINS - 1 else 2 ** (k / 2))


def histogram_percentile(bins: dict[int, int], share: float) -> float | None:
    """Pure: the nearest-rank percentile (``share`` in 0..1) of the durations counted in ``bins`` (bin → rows),
    placed within its bin by its rank there (geometrically, as the bins are; linearly in bin 0). The true value lies
    in the same bin, so the estimate is within a factor √2 of it (under 1 s: within a second); None when empty."""
    total = sum(bins.values())
    if not total:
        return None
    rank = max(1, math.ceil(share * total))
    seen = 0
    for k in sorted(bins):
        if seen + bins[k] >= rank:
            low, high = bin_bounds(k)
            if high == math.inf:
                return low
            within = (rank - seen) / bins[k]
            return low + (high - low) * within if k == 0 else low * (high / low) ** within
        seen += bins[k]
    return None  # not reached: the ranks add up to total


def overall_timings(bins: dict[str, dict[int, int]]) -> dict[str, Any]:
    """Pure: queue wait and build duration p50/p95 from the histograms of ``Reports.timing_bins``."""
    return {"rows": sum(bins["build"].values()),
            "wait_p50": histogram_percentile(bins["wait"], .5), "wait_p95": histogram_percentile(bins["wait"], .95),
            "build_p50": histogram_percentile(bins["build"], .5),
            "build_p95": histogram_percentile(bins["build"], .95)}


def timings(rows: Sequence[dict]) -> dict[str, Any]:
    """Pure: queue wait and build duration p50/p95 over ``rows`` (from ``Reports.recent_timings``: per job, how many
    rows finished and their waits and builds), overall and per job (busiest first); rows whose build never started
    count in neither."""
    def summary(finished: int, waits: Sequence[float | None], builds: Sequence[float | None]) -> dict[str, Any]:
        started_waits = [float(w) for w in waits if w is not None]
        started_builds = [float(b) for b in builds if b is not None]
        return {"rows": finished, "wait_p50": percentile(started_waits, .5),
                "wait_p95": percentile(started_waits, .95), "build_p50": percentile(started_builds, .5),
                "build_p95": percentile(started_builds, .95)}

    jobs = sorted(rows, key=lambda r: (-int(r["finished"]), r["job_name"]))
    sample = sum(int(r["finished"]) for r in rows)
    overall = summary(sample, [w for r in rows for w in r["waits"]], [b for r in rows for b in r["builds"]])
    return {"overall": overall, "jobs": [dict(summary(int(r["finished"]), r["waits"], r["builds"]),
                                              job_name=r["job_name"]) for r in jobs],
            "sample": sample}


def time_on_the_page(queue: Reports, now: datetime | None = None) -> dict[str, Any]:
    """What the time page shows: per window a chart of builds and one of the queue's depth, the overall timings of
    the last day (histograms) and the per-job timings of the latest finished rows."""
    now = now or datetime.now(UTC)
    charts = [chart(name, buckets(queue.stats_per_bucket(window, bucket), window, bucket, now), bucket)
              for name, window, bucket in WINDOWS]
    depth = [chart(name, buckets(queue.depth_per_bucket(window, bucket), window, bucket, now, DEPTH), bucket, DEPTH)
             for name, window, bucket in WINDOWS]
    return {"charts": charts, "depth": depth, "overall": overall_timings(queue.timing_bins(TIMING_WINDOW)),
            "timings": timings(queue.recent_timings(TIMING_SAMPLE)), "sample_limit": TIMING_SAMPLE,
            "width": CHART_WIDTH, "height": CHART_HEIGHT, "pad": CHART_PAD}
