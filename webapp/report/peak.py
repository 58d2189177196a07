"""The job's memory peak: one definition per source, chosen once per report.

``--mem`` is per node, so the peak is that of the busiest node.

- Prometheus: the largest RSS the exporter sampled of the job's cgroup on each node
  (``jobs_memory_rss_bytes``: all the job's tasks on that node together; page cache
  excluded). The busiest node's value.
- sacct: MaxRSS is the largest *single task*; a step running N tasks on that node may
  have held up to N times that at once (seff's "estimated maximum"). So the estimate is
  MaxRSS x the step's tasks per node, for the step whose estimate is largest; without
  step lines (old Slurm), the allocation line's MaxRSS.

Prometheus wins when it has samples, unless a single task's MaxRSS alone exceeds them
(the peak fell between two scrapes): then sacct's estimate is the better account.

Samples of the job's exit are not its memory: a scrape that lands while its processes
exit (or after its last task ended, the cgroup still there) reads the few MiB left, and
that one point would end a leak's straight line (``while_running``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from webapp.model import MemoryPeak, PeakSource, SacctJob, Series, Step, Usage

# A final sample under this share of the one before it, taken in the job's last steps:
# its processes were exiting, not shrinking (no job frees half its memory in one scrape
# and goes on working).
EXIT_DROP = 0.5


def tasks_per_node(step: Step) -> int:
    """The step's tasks on one node (rounded up): what one task's MaxRSS is multiplied by."""
    return math.ceil((step.tasks or 1) / max(1, len(step.nodes)))


def step_peak(step: Step) -> int | None:
    """One step's (or het component's) peak: MaxRSS x its tasks per node."""
    return step.max_rss_bytes * tasks_per_node(step) if step.max_rss_bytes else None


def sacct_peak(job: SacctJob) -> MemoryPeak | None:
    """MaxRSS x tasks on the node of the largest task, over the steps; None without MaxRSS."""
    best: MemoryPeak | None = None
    for step in job.steps:
        peak_bytes = step_peak(step)
        if not peak_bytes:
            continue
        tasks = tasks_per_node(step)
        peak = MemoryPeak(
            bytes=peak_bytes,
            source=PeakSource.SACCT,
            node=step.max_rss_node or (step.nodes[0] if len(step.nodes) == 1 else None),
            step_id=step.step_id,
            per_task_bytes=step.max_rss_bytes,
            tasks=tasks,
        )
        if best is None or peak.bytes > best.bytes:
            best = peak
    if best is None and not job.steps and job.alloc_max_rss_bytes:
        best = MemoryPeak(job.alloc_max_rss_bytes, PeakSource.SACCT,
                          per_task_bytes=job.alloc_max_rss_bytes, tasks=1)
    return best


def prometheus_peak(usage: Usage) -> MemoryPeak | None:
    """The largest RSS sample of the busiest node; None when nothing was sampled."""
    best: MemoryPeak | None = None
    for series in usage.memory_rss:
        top = series.max()
        if top and (best is None or top > best.bytes):
            best = MemoryPeak(int(top), PeakSource.PROMETHEUS, node=series.label or None)
    return best


def job_peak(sacct: MemoryPeak | None, prometheus: MemoryPeak | None) -> MemoryPeak | None:
    """Prometheus' peak, unless one task's MaxRSS alone is larger (a peak between scrapes)."""
    if prometheus is None:
        return sacct
    if sacct is not None and (sacct.per_task_bytes or 0) > prometheus.bytes:
        return sacct
    return prometheus


def exit_tail_start(series: Series, end: float, step: float) -> int:
    """Index of the first sample of the series' exit tail (``len`` when none): the first
    sample from ``end - 2 x step`` on after which every sample is under ``EXIT_DROP`` of
    the one before it."""
    points = series.points
    first = next((i for i, (t, _) in enumerate(points) if t >= end - 2 * step), len(points))
    for j in range(max(first, 1), len(points)):
        before = points[j - 1][1]
        if all(v < EXIT_DROP * before for _, v in points[j:]):
            return j
    return len(points)


def while_running(usage: Usage, end: float | None) -> Usage:
    """``usage`` with each node's memory series cut before its exit tail; as is while the
    job runs (``end`` None) or without the series' step."""
    if end is None or not usage.step_seconds or not usage.memory_rss:
        return usage
    step = usage.step_seconds
    cut = tuple(Series(s.label, s.points[:exit_tail_start(s, end, step)])
                for s in usage.memory_rss)
    return replace(usage, memory_rss=cut) if cut != usage.memory_rss else usage
