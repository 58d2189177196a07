"""Summary of an array job's tasks: spread, outliers, and the request for the next array.

An array's tasks share one request, so the suggestion must fit the largest task:
``--mem`` and ``--time`` follow the one policy for a set of past runs
(``webapp.detectors.advice.next_request``, the history's too), while p50/p95 show how
uneven the tasks are. Each task's peak is the report's one definition
(``webapp.report.peak``): sacct's MaxRSS x tasks per node, or the peak a report already
measured for that task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jobreport_common.units import MIB
from webapp.detectors.advice import PastRun, next_request, percentile
from webapp.model import ArraySummary, ArrayTask, MemoryPeak, SacctJob, cpu_efficiency
from webapp.report.peak import sacct_peak
from webapp.sources.sacct_values import parse_nodelist
from webapp.states import ended, failed
from webapp.thresholds import Thresholds

OUTLIER_FACTOR = 2.0  # a task using more than twice the median stands out
# Differences too small to matter however large the ratio (seconds, bytes).
MIN_ELAPSED_GAP = 60.0
MIN_MEMORY_GAP = 100 * MIB


def array_task(job: SacctJob, peak: MemoryPeak | None = None) -> ArrayTask:
    """One task reduced to what the summary compares (seff's CPU efficiency formula)."""
    cpu = job.total_cpu_seconds
    if cpu is None and not job.steps:
        cpu = job.alloc_cpu_seconds
    eff = cpu_efficiency(cpu, job.elapsed_seconds, job.cpus)
    peak = peak or sacct_peak(job)
    return ArrayTask(job.job_id, job.state, job.elapsed_seconds, eff,
                     peak.bytes if peak is not None else None)


def _outliers(tasks: Sequence[ArrayTask], elapsed_p50: float | None,
              mem_p50: float | None) -> tuple[str, ...]:
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


def past_run(job: SacctJob, task: ArrayTask) -> PastRun:
    """One task as the sizing policy reads it (its limit per node, as ``--mem`` is)."""
    try:
        nodes = max(1, len(parse_nodelist(job.node_list))) if job.node_list else 1
    except ValueError:
        nodes = 1
    return PastRun(job.state, task.memory_peak_bytes, job.elapsed_seconds,
                   job.memory_requested_bytes // nodes if job.memory_requested_bytes else None,
                   job.time_limit_seconds)


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
    thresholds = thresholds or Thresholds()
    known = peaks or {}
    jobs = [j for j in tasks if "[" not in j.job_id]
    reduced = tuple(array_task(j, known.get(j.job_id)) for j in jobs)
    ran = [a for a in reduced if ended(a.state)]
    elapsed = [a.elapsed_seconds for a in ran if a.elapsed_seconds is not None]
    memory = [float(a.memory_peak_bytes) for a in ran if a.memory_peak_bytes is not None]
    cpu = [a.cpu_efficiency for a in ran if a.cpu_efficiency is not None]
    past = [past_run(j, a) for j, a in zip(jobs, reduced, strict=True)]
    mem, time = next_request(past, thresholds)
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
        suggested_mem=mem,
        suggested_time=time,
    )
