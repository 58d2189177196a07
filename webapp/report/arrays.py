"""Summary of an array job's tasks: spread, outliers, and the request for the next array.

An array's tasks share one request, so the suggestion must fit the largest task, not
the typical one: ``--mem`` and ``--time`` come from the maximum plus a margin, while
p50/p95 show how uneven the tasks are. Each task's peak is the report's one definition
(``webapp.report.peak``): sacct's MaxRSS x tasks per node, or the peak a report already
measured for that task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from webapp.detectors.advice import next_mem, next_time, round_up_time
from webapp.formatting import slurm_time
from webapp.model import ArraySummary, ArrayTask, MemoryPeak, SacctJob, cpu_efficiency
from webapp.report.peak import sacct_peak
from webapp.sources.sacct_values import parse_nodelist
from webapp.states import ended, failed
from webapp.thresholds import Thresholds

OUTLIER_FACTOR = 2.0  # a task using more than twice the median stands out
# Differences too small to matter however large the ratio (seconds, bytes).
MIN_ELAPSED_GAP = 60.0
MIN_MEMORY_GAP = 100 * 1024**2


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (as numpy's default), q in 0..100; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def array_task(job: SacctJob, peak: MemoryPeak | None = None) -> ArrayTask:
    """One task reduced to what the summary compares (seff's CPU efficiency formula)."""
    cpu = job.total_cpu_seconds
    if cpu is None and not job.steps:
        cpu = job.alloc_cpu_seconds
    eff = cpu_efficiency(cpu, job.elapsed_seconds, job.cpus)
    peak = peak or sacct_peak(job)
    return ArrayTask(job.job_id, job.state, job.elapsed_seconds, eff, peak and peak.bytes)


def _outliers(tasks: Sequence[ArrayTask], elapsed_p50: float | None, mem_p50: float | None):
    out = []
    for task in tasks:
        long_ = (
            elapsed_p50 is not None
            and task.elapsed_seconds is not None
            and task.elapsed_seconds > elapsed_p50 * OUTLIER_FACTOR
            and task.elapsed_seconds - elapsed_p50 >= MIN_ELAPSED_GAP
        )
        big = (
            mem_p50 is not None
            and task.memory_peak_bytes is not None
            and task.memory_peak_bytes > mem_p50 * OUTLIER_FACTOR
            and task.memory_peak_bytes - mem_p50 >= MIN_MEMORY_GAP
        )
        if failed(task.state) or long_ or big:
            out.append(task.job_id)
    return tuple(out)


def _suggest_mem(jobs: Sequence[SacctJob], tasks: Sequence[ArrayTask],
                 t: Thresholds) -> str | None:
    """``--mem`` (per node) for the next array: the largest task's peak plus a margin."""
    ended = {j.job_id for j in jobs}
    peaks = [a.memory_peak_bytes for a in tasks if a.job_id in ended and a.memory_peak_bytes]
    oom = [j for j in jobs if j.state == "OUT_OF_MEMORY"]
    if oom:
        # A killed task's peak is its limit: grow from the limit, not from the peak.
        limits = [j.memory_requested_bytes // max(1, len(parse_nodelist(j.node_list)))
                  for j in oom if j.memory_requested_bytes]
        base = max(peaks + limits) if peaks or limits else None
        return next_mem(base, t.oom_growth) if base else None
    return next_mem(max(peaks), t.memory_margin) if peaks else None


def _suggest_time(jobs: Sequence[SacctJob], t: Thresholds) -> str | None:
    timeouts = [j.time_limit_seconds for j in jobs if j.state == "TIMEOUT" and j.time_limit_seconds]
    if timeouts:
        return slurm_time(round_up_time(max(timeouts) * t.timeout_growth))
    done = [j.elapsed_seconds for j in jobs if j.state == "COMPLETED" and j.elapsed_seconds]
    return next_time(max(done), t.time_margin) if done else None


def summarize_array(
    tasks: Sequence[SacctJob],
    thresholds: Thresholds | None = None,
    peaks: Mapping[str, MemoryPeak | None] | None = None,
) -> ArraySummary:
    """Percentiles, outliers and next-time ``--mem``/``--time`` over an array's tasks.

    ``peaks`` gives the peak a report already measured for a task (its Prometheus peak),
    so the task shown in full and its line in the summary agree. Pending ranges
    (``123_[5-9]``) are left out; tasks that have not run yet count in ``tasks`` but
    not in the percentiles.
    """
    t = thresholds or Thresholds()
    known = peaks or {}
    jobs = [j for j in tasks if "[" not in j.job_id]
    reduced = tuple(array_task(j, known.get(j.job_id)) for j in jobs)
    ran = [a for a in reduced if ended(a.state)]
    elapsed = [a.elapsed_seconds for a in ran if a.elapsed_seconds is not None]
    memory = [float(a.memory_peak_bytes) for a in ran if a.memory_peak_bytes is not None]
    cpu = [a.cpu_efficiency for a in ran if a.cpu_efficiency is not None]
    done = [j for j in jobs if ended(j.state)]
    elapsed_p50, memory_p50 = percentile(elapsed, 50), percentile(memory, 50)
    return ArraySummary(
        tasks=reduced,
        elapsed_p50=elapsed_p50,
        elapsed_p95=percentile(elapsed, 95),
        memory_peak_p50=memory_p50,
        memory_peak_p95=percentile(memory, 95),
        cpu_efficiency_p50=percentile(cpu, 50),
        cpu_efficiency_p95=percentile(cpu, 95),
        outliers=_outliers(ran, elapsed_p50, memory_p50),
        suggested_mem=_suggest_mem(done, reduced, t),
        suggested_time=_suggest_time(done, t),
    )
