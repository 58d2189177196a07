"""Quantities several detectors read off a report, each None when its inputs are missing."""

from __future__ import annotations

from webapp.model import JobReport, NodeMemory, Series, StepLine
from webapp.thresholds import Thresholds
from webapp.unused import idle_nodes

# Steps of Slurm's own making; the rest are the user's srun steps (0, 1, ...).
SLURM_STEPS = frozenset({"batch", "extern", "interactive"})


def busy_cores(report: JobReport) -> float | None:
    """Cores busy on average: TotalCPU / elapsed, else the sum of the per-node (or per-core)
    series means from Prometheus."""
    if report.cpu_seconds is not None and report.elapsed_seconds:
        return report.cpu_seconds / report.elapsed_seconds
    means = [s.mean() for s in report.usage.cpu_cores if s.points] or per_core_means(report)
    return sum(m for m in means if m is not None) if means else None


def node_mean_cores(report: JobReport) -> dict[str, float]:
    """Mean cores busy on each node with CPU samples (the per-node CPU series' means)."""
    return {s.label: m for s in report.usage.cpu_cores if (m := s.mean()) is not None}


def working_nodes(report: JobReport, thresholds: Thresholds) -> int | None:
    """How many of the job's nodes did something (``node_idle_cores`` or more busy on
    average); None when a node has no samples (unknown, not idle)."""
    if len(report.nodes) < 2:
        return len(report.nodes) or None
    cores = node_mean_cores(report)
    if set(cores) != set(report.nodes):
        return None
    return len(cores) - len(idle_nodes(cores, thresholds.node_idle_cores))


def per_core_means(report: JobReport) -> list[float]:
    """Mean busy fraction of each core that has data (cgroup v1 only)."""
    return [m for s in report.usage.cpu_per_core if (m := s.mean()) is not None]


# What a user types to see and check GPUs, by vendor (AMD's ROCm, else NVIDIA's CUDA).
GPU_TERMS = {
    "nvidia": ("CUDA_VISIBLE_DEVICES", "nvidia-smi"),
    "amd": ("ROCR_VISIBLE_DEVICES", "rocm-smi"),
}


def gpu_vendor(report: JobReport) -> str:
    """``amd`` when the exporter said every allocated GPU is AMD's, else ``nvidia``."""
    vendors = {d.vendor for d in report.usage.gpu_devices}
    return "amd" if vendors == {"amd"} else "nvidia"


def gpu_terms(report: JobReport) -> tuple[str, str]:
    """(the variable naming the visible devices, the monitoring tool) for the job's GPUs."""
    return GPU_TERMS[gpu_vendor(report)]


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


def pressure(report: JobReport, resource: str) -> float | None:
    """Share of the run some task waited for ``resource`` (cpu, io, memory), on the busiest
    node; None without PSI (cgroup v1) or a run time."""
    seconds: float | None = getattr(report.usage, f"{resource}_pressure_seconds")
    if seconds is None or not report.elapsed_seconds:
        return None
    return min(1.0, seconds / report.elapsed_seconds)


def has_pressure(report: JobReport) -> bool:
    """PSI was recorded for the job (its nodes run cgroup v2)."""
    return any(pressure(report, r) is not None for r in ("cpu", "io", "memory"))


def thread_wait_share(report: JobReport, resource: str) -> float | None:
    """Share of the job's threads' active time (on a CPU, waiting for one, waiting for
    block I/O) spent waiting for ``resource`` (cpu, io), from the exporter's per-thread
    figures (cgroup v1 and v2); None without them or without the CPU time.

    Two busy threads taking turns on one core: 0.5 for cpu. I/O wait counts only where
    the node's kernel has delay accounting on (else its figure is missing, not 0).
    """
    u = report.usage
    wait = u.cpu_wait_seconds if resource == "cpu" else u.io_wait_seconds
    if wait is None or u.cpu_wait_seconds is None or report.cpu_seconds is None:
        return None
    active = report.cpu_seconds + u.cpu_wait_seconds + (u.io_wait_seconds or 0.0)
    return wait / active if active > 0 else None


def thread_wait_of_run(report: JobReport, resource: str) -> float | None:
    """The threads' wait for ``resource`` (cpu, io; task-seconds summed over threads) as a
    share of the run, at most 1: comparable to PSI's "some task waited" share, which it
    bounds from above. A mostly sleeping job stays near 0 however its few runs went."""
    u = report.usage
    wait = u.cpu_wait_seconds if resource == "cpu" else u.io_wait_seconds
    if wait is None or not report.elapsed_seconds:
        return None
    return min(1.0, wait / report.elapsed_seconds)


def wait_explains_idle_cores(report: JobReport) -> bool:
    """Where the threads' CPU wait was measured: it covers at least half of the core-seconds
    the job left unused (its threads were ready, the cores were not theirs), so "starved"
    is the cause of the low efficiency and not a side note of a mostly idle job. Without
    per-thread figures (PSI alone tells a share of time, not task-seconds): True."""
    wait = report.usage.cpu_wait_seconds
    if wait is None or report.cpu_seconds is None or not report.elapsed_seconds:
        return True
    idle = (report.cpus or 0) * report.elapsed_seconds - report.cpu_seconds
    return idle <= 0 or wait >= 0.5 * idle


def wait_share(report: JobReport, resource: str) -> float | None:
    """How much of the run the job waited for ``resource``: its PSI share (cgroup v2)
    where recorded, else its threads' (``thread_wait_of_run``; cpu and io only)."""
    share = pressure(report, resource)
    if share is None and resource in ("cpu", "io"):
        share = thread_wait_of_run(report, resource)
    return share


def own_threads_outnumber_cores(report: JobReport, thresholds: Thresholds) -> bool:
    """More of the job's threads were busy at once on a node than the node's share of its
    cores (by ``oversubscription_ratio``): any CPU wait is then, first, its own doing."""
    busy = report.usage.busy_tasks_max
    if busy is None or not report.cpus:
        return False
    return busy > report.cpus / max(1, len(report.nodes)) * thresholds.oversubscription_ratio


def can_tell_waiting(report: JobReport) -> bool:
    """PSI or per-thread wait figures were recorded: idle can be told from starved."""
    return has_pressure(report) or report.usage.cpu_wait_seconds is not None


def waiting_for(report: JobReport, thresholds: Thresholds) -> str | None:
    """What the job's tasks waited for: ``memory`` (reclaim, PSI only), else the larger of
    ``cpu`` and ``io`` over its threshold (PSI, else the threads' wait figures); None when
    nothing stalled or nothing was measured.

    Memory comes first: reclaim also makes tasks wait for storage (pages read back) and
    burns system CPU, so it is the cause the other two follow from.
    """
    mem = pressure(report, "memory")
    if (mem is not None and mem >= thresholds.memory_pressure_high) or (
        report.usage.memory_high_events or 0
    ) > 0:
        return "memory"
    stalls = {r: p for r in ("cpu", "io") if (p := wait_share(report, r)) is not None}
    stalls = {r: p for r, p in stalls.items() if p >= thresholds.pressure_high}
    return max(stalls, key=stalls.__getitem__) if stalls else None


def cpu_efficiency_low(report: JobReport, thresholds: Thresholds) -> bool:
    """A finished job, long enough to judge, whose cores did less than the threshold."""
    eff = report.cpu_efficiency
    return (
        eff is not None
        and bool(report.cpus)
        and not report.unfinished
        and long_enough(report, thresholds.min_runtime_seconds)
        and eff < thresholds.cpu_efficiency_low
    )


def busiest_core(report: JobReport) -> float | None:
    """Mean busy fraction of the job's busiest core (cgroup v1 per-core counters)."""
    means = per_core_means(report)
    return max(means) if means else None


def runnable_cores(report: JobReport) -> float | None:
    """Cores' worth of the job's threads that were runnable on average: on a core
    (``busy_cores``) or waiting for one (their CPU wait over the run). What the job asked
    of the CPU, which load beside it does not change: a busy loop given 0.6 of a core by
    its neighbours waited the other 0.4. ``busy_cores`` where the wait was not measured."""
    busy, wait = busy_cores(report), report.usage.cpu_wait_seconds
    if busy is None or wait is None or not report.elapsed_seconds:
        return busy
    return busy + wait / report.elapsed_seconds


def one_core_saturated(report: JobReport, thresholds: Thresholds) -> bool:
    """One core (or one core's worth) kept busy: the busiest core at ``core_saturated``, or
    about one core in all, which the kernel may spread over several as it migrates a
    single busy process. Counted as asked (``runnable_cores``), so a busy process on a
    loaded node, which got less than its core, still saturates one."""
    top = busiest_core(report)
    asked = runnable_cores(report)
    return (top is not None and top >= thresholds.core_saturated) or (
        asked is not None and thresholds.core_saturated <= asked <= thresholds.serial_cores_max
    )


def gpu_memory_peak(report: JobReport) -> float | None:
    """The most memory any one allocated GPU held (the report's own figure)."""
    return report.gpu_memory_peak_bytes


def gpu_mean(report: JobReport) -> float | None:
    """Mean utilisation over the allocated GPUs that have data."""
    means = [m for s in gpu_series(report) if (m := s.mean()) is not None]
    return sum(means) / len(means) if means else None


def stall_evidence(report: JobReport) -> dict[str, float | int | str]:
    """The numbers every waiting verdict shows: efficiency and each PSI share."""
    eff = report.cpu_efficiency or 0.0
    out: dict[str, float | int | str] = {
        "cpu_efficiency": round(eff, 4),
        "cpus": report.cpus or 0,
        "elapsed_seconds": report.elapsed_seconds or 0.0,
    }
    for resource in ("cpu", "io", "memory"):
        share = pressure(report, resource)
        out[f"{resource}_pressure"] = round(share, 4) if share is not None else "n/a"
    for resource in ("cpu", "io"):
        share = thread_wait_of_run(report, resource)
        out[f"{resource}_wait_of_run"] = round(share, 4) if share is not None else "n/a"
    if report.usage.busy_tasks_max is not None:
        out["busy_tasks_max"] = report.usage.busy_tasks_max
    if report.usage.memory_high_events is not None:
        out["memory_high_events"] = int(report.usage.memory_high_events)
    return out
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


def peak_node_memory(report: JobReport) -> NodeMemory | None:
    """The parts of the memory held on the peak's node (the busiest one), when measured."""
    peak = report.memory_peak
    nodes = {n.node: n for n in report.memory_nodes}
    if peak is not None and peak.node in nodes:
        return nodes[peak.node]
    return max(report.memory_nodes, key=lambda n: n.held_bytes or 0, default=None)


def peak_source_text(report: JobReport) -> str:
    """How the memory peak was measured, in a few words for an evidence sentence."""
    peak = report.memory_peak
    if peak is None:
        return "not measured"
    return "estimated from sacct's MaxRSS" if peak.estimate else "sampled by Prometheus"
