"""What every collector is constructed with: settings and the shared readers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from jobs_exporter.cgroupfs import CpuUsage, MemoryUsage
from jobs_exporter.proc_reader import ProcReader
from jobs_exporter.settings import Settings


@dataclass
class CollectorContext:
    settings: Settings
    procs: ProcReader
    nvml: ModuleType | object | None = None  # a pynvml-compatible module; None: import pynvml
    amdsmi: ModuleType | object | None = None  # an amdsmi-compatible module; None: import it
    # Runs scontrol (argv -> stdout); None: gpu_alloc.run_scontrol. Tests replay captures.
    scontrol: Callable[[Sequence[str]], str] | None = None
    # Filled by the GPU collector each scrape for the energy collector, which runs after it:
    # every GPU's energy counter in joules, and each job's allocated GPU indexes.
    gpu_energy: dict[int, float] = field(default_factory=dict)
    gpu_allocations: dict[str, tuple[int, ...]] = field(default_factory=dict)
    gpu_labels: dict[int, str] = field(default_factory=dict)  # index -> its gpu label
    # This scrape's cgroup readings by job id, kept by the cpu and memory collectors so
    # that the energy collector reads no file twice.
    cpu_usage: dict[str, CpuUsage] = field(default_factory=dict)
    memory_usage: dict[str, MemoryUsage] = field(default_factory=dict)
