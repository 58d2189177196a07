"""Quantities several detectors read off a report, each None when its inputs are missing."""

from __future__ import annotations

from webapp.model import JobReport, Series, StepLine

ENDED_OK = frozenset({"COMPLETED"})
# Steps of Slurm's own making; the rest are the user's srun steps (0, 1, ...).
SLURM_STEPS = frozenset({"batch", "extern", "interactive"})


def busy_cores(report: JobReport) -> float | None:
    """Cores busy on average: TotalCPU / elapsed, else the sum of the per-node (or per-core)
    series means from Prometheus."""
    if report.cpu_seconds is not None and report.elapsed_seconds:
        return report.cpu_seconds / report.elapsed_seconds
    means = [s.mean() for s in report.usage.cpu_cores if s.points] or per_core_means(report)
    return sum(m for m in means if m is not None) if means else None


def per_core_means(report: JobReport) -> list[float]:
    """Mean busy fraction of each core that has data (cgroup v1 only)."""
    return [m for s in report.usage.cpu_per_core if (m := s.mean()) is not None]


def gpu_series(report: JobReport) -> list[Series]:
    """Utilisation series of allocated GPUs that have at least one point."""
    return [s for s in report.usage.gpu_utilization if s.points]


def long_enough(report: JobReport, min_seconds: float) -> bool:
    """Efficiency verdicts need a job that ran for a while."""
    return report.elapsed_seconds is not None and report.elapsed_seconds >= min_seconds


def memory_limit(report: JobReport) -> int | None:
    """The memory ceiling of one node: the cgroup limit, else the request split per node."""
    if report.usage.memory_limit_bytes:
        return report.usage.memory_limit_bytes
    return report.memory_requested_per_node


def step_states(report: JobReport) -> set[str]:
    return {s.state for s in report.steps}


def user_steps(lines: tuple[StepLine, ...]) -> list[StepLine]:
    """The srun steps (not batch/extern) and het components: where the work ran."""
    return [x for x in lines if x.kind == "component" or x.step_id not in SLURM_STEPS]


def responsible_step(lines: tuple[StepLine, ...], share: float = 0.5) -> StepLine | None:
    """The one srun step (or het component) holding more than ``share`` of the idle
    core-seconds of all of them; None when idleness is spread out, or with fewer than two.

    The batch step is left out: while srun steps run it holds every core and sleeps, so it
    would always look responsible."""
    candidates = [x for x in user_steps(lines) if x.idle_core_seconds is not None]
    if len(candidates) < 2:
        return None
    total = sum(x.idle_core_seconds or 0.0 for x in candidates)
    worst = max(candidates, key=lambda x: x.idle_core_seconds or 0.0)
    if total <= 0 or (worst.idle_core_seconds or 0.0) <= share * total:
        return None
    return worst


def peak_source_text(report: JobReport) -> str:
    """How the memory peak was measured, in a few words for an evidence sentence."""
    peak = report.memory_peak
    if peak is None:
        return "not measured"
    return "estimated from sacct's MaxRSS" if peak.estimate else "sampled by Prometheus"
