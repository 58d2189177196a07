"""How much of a job's run its samples cover: per node (the CPU counter the CPU figures
rest on) and per GPU (the utilisation the GPU verdicts rest on).

Each series' raw samples over the run are asked for (``metric{sel}[<run>s]`` at the end:
Prometheus answers the stored timestamps, not an evaluated grid), so a scrape the
exporter missed shows as a gap. The interval seen is the median spacing of the samples;
a stretch longer than ``GAP_FACTOR`` intervals without a sample (from the run's start to
the first sample, between samples, from the last sample to the run's end) is a gap, and
coverage is the run minus its gaps. The end is held to the same length as the start: a
node's tasks end and their cgroup goes before Slurm records the job's end (its other
nodes still running, the epilogue, the end rounded up to the second), so the run's last
scrape may find nothing there, as its first may come an interval after the start. Cost:
one sample per scrape per node and GPU; a week at 30 s is 20,000 timestamps per series.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from webapp.model import Series, SeriesCoverage

GAP_FACTOR = 2.0  # one missed scrape leaves two intervals between samples: a gap
# (name, template): {sel} is the job selector, {span} the run in seconds.
COVERAGE_QUERIES: tuple[tuple[str, str, str], ...] = (
    ("coverage_nodes", 'jobs_cpu_seconds_total{{{sel},mode="user"}}[{span}s]', "{node}"),
    ("coverage_gpus", "jobs_gpu_utilization_ratio{{{sel}}}[{span}s]", "{node}/gpu"),
)


def series_coverage(label: str, times: Sequence[float], start: float, end: float,
                    default_interval: float) -> SeriesCoverage:
    """Coverage of [start, end] by samples at ``times`` (sorted unix seconds).

        times 0, 5, 10, 15 (then nothing) over a run [0, 40] at 5 s -> 0.375 (from the
        last sample on, 25 s are missing: each sample stands for the interval before it);
        over [0, 24] -> 1.0 (9 s after the last sample: not longer than two intervals).
    """
    run = max(end - start, 1e-9)
    inside = [t for t in times if start - default_interval <= t <= end + default_interval]
    if not inside:
        return SeriesCoverage(label, 0, None, 0.0, 0.0, ((start, end),))
    diffs = [b - a for a, b in zip(inside, inside[1:], strict=False) if b > a]
    interval = statistics.median(diffs) if diffs else default_interval
    limit = GAP_FACTOR * interval
    gaps: list[tuple[float, float]] = []
    # A sample stands for the interval before it: the run is covered from the first sample
    # minus one interval, up to the last sample; a stretch without one counts whole.
    edges = [start, *inside]
    for a, b in zip(edges, edges[1:], strict=False):
        if b - a > limit:
            lo, hi = max(a, start), min(b - interval, end)
            if hi > lo:
                gaps.append((lo, hi))
    if end - inside[-1] > limit:
        gaps.append((max(inside[-1], start), end))
    missing = sum(hi - lo for lo, hi in gaps)
    covered = max(0.0, run - missing)
    return SeriesCoverage(label, len(inside), interval, covered, min(1.0, covered / run),
                          tuple(gaps))


def coverages(series: Iterable[Series], expected: Iterable[str], start: float, end: float,
              default_interval: float) -> tuple[SeriesCoverage, ...]:
    """One coverage per series, and a zero one for each ``expected`` label without any
    (a node whose exporter was never scraped during the job)."""
    out = {s.label: series_coverage(s.label, [t for t, _ in s.points], start, end,
                                     default_interval) for s in series}
    for label in expected:
        if label not in out and not any(k.split(":")[0] == label for k in out):
            out[label] = series_coverage(label, [], start, end, default_interval)
    return tuple(out[k] for k in sorted(out))
