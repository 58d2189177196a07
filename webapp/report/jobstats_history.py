"""A job's usage from the summary jobstats (or our sync) left in its AdminComment, for a
job Prometheus no longer holds and the archive never had: a site moving from jobstats
keeps the memory peaks and GPU figures of its old jobs.

The summary keeps one figure per node and GPU, not series: each becomes a one-point
series at the job's end (the GPU's mean utilisation, the node's RSS peak), and a note
says where they come from. CPU time stays sacct's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from webapp.model import (
    JobNotFound,
    JobReport,
    MemoryPeak,
    PeakSource,
    Series,
    SourceUnavailable,
    Usage,
)
from webapp.sources.jobstats_comment import parse_comment

log = logging.getLogger(__name__)

NOTE = ("Memory and GPU figures come from the job's jobstats summary in Slurm's "
        "AdminComment: Prometheus no longer holds its series.")


def usage_from_summary(summary: Mapping[str, Any], at: float) -> tuple[Usage, MemoryPeak | None]:
    """One-point series at ``at`` (Unix seconds) per node (RSS peak) and per GPU
    (utilisation 0..1, memory used), and the busiest node's peak."""
    rss, util, gpu_mem, totals = [], [], [], []
    for node, data in (summary.get("nodes") or {}).items():
        if "used_memory" in data:
            rss.append(Series(node, ((at, float(data["used_memory"])),)))
        for gpu, value in (data.get("gpu_utilization") or {}).items():
            util.append(Series(f"{node}/{gpu}", ((at, float(value) / 100),)))
        for gpu, value in (data.get("gpu_used_memory") or {}).items():
            gpu_mem.append(Series(f"{node}/{gpu}", ((at, float(value)),)))
        totals += [int(v) for v in (data.get("gpu_total_memory") or {}).values()]
    busiest = max(rss, key=lambda s: s.points[0][1], default=None)
    peak = (MemoryPeak(int(busiest.points[0][1]), PeakSource.PROMETHEUS, node=busiest.label)
            if busiest is not None else None)
    usage = Usage(memory_rss=tuple(rss), gpu_utilization=tuple(util),
                  gpu_memory_used=tuple(gpu_mem),
                  gpu_memory_total_bytes=max(totals) if totals else None)
    return usage, peak


def with_jobstats_summary(report: JobReport,
                          read_comment: Callable[[str], str | None]) -> JobReport:
    """``report`` with the usage its AdminComment summary holds, when Prometheus had none;
    ``report`` itself otherwise (or when there is no readable summary)."""
    if not report.usage.empty or report.unfinished or report.end_time is None:
        return report
    try:
        comment = read_comment(report.figures_from or report.job_id)
    except (JobNotFound, SourceUnavailable):
        return report
    try:
        summary = parse_comment(comment or "")
    except ValueError as exc:
        log.warning("job %s: AdminComment not readable: %s", report.job_id, exc)
        return report
    if summary is None:
        return report
    usage, peak = usage_from_summary(summary, report.end_time.timestamp())
    if usage.empty:
        return report
    return replace(report, usage=replace(usage, queries=report.usage.queries),
                   memory_peak=peak or report.memory_peak, notes=(*report.notes, NOTE))
