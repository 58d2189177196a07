"""The words every renderer uses for the same figure: titles, limits, sources, notes.

Text, HTML, PDF and email all call these, so a figure reads the same everywhere. Pure
functions of the report; nothing here imports matplotlib or templates.
"""

from __future__ import annotations

from webapp.formatting import UNKNOWN, format_bytes, format_duration, format_percent, visible
from webapp.model import (
    CpuSource,
    Gap,
    JobReport,
    MemoryPeak,
    PeakSource,
    Severity,
    TimeLimitKind,
)
from webapp.states import COMPLETED

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
        return f"largest anonymous + shared memory Prometheus sampled{where}"
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
    elif gap.source == "cluster":  # the queue context: the reason is a sentence of its own
        text = gap.reason[0].upper() + gap.reason[1:] + "."
    else:
        text = f"Data from {gap.source} unavailable: {gap.reason}."
    if staff and gap.detail:
        text += f" Detail (staff only): {gap.detail}"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def verdict(report: JobReport) -> str:
    """'2 problems to fix', 'nothing to fix (1 note)', 'no problems found': the count
    of warnings and critical findings, what the headline and the email subject end with."""
    problems = sum(1 for f in report.findings if f.severity != Severity.INFO)
    notes = len(report.findings) - problems
    withheld = report.audit is not None and any(v.withheld for v in report.audit.verdicts)
    if problems:
        text = f"{_plural(problems, 'problem')} to fix"
    elif notes:
        text = "nothing to fix"
    elif withheld:
        return "no problems found, some checks lacked data"
    else:
        return "no problems found"
    return text + (f" ({_plural(notes, 'note')})" if notes else "")


def memory_where(report: JobReport) -> str:
    """Whose memory request a figure is of: " on cpu1" where the nodes asked for
    different amounts (the judged node's, ``JobReport.memory_judged``), " per node" on
    several nodes asking alike, "" on one node."""
    judged = report.memory_judged
    if report.memory_requests_uneven and judged is not None:
        return f" on {judged.node}"
    return " per node" if len(report.nodes) > 1 else ""


def _share(ratio: float, of: str) -> str:
    return f"none of {of}" if ratio < 0.005 else f"{format_percent(ratio)} of {of}"


def headline(report: JobReport) -> str:
    """One sentence with the verdict: 'Used 2% of its 4 cores and none of its GPU:
    2 problems to fix'. Figures that are not known are left out, not called unknown."""
    parts: list[str] = []
    if report.cpu_efficiency is not None and report.cpus:
        cores = f"its {report.cpus} core{'' if report.cpus == 1 else 's'}"
        parts.append(_share(report.cpu_efficiency, cores))
    mem = report.memory_efficiency
    if mem is not None and report.memory_requested_per_node:
        asked = format_bytes(report.memory_requested_per_node)
        where = memory_where(report) if report.memory_requests_uneven else ""
        parts.append(f"{format_percent(mem)} of its {asked} of memory{where}" if mem >= 0.005
                     else f"almost none of its {asked} of memory{where}")
    gpu = report.gpu_utilization
    if report.gpus and gpu is not None:
        parts.append(_share(gpu, "its GPU" if report.gpus == 1 else f"its {report.gpus} GPUs"))
    outcome = verdict(report)
    used = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)
    state = (report.state or "").split(" ")[0]
    if state and not report.unfinished and state != COMPLETED:
        # A job that failed, timed out or ran out of memory says so first.
        ended = f"Ended {visible(state)}"
        if report.elapsed_seconds is not None:
            ended += f" after {format_duration(report.elapsed_seconds)}"
        return f"{ended}{', having used ' + used if parts else ''}: {outcome}"
    if not parts:
        return outcome[0].upper() + outcome[1:]
    lead = "So far used" if report.unfinished else "Used"
    return f"{lead} {used}: {outcome}"
