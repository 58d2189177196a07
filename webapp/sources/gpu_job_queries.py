"""Per-job GPU figures over a window, from the source JOBREPORT_GPU_METRICS chose: what
the readers that are no job report ask (the live watch, a job list, a user's history,
the staff report's window).

Each builder takes the source (``gpu_metrics.GpuMetrics``) and the matchers that select
the jobs (``job_selector``, ``id_selector`` with the source's ``job_label``, or
``any_job``), and gives PromQL whose answer is labelled ``jobid`` whatever the source
(``label_replace`` from its own job label), so the readers' parsers are the same for all:

- ``jobs``: today's queries, word for word: ``*_over_time`` of ``jobs_gpu_*`` samples.
- ``dcgm``, ``amd``: the source's own per node and GPU template (its units converted, MIG
  cards or empty job labels left out as for the report), reduced over the window by a
  subquery at ``step`` (the scrape interval): the mean of the values the report's range
  query reads, so both agree. A series counts until Prometheus marks it stale (the job's
  labels gone from the exporter's page); without staleness markers (backfilled blocks)
  an ended job's last value is repeated for the 5 min lookback.
- ``tres`` (no series): a query that answers nothing (``NOTHING``), so the figure is
  unknown, never 0.
"""

from __future__ import annotations

from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.sources.prometheus import braced, matchers, promql_string

NOTHING = "vector(0) > 1"  # an empty answer: a source without series

# jobs-exporter's own, as the readers asked before the source could be chosen.
# {scope}: the matchers in braces, or nothing (``braced``).
JOBS_MEAN = "avg by (jobid) (avg_over_time(jobs_gpu_utilization_ratio{scope}[{w}]))"
JOBS_MEMORY_PEAK = "max by (jobid) (max_over_time(jobs_gpu_memory_used_bytes{scope}[{w}]))"
JOBS_CARD_MEMORY = "max by (jobid) (max_over_time(jobs_gpu_memory_total_bytes{scope}[{w}]))"
JOBS_GPU_MEAN = "avg by ({node}, gpu) (avg_over_time(jobs_gpu_utilization_ratio{scope}[{w}]))"
JOBS_GPU_SAMPLES = (
    "max by ({node}, gpu) (count_over_time(jobs_gpu_utilization_ratio{scope}[{w}]))")
JOBS_BUSY = ("sum by (jobid) (avg by (jobid, {node}, gpu) "
             "(avg_over_time(jobs_gpu_utilization_ratio{scope}[{w}])) >= bool {idle})")


def duration(seconds: float) -> str:
    """A PromQL duration: whole seconds (``30s``), else milliseconds (``2500ms``)."""
    if seconds == int(seconds):
        return f"{max(1, int(seconds))}s"
    return f"{max(1, round(seconds * 1000))}ms"


def any_job(gm: GpuMetrics, cluster_matcher: str = "") -> str:
    """Matchers for every job's GPU series of the source: jobs-exporter's every series
    (the cluster's: as before), a GPU exporter's those whose job label is set."""
    if gm is JOBS or not gm.series:
        return cluster_matcher
    return matchers(f"{gm.job_label}!={promql_string('')}", cluster_matcher)


def as_jobid(gm: GpuMetrics, expr: str) -> str:
    """``expr`` with the source's job label copied to ``jobid``."""
    if gm.job_label == "jobid":
        return expr
    return f'label_replace({expr}, "jobid", "$1", {promql_string(gm.job_label)}, "(.*)")'


def _over(fn: str, template: str, sel: str, node: str, w: str, step: str) -> str:
    """``fn`` over the window of the template's values, sampled every ``step``."""
    return f"{fn}(({template.format(sel=sel, node=node)})[{w}:{step}])"


def _per_job_gpu(gm: GpuMetrics, fn: str, template: str, sel: str, node: str, w: str,
                 step: str) -> str:
    """Per job, node and GPU (labelled ``jobid``)."""
    return as_jobid(gm, _over(fn, template, sel, f"{gm.job_label}, {node}", w, step))


def mean_per_job(gm: GpuMetrics, sel: str, node: str, w: str, step: str) -> str:
    """Each job's mean utilisation (0..1) over the window, its GPUs' means averaged."""
    if gm is JOBS:
        return JOBS_MEAN.format(scope=braced(sel), w=w)
    if not gm.series:
        return NOTHING
    means = _per_job_gpu(gm, "avg_over_time", gm.utilization, sel, node, w, step)
    return f"avg by (jobid) ({means})"


def memory_peak_per_job(gm: GpuMetrics, sel: str, node: str, w: str, step: str) -> str:
    """Each job's largest memory used on any of its GPUs over the window (bytes)."""
    if gm is JOBS:
        return JOBS_MEMORY_PEAK.format(scope=braced(sel), w=w)
    if not gm.series:
        return NOTHING
    peaks = _per_job_gpu(gm, "max_over_time", gm.memory_used, sel, node, w, step)
    return f"max by (jobid) ({peaks})"


def card_memory_per_job(gm: GpuMetrics, sel: str, node: str, w: str) -> str:
    """Each job's largest card memory (bytes): the source's own range template, no
    subquery. A card's memory does not change: each GPU's last value in the window, as the
    report reads it (``last_over_time`` keeps the series' names, so dcgm-exporter's three
    parts add up where ``max_over_time``'s would clash)."""
    if gm is JOBS:
        return JOBS_CARD_MEMORY.format(scope=braced(sel), w=w)
    if not gm.memory_total:
        return NOTHING
    inner = gm.memory_total.format(sel=sel, node=f"{gm.job_label}, {node}",
                                   fn="last_over_time", rng=w)
    return f"max by (jobid) ({as_jobid(gm, inner)})"


def busy_gpus_per_job(gm: GpuMetrics, sel: str, node: str, w: str, step: str,
                      idle: float) -> str:
    """Per job, how many of its GPUs had a mean utilisation of at least ``idle`` over the
    window (0 when it had GPU series but none busy; absent when it had none)."""
    if gm is JOBS:
        return JOBS_BUSY.format(scope=braced(sel), w=w, node=node, idle=idle)
    if not gm.series:
        return NOTHING
    means = _per_job_gpu(gm, "avg_over_time", gm.utilization, sel, node, w, step)
    return f"sum by (jobid) ({means} >= bool {idle})"


def mean_per_gpu(gm: GpuMetrics, sel: str, node: str, w: str, step: str) -> str:
    """One job's mean utilisation per node and GPU over the window (``sel``: its own)."""
    if gm is JOBS:
        return JOBS_GPU_MEAN.format(scope=braced(sel), w=w, node=node)
    if not gm.series:
        return NOTHING
    return f"avg by ({node}, gpu) ({_over('avg_over_time', gm.utilization, sel, node, w, step)})"


def samples_per_gpu(gm: GpuMetrics, sel: str, node: str, w: str, step: str) -> str:
    """How many values each GPU's mean rests on: its samples (jobs-exporter's), or the
    steps of the window at which the source had a value."""
    if gm is JOBS:
        return JOBS_GPU_SAMPLES.format(scope=braced(sel), w=w, node=node)
    if not gm.series:
        return NOTHING
    return (f"max by ({node}, gpu) "
            f"({_over('count_over_time', gm.utilization, sel, node, w, step)})")
