"""GPU readings of the GPUs Slurm allocated to each job (allocation, not running processes).

Allocation comes from the prolog's file (JOBREPORT_EXPORTER_GPU_ALLOC_DIR/<jobid>), else
from SLURM_JOB_GPUS in the environment of the job's processes. Without an NVIDIA driver the
collector disables itself with one log line and reports nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from exporter import gpu, procfs
from exporter.collectors.context import CollectorContext
from exporter.scrape import ScrapedJob

log = logging.getLogger(__name__)

_FAMILIES = (
    (
        "jobs_gpu_utilization_ratio",
        "Fraction of time the GPU was busy over the last sample period.",
    ),
    ("jobs_gpu_memory_used_bytes", "GPU memory in use on the allocated GPU, in bytes."),
    ("jobs_gpu_memory_total_bytes", "Total memory of the allocated GPU, in bytes."),
    ("jobs_gpu_power_watts", "Power drawn by the allocated GPU, in watts."),
)


class GpuCollector:
    name = "gpu"

    def __init__(self, context: CollectorContext):
        self.context = context
        self._nvml: gpu.Nvml | None = None
        self._started = False
        # job id -> (pids looked at, GPUs); an allocation is fixed for a job's lifetime, a
        # "none found" answer is only trusted while the job's process list is unchanged.
        self._allocations: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def _start(self) -> gpu.Nvml | None:
        self._started = True
        if self.context.settings.gpus == "off":
            return None
        module = self.context.nvml or gpu.load_nvml()
        if module is None:
            log.info("GPU collector disabled: nvidia-ml-py (pynvml) is not installed")
            return None
        nvml = gpu.Nvml(module)
        return nvml if nvml.start() else None

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        if not self._started:
            self._nvml = self._start()
        if self._nvml is None:
            return
        jobs = [j for j in jobs if not j.gone]  # found ended by an earlier collector
        families = [GaugeMetricFamily(n, h, labels=["jobid", "gpu"]) for n, h in _FAMILIES]
        self._allocations = {j.job_id: self._allocation(j) for j in jobs}
        for job in jobs:
            for index in self._allocations[job.job_id][1]:
                try:
                    reading = self._nvml.read(index)
                except self._nvml.nvml.NVMLError as exc:  # e.g. GPU fell off the bus
                    log.warning("GPU %d of job %s unreadable: %s", index, job.job_id, exc)
                    continue
                if reading is None:
                    continue
                labels = [job.job_id, str(index)]
                values = (
                    reading.utilization_ratio,
                    reading.memory_used_bytes,
                    reading.memory_total_bytes,
                    reading.power_watts,
                )
                for family, value in zip(families, values, strict=True):
                    if value is not None:
                        family.add_metric(labels, value)
        yield from families

    def _allocation(self, job: ScrapedJob) -> tuple[tuple[int, ...], tuple[int, ...]]:
        known = self._allocations.get(job.job_id)
        if known is not None and (known[1] or known[0] == job.pids):
            return known
        settings = self.context.settings
        found = gpu.read_allocation_file(settings.gpu_alloc_dir, job.job_id)
        if found is not None:
            return job.pids, found
        # No prolog file: the batch step's processes carry SLURM_JOB_GPUS.
        for pid in job.pids:
            value = procfs.read_environ_var(settings.proc_root, pid, "SLURM_JOB_GPUS")
            if value is not None:
                return job.pids, gpu.parse_gpu_list(value)
        return job.pids, ()
