"""Where a report's GPU figures come from (JOBREPORT_GPU_METRICS): the exporter's own
``jobs_gpu_*`` series, or a GPU exporter the site already runs.

One table per source: per node and GPU, the utilisation (0..1) and the memory used
(bytes); per GPU the card's memory (bytes); each converted from the source's units, and
each series found by the job id in the source's own label. The rest of the report reads
the same ``Usage`` whichever source (series labelled ``<node>/<gpu>``).

- ``jobs``: jobs-exporter's ``jobs_gpu_*`` (label ``jobid``).
- ``dcgm``: NVIDIA dcgm-exporter run with ``--hpc-job-mapping-dir`` (label ``hpc_job``).
  Utilisation is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a ratio), else ``DCGM_FI_DEV_GPU_UTIL``
  (percent; GPUs without profiling metrics). Memory ``DCGM_FI_DEV_FB_USED`` (MiB); the
  card's is FB_FREE + FB_USED + FB_RESERVED. A MIG card is left out: dcgm-exporter's job
  mapping names a job per card, and labels every instance of the card (and the card) with
  every job on it (dcgm-exporter#369), so a job's own instance cannot be told.
- ``amd``: AMD device-metrics-exporter with its Slurm labels (label ``job_id``):
  ``gpu_gfx_activity`` (percent), ``gpu_used_vram`` and ``gpu_total_vram`` (MB as amdsmi
  counts them, 2^20 bytes: an MI300X's 196,592). GPU ``gpu_id``. Series whose ``job_id`` is
  empty (the prolog's labels not applied: device-metrics-exporter#162, #195, #231) match
  no job. The Debian package's ``amd_`` prefix is accepted.
- ``tres``: no series, no PromQL; Slurm's own ``gres/gpuutil`` and ``gres/gpumem`` TRES,
  which sacct prints per step (``SacctSource(gpu_tres=True)`` asks for TRESUsageInAve,
  TRESUsageInTot and TRESUsageInMax), read by ``webapp.sources.gpu_tres_values``; the report
  makes the job's figures of its steps' (``webapp.report.gpu_from_tres``): its utilisation,
  each step's weighted by its run time, and the largest step's memory, into the same
  ``Usage`` fields, one point per GPU. No shape over time, no figure per GPU (a step's GPUs
  are averaged together), no card's memory; none until a step has ended.

Templates take ``{sel}`` (the job's matchers, the job label included), ``{node}`` (the
node label), and for the card's memory ``{fn}`` (a range function) and ``{rng}`` (a range).
"""

from __future__ import annotations

from dataclasses import dataclass

from jobreport_common.units import MIB


@dataclass(frozen=True)
class GpuMetrics:
    """One source's GPU queries; ``name`` is its JOBREPORT_GPU_METRICS value."""

    name: str
    exporter: str  # how the report names the source
    job_label: str  # the label holding the Slurm job id
    utilization: str = ""  # per node and GPU, 0..1; "" where the source has no series
    memory_used: str = ""  # per node and GPU, bytes
    memory_total: str = ""  # per node and GPU, bytes, over a range ({fn}, {rng})
    note: str = ""  # what the audit says of it (metrics, units, what is left out)

    @property
    def series(self) -> bool:
        """Does this source answer from Prometheus series?"""
        return bool(self.utilization)


JOBS = GpuMetrics(
    name="jobs", exporter="jobs-exporter", job_label="jobid",
    utilization="max by ({node}, gpu) (jobs_gpu_utilization_ratio{{{sel}}})",
    memory_used="max by ({node}, gpu) (jobs_gpu_memory_used_bytes{{{sel}}})",
    memory_total="max by ({node}, gpu) ({fn}(jobs_gpu_memory_total_bytes{{{sel}}}[{rng}]))",
)

# dcgm-exporter: a card in MIG mode has series with a GPU_I_ID; all of that card is left out.
_DCGM_MIG = ('group by ({node}, gpu) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel},GPU_I_ID!=""}} '
             'or DCGM_FI_DEV_FB_USED{{{sel},GPU_I_ID!=""}})')
DCGM = GpuMetrics(
    name="dcgm", exporter="dcgm-exporter", job_label="hpc_job",
    utilization=(
        '(max by ({node}, gpu) (DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{sel},GPU_I_ID=""}}) '
        'or max by ({node}, gpu) (DCGM_FI_DEV_GPU_UTIL{{{sel},GPU_I_ID=""}}) / 100) '
        f"unless on ({{node}}, gpu) {_DCGM_MIG}"),
    memory_used=(
        f'max by ({{node}}, gpu) (DCGM_FI_DEV_FB_USED{{{{{{sel}},GPU_I_ID=""}}}}) * {MIB} '
        f"unless on ({{node}}, gpu) {_DCGM_MIG}"),
    memory_total=(
        'sum by ({node}, gpu) ({fn}({{__name__=~"DCGM_FI_DEV_FB_(FREE|USED|RESERVED)",'
        '{sel},GPU_I_ID=""}}[{rng}])) * ' f"{MIB} unless on ({{node}}, gpu) {_DCGM_MIG}"),
    note=("dcgm-exporter, label hpc_job: utilisation DCGM_FI_PROF_GR_ENGINE_ACTIVE, else "
          "DCGM_FI_DEV_GPU_UTIL / 100; memory DCGM_FI_DEV_FB_USED (MiB), the card's "
          "FB_FREE + FB_USED + FB_RESERVED; MIG cards left out (dcgm-exporter#369: every "
          "instance carries every job of its card)"),
)


def _amd(metric: str) -> str:
    """An AMD metric with or without the Debian package's ``amd_`` prefix, its GPU
    (``gpu_id``) copied to ``gpu``."""
    return (f'label_replace({{{{__name__=~"(amd_)?{metric}",{{sel}}}}}}, '
            '"gpu", "$1", "gpu_id", "(.*)")')


AMD = GpuMetrics(
    name="amd", exporter="AMD device-metrics-exporter", job_label="job_id",
    utilization=f"max by ({{node}}, gpu) ({_amd('gpu_gfx_activity')}) / 100",
    memory_used=f"max by ({{node}}, gpu) ({_amd('gpu_used_vram')}) * {MIB}",
    memory_total=(
        'max by ({node}, gpu) (label_replace({fn}({{__name__=~"(amd_)?gpu_total_vram",'
        '{sel}}}[{rng}]), "gpu", "$1", "gpu_id", "(.*)"))' f" * {MIB}"),
    note=("AMD device-metrics-exporter, label job_id: utilisation gpu_gfx_activity / 100 "
          "(unpartitioned GPUs only), memory gpu_used_vram and gpu_total_vram (MiB); "
          "series with an empty job_id (device-metrics-exporter#162, #195, #231) match no "
          "job"),
)

TRES = GpuMetrics(
    name="tres", exporter="Slurm's TRES (gres/gpuutil, gres/gpumem)", job_label="",
    note=("Slurm's accounting, sacct TRESUsageInTot (else TRESUsageInAve x NTasks) "
          "gres/gpuutil and TRESUsageInMax gres/gpumem: one figure per step, the job's "
          "utilisation each step's weighted by its run time and averaged over the job's "
          "GPUs, its memory the largest step's; no series, no figure per GPU"),
)

SOURCES: dict[str, GpuMetrics] = {m.name: m for m in (JOBS, DCGM, AMD, TRES)}


def gpu_metrics(name: str) -> GpuMetrics:
    """The source a JOBREPORT_GPU_METRICS value names (the setting checks it first)."""
    return SOURCES[name]


def total_query(metrics: GpuMetrics, sel: str, node: str, fn: str, rng: str,
                agg: str = "max by ({node})") -> str:
    """The card's memory: the largest over the job's GPUs, per node by default."""
    inner = metrics.memory_total.format(sel=sel, node=node, fn=fn, rng=rng)
    return f"{agg.format(node=node)} ({inner})"


# Each GPU's raw samples over the run (prometheus_coverage), from the series every card of
# the source has: name -> (selector, label naming the GPU).
_COVERED = {
    "dcgm": ('DCGM_FI_DEV_FB_USED{{{sel},GPU_I_ID=""}}', "gpu"),
    "amd": ('{{__name__=~"(amd_)?gpu_used_vram",{sel}}}', "gpu_id"),
}


def gpu_coverage_query(metrics: GpuMetrics, sel: str, node: str, span: int
                       ) -> tuple[str, str]:
    """(PromQL, series label) of the GPUs' samples for a GPU exporter's source."""
    if metrics.name not in _COVERED:  # no series: nothing covers the GPUs
        return "(vector(0) > 1)[1s:1s]", f"{node}/gpu"
    selector, gpu = _COVERED[metrics.name]
    return f"{selector.format(sel=sel)}[{span}s]", f"{node}/{gpu}"
