"""JOBREPORT_GPU_METRICS=tres: a job's GPU figures from its steps' usage TRES (Slurm's
``gres/gpuutil`` and ``gres/gpumem``, ``webapp.sources.gpu_tres_values``), where no GPU exporter
is scraped.

They fill the very ``Usage`` fields the Prometheus sources fill, so every detector,
renderer and the waste read them as they read series: one single-point series per
allocated GPU (at the job's end) holding the job's utilisation, and one holding the GPU
memory peak. ``Usage.gpu_figures_from`` names the source: the coverage section says the
GPU verdicts rest on Slurm's accounting (never withheld for want of samples), the plots
leave out a GPU plot (there is no series to draw), and ``Usage.empty`` still means that
Prometheus recorded nothing (so the archive stands in once it has lost the job).

What they cannot say: how the use went over time, and which GPU did what. The TRES is
one figure per step, its GPUs averaged together (one busy GPU beside an idle one reads
as two half-busy ones), so every GPU of the job gets the same utilisation, and the series'
labels ``<node>/<k>`` count the job's GPUs on a node (the TRES names no device). The card's
memory is not in the TRES: ``gpu_memory_total_bytes`` stays unknown. A step's TRES is
recorded when it ends: a running job has none yet. Where no step has them (Slurm's gpu
accounting not recording), the report has a gap saying so, never a zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from webapp.model import Gap, JobReport, Series, Step
from webapp.sources.gpu_metrics import TRES
from webapp.sources.gpu_tres_values import GpuTres, parse_gpu_tres
from webapp.states import started

AUDIT_LINE = (f"GPU figures from {TRES.exporter}", TRES.note)
NOTE = (f"GPU figures come from {TRES.exporter}: one figure per job step, weighted by its "
        "run time and averaged over the job's GPUs. There is no series per GPU, so no GPU "
        "plot, and every GPU shows the same utilisation.")
RUNNING = ("Slurm records a step's gres/gpuutil and gres/gpumem when the step ends, so the "
           "job's GPU use is known once it has ended")
NOT_RECORDED = ("no step of this job has {what} in its usage TRES (not recorded by Slurm's "
                "GPU accounting here), so its GPU {figure} not known")
MEMORY_LABEL = "gres/gpumem"  # the peak is a task's over its GPUs, not one GPU's


def job_gpu_tres(steps: Iterable[Step], gpus: int, elapsed: float | None) -> GpuTres:
    """The job's GPU figures from its steps' usage TRES: what the report shows and judges.

    Utilisation, 0..1 of the job's ``gpus`` GPUs (G) over its run (E, ``elapsed``)::

        U = min(1, sum over steps s of u_s * min(e_s, E) / E)

    where u_s is step s's gres/gpuutil summed over its tasks (TRESUsageInTot, else
    TRESUsageInAve x NTasks) / 100, shared out over the job's G GPUs
    (``parse_gpu_tres(..., gpus=G)``), and e_s its elapsed time: each step's utilisation
    weighted by the share of the job's run it took (a step's record may be a second
    longer than its job's). Steps that ran side by side add up (the batch step waiting
    for its srun steps adds its own none), and a GPU left idle between steps counts as
    idle, as a GPU's series over the run would show it. Steps without a gres/gpuutil are
    left out; None when no step has one, or E is not known.

    Memory: the largest gres/gpumem of any step (TRESUsageInMax: the step's largest
    task's, over its GPUs); None when no step has one.
    """
    total, util_seen, peaks = 0.0, False, []
    for step in steps:
        got = parse_gpu_tres(step.tres_usage_in_ave or "", step.tres_usage_in_max or "",
                             gpus, tasks=step.tasks or 1, total=step.tres_usage_in_tot or "")
        if got.memory_bytes is not None:
            peaks.append(got.memory_bytes)
        if got.utilization is not None and step.elapsed_seconds is not None and elapsed:
            util_seen = True
            total += got.utilization * min(step.elapsed_seconds, elapsed) / elapsed
    return GpuTres(min(1.0, total) if util_seen else None, max(peaks) if peaks else None)


def gpu_labels(nodes: tuple[str, ...], gpus: int) -> tuple[str, ...]:
    """``<node>/<k>`` for each of ``gpus`` GPUs, spread evenly over ``nodes`` in order
    (``k`` counts a node's GPUs from 0; the TRES names no device)."""
    if not nodes:
        return tuple(f"gpu/{k}" for k in range(gpus))
    counts: dict[str, int] = {}
    out = []
    for i in range(gpus):
        node = nodes[i * len(nodes) // gpus]
        out.append(f"{node}/{counts.get(node, 0)}")
        counts[node] = counts.get(node, 0) + 1
    return tuple(out)


def with_gpu_tres(report: JobReport) -> JobReport:
    """``report`` with its GPU figures from its steps' TRES (``job_gpu_tres``), and the
    audit naming the source; a gap for each figure the TRES does not give. A job without
    GPUs, or not started, is returned as it is."""
    if not report.gpus or not started(report.state) or report.start_time is None:
        return report
    usage = report.usage
    queries = usage.queries if AUDIT_LINE in usage.queries else (*usage.queries, AUDIT_LINE)
    usage = dataclasses.replace(usage, queries=queries)
    if report.unfinished or report.end_time is None:
        gap = Gap(TRES.exporter, RUNNING)
        return dataclasses.replace(report, usage=usage, gaps=(*report.gaps, gap))
    got = job_gpu_tres(report.steps, report.gpus, report.elapsed_seconds)
    gaps = list(report.gaps)
    if got.utilization is None and got.memory_bytes is None:
        gaps.append(Gap(TRES.exporter, NOT_RECORDED.format(
            what="gres/gpuutil or gres/gpumem", figure="utilisation and memory are")))
        return dataclasses.replace(report, usage=usage, gaps=tuple(gaps))
    at = report.end_time.timestamp()
    util: tuple[Series, ...] = ()
    if got.utilization is None:
        gaps.append(Gap(TRES.exporter, NOT_RECORDED.format(what="gres/gpuutil",
                                                           figure="utilisation is")))
    else:
        util = tuple(Series(label, ((at, got.utilization),))
                     for label in gpu_labels(report.nodes, report.gpus))
    memory: tuple[Series, ...] = ()
    if got.memory_bytes is None:
        gaps.append(Gap(TRES.exporter, NOT_RECORDED.format(what="gres/gpumem",
                                                           figure="memory is")))
    else:
        memory = (Series(MEMORY_LABEL, ((at, float(got.memory_bytes)),)),)
    usage = dataclasses.replace(usage, gpu_utilization=util, gpu_memory_used=memory,
                                gpu_memory_total_bytes=None, gpu_figures_from=TRES.exporter)
    return dataclasses.replace(report, usage=usage, gaps=tuple(gaps),
                               notes=(*report.notes, NOTE))
