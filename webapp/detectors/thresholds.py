"""Detector thresholds: one frozen record, overridable by name from settings.

Defaults follow what sites already tell their users (Princeton's jobstats, the Alliance /
Calcul Québec job-efficiency pages): a GPU below 1 % is idle, below 15 % is underused;
CPU efficiency under 65 % and memory use under 70 % of the request are worth a note when
the waste is large enough to matter. Ratios are 0..1, sizes bytes, durations seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

T = TypeVar("T")

GIB = 1024**3


@dataclass(frozen=True)
class Thresholds:
    # GPUs (mean utilisation over the job, per allocated GPU)
    gpu_idle: float = 0.01
    gpu_util_low: float = 0.15
    # CPUs
    cpu_efficiency_low: float = 0.65
    serial_cores_max: float = 1.25  # "about one core busy" on a multi-core allocation
    oversubscription_ratio: float = 1.25  # threads (or busy cores) per allocated core
    oversubscription_busy: float = 0.9  # threads only hurt when the cores are busy
    # The batch shell, srun and wrappers such as timeout(1) each hold a sleeping thread.
    oversubscription_wrapper_threads: float = 3.0
    # Why cores sat idle (cgroup v2 PSI): the share of the run some task waited for a CPU or
    # for storage, and for memory (any sustained reclaim stall costs more, so lower)
    pressure_high: float = 0.20
    memory_pressure_high: float = 0.10
    # GPU feeding: a core this busy on average is saturated; a GPU holding this much memory
    # was opened by the program; GPUs this busy with cores idle beside them
    core_saturated: float = 0.85
    gpu_memory_in_use_bytes: float = 256 * 1024**2
    gpu_busy: float = 0.50
    gpu_idle_cores_min: float = 2.0
    # GPU memory: a GPU this large whose peak stayed under this share of it would fit a
    # smaller type (peak x margin)
    gpu_memory_large_bytes: float = 32 * GIB
    gpu_memory_low: float = 0.25
    gpu_memory_margin: float = 1.25
    # memory growth: the fitted line adds this share of the limit over the job, fits this
    # well (r squared), over at least this many points, and still rises in the last third
    # at this share of its overall slope (a plateau does not)
    memory_growth_min: float = 0.25
    memory_growth_fit: float = 0.90
    memory_growth_min_points: float = 5.0
    memory_growth_late: float = 0.5
    # memory
    memory_efficiency_low: float = 0.70
    memory_waste_min_bytes: float = 2 * GIB  # below this a generous request is harmless
    memory_near_limit: float = 0.90
    memory_margin: float = 1.2  # headroom added to the peak in --mem advice
    oom_growth: float = 1.5  # an OOM-killed job's peak is the limit; ask for this much more
    # time
    time_used_low: float = 0.10
    time_waste_min_seconds: float = 3600.0
    time_margin: float = 1.3
    timeout_growth: float = 1.5
    short_job_seconds: float = 300.0
    min_runtime_seconds: float = 300.0  # efficiency verdicts on shorter jobs are noise
    # I/O and files
    io_heavy_bytes: float = 10 * GIB
    # Mean bytes per read/write call. write_bytes counts whole pages dirtied, so a tiny write
    # per file still reads as ~4 KiB: below 8 KiB per call is "small".
    io_small_request_bytes: float = 8192.0
    io_many_syscalls: float = 1_000_000.0
    open_files_many: float = 1000.0
    open_files_ratio_high: float = 0.8
    # queue: a wait worth a finding, and a time limit far past the partition's usual
    # (its median over the last 30 days, once enough jobs make a median meaningful)
    queue_wait_min_seconds: float = 1800.0
    time_limit_usual_factor: float = 4.0
    time_limit_usual_min_jobs: float = 20.0

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float]) -> Thresholds:
        """Defaults with ``overrides`` applied; an unknown name is a ValueError naming it."""
        return with_overrides(cls, overrides, "threshold")


def with_overrides(cls: type[T], overrides: Mapping[str, float], kind: str) -> T:
    """``cls()`` with ``overrides`` applied by field name: an unknown name, or a value that
    is not a number >= 0, is a ValueError naming it (``kind`` says which record)."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"unknown {kind}(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    bad = sorted(k for k, v in overrides.items() if not float(v) >= 0)
    if bad:
        raise ValueError(f"{kind}(s) {', '.join(bad)} must be a number >= 0")
    values: dict[str, Any] = {k: float(v) for k, v in overrides.items()}
    return replace(cls(), **values)  # type: ignore[type-var]
