"""The coverage and audit section: what every verdict rests on, and the verdicts that are
withheld because their samples cover too little of the run.

Which source each detector's verdict rests on (``RESTS_ON``):
- CPU efficiency (``cpu_efficiency_low``, ``serial_on_many_cores``): on the CPU figure's
  source. sacct's TotalCPU (steps or allocation line) is complete whatever Prometheus
  holds, so the verdict stands; the Prometheus CPU rate (running job, or no sacct) rests
  on the nodes' samples. ``serial_on_many_cores`` also reads per-core series, which only
  Prometheus has: withheld on low node coverage when its figure comes from there.
- memory (``memory_over_requested``, ``memory_near_limit``): on the peak's source; a
  sacct peak stands, a Prometheus peak rests on the nodes' samples. Files in tmpfs
  (``memory_in_tmpfs``): on the nodes' samples, always (sacct does not see them).
- GPU (``gpu_idle``, ``gpu_util_low``): on the GPUs' samples; where the GPU figures are
  Slurm's TRES instead (JOBREPORT_GPU_METRICS=tres, ``Usage.gpu_figures_from``), on
  Slurm's accounting, which covers every step that ended: the verdict stands. A GPU
  verdict names the metrics of the source JOBREPORT_GPU_METRICS chose (``audited``'s
  ``gpu``: jobs-exporter's ``jobs_gpu_*``, else the source's ``note``).
- the causes of idle cores (``cpu_starved``, ``io_starved``, ``memory_thrashing``) and
  ``memory_growth``: on the nodes' samples; the GPU feeding and memory verdicts
  (``gpu_input_bound``, ``gpu_cores_idle``, ``gpu_memory_low``): on the GPUs' samples.
- processes, I/O and idle nodes (``oversubscribed``, ``io_not_on_scratch``, ``small_io``,
  ``many_open_files``, ``open_files_near_limit``, ``node_idle``): on the nodes' samples.
- the rest (outcome, OOM, time, queue): Slurm's accounting; coverage does not apply.

A verdict rests on "too little" when the least-covered node (or GPU) is below
``min_coverage`` (JOBREPORT_MIN_COVERAGE, 0.8 by default): its finding is dropped, and the
audit and a note say it was withheld and why. A clean bill on such data is withheld too
(the audit lists the verdict as withheld even when the detector found nothing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from webapp.detectors import DETECTORS, RULES_VERSION
from webapp.detectors import rules_version as versions
from webapp.formatting import format_percent
from webapp.model import Audit, CpuSource, JobReport, PeakSource, Verdict
from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.thresholds import DETECTORS as DETECTOR_PART
from webapp.thresholds import Thresholds

NODES, GPUS, SLURM = "nodes", "gpus", "slurm"


def _cpu(report: JobReport) -> tuple[str, str]:
    if report.cpu_source == CpuSource.PROMETHEUS:
        return NODES, "Prometheus (CPU rate, jobs_cpu_seconds_total)"
    return SLURM, "sacct (TotalCPU)"


def _memory(report: JobReport) -> tuple[str, str]:
    if report.memory_peak is not None and report.memory_peak.source == PeakSource.SACCT:
        return SLURM, "sacct (MaxRSS x tasks)"
    return NODES, "Prometheus (jobs_memory_rss_bytes + jobs_memory_shmem_bytes)"


def _serial(report: JobReport) -> tuple[str, str]:
    kind, text = _cpu(report)
    if kind == SLURM and report.usage.cpu_per_core:
        return SLURM, text + "; per-core spread from Prometheus (jobs_cpu_core_seconds_total)"
    return kind, text


def _gpu_text(report: JobReport, gpu: GpuMetrics, metrics: str,
              extra: str = "") -> tuple[str, str]:
    """``metrics``: jobs-exporter's; another source (JOBREPORT_GPU_METRICS) is named by its
    own metrics (its ``note``)."""
    if not report.gpus:
        return SLURM, "the allocation: no GPUs, nothing to judge"
    if report.usage.gpu_figures_from:
        return SLURM, f"{report.usage.gpu_figures_from}, one figure per job step"
    if gpu is JOBS:
        return GPUS, f"Prometheus ({metrics}{extra})"
    source = f"Prometheus ({gpu.note}{extra})" if gpu.series else gpu.note + extra
    return GPUS, source


def _gpu(metrics: str, extra: str = "") -> Callable[[JobReport, GpuMetrics], tuple[str, str]]:
    return lambda report, gpu: _gpu_text(report, gpu, metrics, extra)


def _nodes(metric: str) -> Callable[[JobReport, GpuMetrics], tuple[str, str]]:
    return lambda report, gpu: (NODES, f"Prometheus ({metric})")


def _any(pick: Callable[[JobReport], tuple[str, str]]
         ) -> Callable[[JobReport, GpuMetrics], tuple[str, str]]:
    """A verdict whatever the GPU figures' source."""
    return lambda report, gpu: pick(report)


# detector -> (the report, its GPU figures' source) -> (kind, what the verdict rests on)
RESTS_ON: Mapping[str, Callable[[JobReport, GpuMetrics], tuple[str, str]]] = {
    "cpu_efficiency_low": _any(_cpu),
    "serial_on_many_cores": _any(_serial),
    "memory_over_requested": _any(_memory),
    "memory_near_limit": _any(_memory),
    "gpu_idle": _gpu("jobs_gpu_utilization_ratio"),
    "gpu_util_low": _gpu("jobs_gpu_utilization_ratio"),
    "oversubscribed": _nodes("jobs_busy_tasks, jobs_cpu_wait_seconds_total, jobs_threads, "
                             "jobs_cpu_seconds_total"),
    "io_not_on_scratch": _nodes("jobs_*_bytes_total, jobs_scratch_in_use"),
    "small_io": _nodes("jobs_*_syscalls_total"),
    "many_open_files": _nodes("jobs_open_files"),
    "node_idle": _nodes("jobs_cpu_seconds_total, per node"),
    "open_files_near_limit": _nodes("jobs_open_files_limit_ratio"),
    # why cores sat idle: the nodes' pressure counters (cgroup v2)
    **{name: _nodes("jobs_pressure_waiting_seconds_total, jobs_memory_events_total")
       for name in ("memory_thrashing",)},
    # why cores sat idle: pressure (cgroup v2) or the threads' waits (any version)
    **{name: _nodes("jobs_pressure_waiting_seconds_total, jobs_cpu_wait_seconds_total, "
                    "jobs_io_wait_seconds_total")
       for name in ("cpu_starved", "io_starved")},
    "memory_growth": _nodes("jobs_memory_rss_bytes + jobs_memory_shmem_bytes, fitted"),
    "memory_in_tmpfs": _nodes("jobs_memory_shmem_bytes, jobs_memory_rss_bytes"),
    "gpu_input_bound": _gpu("jobs_gpu_utilization_ratio, jobs_gpu_memory_used_bytes",
                            "; per core jobs_cpu_core_seconds_total"),
    "gpu_cores_idle": _gpu("jobs_gpu_utilization_ratio"),
    "gpu_memory_low": _gpu("jobs_gpu_memory_used_bytes"),
    # a fault is a fault however few samples saw it: never withheld
    "hardware_fault": lambda report, gpu: (
        SLURM, "Slurm's node events (accounting database) and the GPUs' error counters "
               "(jobs_gpu_xid_errors_total, jobs_gpu_ecc_errors_total)"),
    **{name: lambda report, gpu: (SLURM, "Slurm's accounting (sacct, accounting database)")
       for name in ("outcome", "out_of_memory", "time_over_requested", "short_job",
                    "gpu_type_unavailable", "time_limit_past_usual")},
}
UNCLASSIFIED = "its own inputs (not classified for coverage: never withheld)"


def _why(kind: str, report: JobReport, floor: float) -> str | None:
    """Why a verdict on ``kind`` samples is withheld; None when coverage suffices."""
    cov = report.coverage
    if cov is None or kind == SLURM:
        return None
    parts = cov.nodes if kind == NODES else cov.gpus
    if kind == GPUS and not report.gpus:
        return None
    low = [p for p in parts if p.fraction < floor]
    if not parts:
        return "no samples of the job's " + ("nodes" if kind == NODES else "GPUs")
    if not low:
        return None
    what = "node" if kind == NODES else "GPU"
    listed = ", ".join(f"{p.label} {format_percent(p.fraction)}" for p in low)
    return (f"samples cover too little of the run ({what} {listed}; at least "
            f"{format_percent(floor)} needed)")


def audited(report: JobReport, thresholds: Thresholds, min_coverage: float,
            gpu: GpuMetrics = JOBS, policy_version: str | None = None,
            site_thresholds: Thresholds | None = None) -> JobReport:
    """The report with its audit section and without the findings that are withheld.
    ``thresholds``: the job's (under the policy's scope); ``gpu``: the source of its GPU
    figures (JOBREPORT_GPU_METRICS), whose metrics the GPU verdicts name. The audit names
    the code's version and the site policy's, derived here, once, from the policy
    directory's (``policy_version``: ``Policy.version``, None without one), the settings'
    thresholds (``site_thresholds``: JOBREPORT_THRESHOLDS, before the policy's scope
    changed them; None: ``thresholds``, where the scope's changes then count too) and
    ``min_coverage`` (rules_version.py)."""
    verdicts, dropped = [], set()
    for detector in DETECTORS:
        pick = RESTS_ON.get(detector.name)
        kind, text = pick(report, gpu) if pick else (SLURM, UNCLASSIFIED)
        why = None if report.unfinished else _why(kind, report, min_coverage)
        if why:
            dropped.add(detector.name)
        verdicts.append(Verdict(detector.name, text, why is not None, why or ""))
    # One note per reason: "Verdicts withheld, samples cover too little ...: a, b."
    reasons: dict[str, list[str]] = {}
    for v in verdicts:
        if v.withheld:
            reasons.setdefault(v.why, []).append(v.detector)
    notes = [f"Verdicts withheld, {why}: {', '.join(names)} (what each rests on is in the "
             "coverage and audit section)." for why, names in reasons.items()]
    sources = [("accounting", "used"), ("sacct", "used"), ("prometheus", "used")]
    for gap in report.gaps:
        sources = [(s, gap.reason if s == gap.source else r) for s, r in sources]
    audit = Audit(
        sources=tuple(sources),
        thresholds=tuple((name, value, name in thresholds.overridden)
                         for name, value in thresholds.part(DETECTOR_PART).items()),
        rules_version=RULES_VERSION,
        min_coverage=min_coverage,
        verdicts=tuple(verdicts),
        policy_version=versions.policy_version(policy_version, versions.overrides_in_effect(
            site_thresholds or thresholds, min_coverage)),
    )
    findings = tuple(f for f in report.findings if f.name not in dropped)
    return dataclasses.replace(report, audit=audit, findings=findings,
                               notes=report.notes + tuple(notes))
