"""One archived job: its record as the archive stores it (``webapp.archive.store``), its
series downsampled to a few hundred points, and the ``JobReport`` a stored summary and
series describe. The summary is the JSON renderer's output itself; ``webapp.json_codec``
reads it back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webapp.json_codec import decode
from webapp.model import Gap, JobReport

MAX_POINTS = 300


@dataclass(frozen=True)
class ArchivedJob:
    """One archived job: the report summary (JSON renderer's dict without series) and
    its series downsampled to ``resolution`` seconds."""

    cluster: str
    job_id: str
    submit_time: int
    end_time: int
    user: str | None
    state: str | None
    resolution: float
    summary: dict[str, Any]
    series: dict[str, Any]
    archived_at: float


def bucket_seconds(start: float, end: float, step: float, max_points: int = MAX_POINTS) -> float:
    """Width of the buckets that keep a series of ``step`` spacing under ``max_points``:
    a whole number of steps, so the stated resolution is the one plotted."""
    if step <= 0 or end <= start:
        return float(step)
    return float(step * max(1, math.ceil((end - start) / (max_points * step))))


def downsample(points: Sequence[Sequence[float]], width: float) -> list[list[float]]:
    """Mean of each ``width``-second bucket, stamped at the bucket's first sample.

    Means keep a series' average (what efficiency findings read); peaks are kept in the
    summary's own fields (memory_peak_bytes), not in the plotted points.
    """
    out: list[list[float]] = []
    bucket: list[float] = []  # empty only before the first point
    t0 = 0.0
    for t, v in points:
        if not bucket or t - t0 >= width:
            if bucket:
                out.append([t0, sum(bucket) / len(bucket)])
            t0, bucket = t, []
        bucket.append(v)
    if bucket:
        out.append([t0, sum(bucket) / len(bucket)])
    return out


def series_step(series: Mapping[str, list[dict[str, Any]]]) -> float:
    """The smallest spacing between two samples of any series (the source's step)."""
    gaps = [
        b[0] - a[0]
        for items in series.values()
        for s in items
        for a, b in zip(s["points"], s["points"][1:], strict=False)
        if b[0] > a[0]
    ]
    return min(gaps) if gaps else 0.0


def downsample_all(
    series: Mapping[str, list[dict[str, Any]]], max_points: int = MAX_POINTS
) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """Every series at one resolution (seconds) keeping each under ``max_points``."""
    times = [p[0] for items in series.values() for s in items for p in s["points"]]
    if not times:
        return {k: list(v) for k, v in series.items()}, 0.0
    width = bucket_seconds(min(times), max(times), series_step(series), max_points)
    out = {
        key: [{"label": s["label"], "points": downsample(s["points"], width)} for s in items]
        for key, items in series.items()
    }
    return out, width


def report_from_record(summary: Mapping[str, Any], series: Mapping[str, Any],
                       note: Gap | None = None) -> JobReport:
    """The report an archived summary and its series describe (``webapp.json_codec.decode``);
    ``note`` is added to gaps."""
    report = decode(summary, series)
    gaps = [g for g in report.gaps
            if g.source != "prometheus"]  # the live gap said "no metrics": not so here
    if note:
        gaps.insert(0, note)
    return replace(report, gaps=tuple(gaps))
