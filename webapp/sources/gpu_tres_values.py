"""Slurm's own GPU usage TRES (JOBREPORT_GPU_METRICS=tres): ``gres/gpuutil`` and
``gres/gpumem`` in a step's usage TRES, where no GPU exporter is scraped.

Slurm's gpu plugin samples, for each task's processes on their GPUs, the utilisation
(percent, the task's GPUs added up) and the memory the processes hold (bytes; the driver's
reserve and what no process is charged for are not in it), at JobAcctGatherFrequency;
slurmdbd keeps them when the step ends (a running step's are empty), and sacct prints
them per step in ``TRESUsageInAve`` (the mean over the step's tasks), ``TRESUsageInTot``
(their sum) and ``TRESUsageInMax`` (the largest task's). A real line: ``fixtures/sacct/
hb-jobinfo_*``, ``gres/gpumem=20500736K,gres/gpuutil=90``. One figure per step: no series
per GPU, no shape over time; a step's GPUs are averaged together, so one busy GPU beside
an idle one reads as two half-busy ones. ``webapp.report.gpu_from_tres`` makes the job's
figures of its steps'.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobreport_common.slurm_values import parse_tres
from webapp.sources.sacct_values import parse_memory


@dataclass(frozen=True)
class GpuTres:
    """A step's GPU figures from Slurm's TRES; None where the TRES is not recorded."""

    utilization: float | None  # 0..1 of one GPU, the step's GPUs averaged
    memory_bytes: int | None  # the processes' largest


def parse_gpu_tres(ave: str, peak: str, gpus: int, tasks: int = 1,
                   total: str = "") -> GpuTres:
    """One step's ``TRESUsageInAve`` and ``TRESUsageInMax``, on ``gpus`` GPUs, with
    ``tasks`` tasks and its ``TRESUsageInTot`` (when asked for).

        cpu=15:33:58,...,gres/gpumem=20500736K,gres/gpuutil=90,mem=1294440K,...
        -> GpuTres(utilization=0.9, memory_bytes=20992753664)   (one GPU)

    The utilisation is taken as the sum over the step's GPUs (the plugin adds up the
    figures of a task's processes) and shared out over them; a one-GPU step reads as it is.
    The sum over the tasks is ``total``'s, else the mean ``ave`` times ``tasks``.
    """
    util = parse_tres(total).get("gres/gpuutil", "") if total else ""
    times = 1
    if not util:
        util, times = parse_tres(ave).get("gres/gpuutil", ""), max(1, tasks)
    mem = parse_tres(peak).get("gres/gpumem", "")
    try:
        utilization = float(util) * times / 100 / max(1, gpus) if util else None
    except ValueError:
        utilization = None
    return GpuTres(utilization, parse_memory(mem) if mem else None)
