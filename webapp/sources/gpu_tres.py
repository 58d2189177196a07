"""Slurm's own GPU usage TRES (JOBREPORT_GPU_METRICS=tres): ``gres/gpuutil`` and
``gres/gpumem`` in a step's usage TRES, where no GPU exporter is scraped.

Slurm's gpu plugin samples, for each task's processes on their GPUs, the utilisation
(percent) and the memory the processes hold (bytes; the driver's reserve and what no
process is charged for are not in it), at JobAcctGatherFrequency; sacct prints them per
step in ``TRESUsageInAve`` and ``TRESUsageInMax`` (a real line: ``fixtures/sacct/
hb-jobinfo_*``, ``gres/gpumem=20500736K,gres/gpuutil=90``). One figure per step: no series
per GPU, no shape over time.
"""

from __future__ import annotations

from dataclasses import dataclass

from webapp.sources.sacct_values import parse_memory, parse_tres


@dataclass(frozen=True)
class GpuTres:
    """A step's GPU figures from Slurm's TRES; None where the TRES is not recorded."""

    utilization: float | None  # 0..1 of one GPU, the step's GPUs averaged
    memory_bytes: int | None  # the processes' largest


def parse_gpu_tres(ave: str, peak: str, gpus: int) -> GpuTres:
    """One step's ``TRESUsageInAve`` and ``TRESUsageInMax``, on ``gpus`` GPUs.

        cpu=15:33:58,...,gres/gpumem=20500736K,gres/gpuutil=90,mem=1294440K,...
        -> GpuTres(utilization=0.9, memory_bytes=20992753664)   (one GPU)

    The utilisation is taken as the sum over the step's GPUs (the plugin adds up the
    figures of a task's processes) and shared out over them; a one-GPU step reads as it is.
    """
    util = parse_tres(ave).get("gres/gpuutil", "")
    mem = parse_tres(peak).get("gres/gpumem", "")
    try:
        utilization = float(util) / 100 / max(1, gpus) if util else None
    except ValueError:
        utilization = None
    return GpuTres(utilization, parse_memory(mem) if mem else None)
