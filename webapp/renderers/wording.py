"""The words every renderer uses for the same figure: titles, limits, sources, notes.

Text, HTML, PDF and email all call these, so a figure reads the same everywhere. Pure
functions of the report; nothing here imports matplotlib or templates.
"""

from __future__ import annotations

from webapp.formatting import UNKNOWN, format_bytes, format_duration, visible
from webapp.model import CpuSource, Gap, JobReport, MemoryPeak, PeakSource, TimeLimitKind

PARTITION_LIMIT = "the partition's limit"
CPU_SOURCES = {
    CpuSource.STEPS: "sacct, steps' TotalCPU",
    CpuSource.ALLOCATION: "sacct, the allocation line's TotalCPU: sacct lists no steps",
    CpuSource.PROMETHEUS: "Prometheus, CPU rate over the job",
}


def what(report: JobReport) -> str:
    """'Array job 123 (4 tasks)', 'Array task 123_4' or 'Job 123'."""
    if report.array is not None:
        return f"Array job {report.job_id} ({len(report.array.tasks)} tasks)"
    if report.array_job is not None and "_" in report.job_id:
        return f"Array task {report.job_id}"
    return f"Job {report.job_id}"


def title(report: JobReport) -> str:
    """``what(report)`` and the job's name when known."""
    return f"{what(report)}: {visible(report.job_name)}" if report.job_name else what(report)


def figures_from(report: JobReport) -> str | None:
    """Which record the single figures describe, when it is not the job asked for."""
    if not report.figures_from:
        return None
    if report.array is not None:
        return (f"State, times, CPU, memory, plots and findings below are those of task "
                f"{report.figures_from}, one of the array's {len(report.array.tasks)} tasks.")
    return f"Figures below are those of {report.figures_from}."


def time_limit_text(report: JobReport) -> str:
    """'2h 00m', '1d 00h (the partition's limit)', 'the partition's limit', 'unlimited'."""
    kind, seconds = report.time_limit_kind, report.time_limit_seconds
    if kind == TimeLimitKind.UNLIMITED:
        return "unlimited"
    if kind == TimeLimitKind.PARTITION:
        return f"{format_duration(seconds)} ({PARTITION_LIMIT})" if seconds else PARTITION_LIMIT
    return format_duration(seconds) if seconds else UNKNOWN


def cpu_source_text(report: JobReport) -> str:
    return CPU_SOURCES.get(report.cpu_source, "unknown source") if report.cpu_source else ""


def peak_text(peak: MemoryPeak | None) -> str:
    """How the peak was measured: which source, which node, which formula."""
    if peak is None:
        return "no memory figure from any source"
    where = f" on {peak.node}" if peak.node else ""
    if peak.source == PeakSource.PROMETHEUS:
        return f"largest RSS Prometheus sampled{where}"
    step = f", step {peak.step_id}" if peak.step_id else ""
    tasks = peak.tasks or 1
    if tasks > 1:
        return (f"estimate from sacct{where}: MaxRSS {format_bytes(peak.per_task_bytes)} "
                f"per task x {tasks} tasks{step}")
    return f"estimate from sacct{where}: MaxRSS, sampled{step}"


def gap_text(gap: Gap, staff: bool = False) -> str:
    """The visible note for a source that failed; the technical detail only for staff."""
    if gap.source == "archive":  # not a failure: the report was rebuilt from the archive
        return gap.reason
    if gap.source == "prometheus":
        text = (f"Metrics unavailable (Prometheus): {gap.reason}. Plots and usage numbers "
                "from the exporter are missing from this report.")
    else:
        text = f"Data from {gap.source} unavailable: {gap.reason}."
    if staff and gap.detail:
        text += f" Detail (staff only): {gap.detail}"
    return text
