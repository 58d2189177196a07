"""Cluster source: a job's wait in the queue, from slurm-exporter's series in Prometheus.

Named PromQL over the job's pending window [submit, start]: the reasons Slurm gave it
(``slurm_job_pending_info{jobid}``, one series per reason), its partition just before it
was submitted (idle/total CPUs, available GPUs per type, pending jobs), and the most GPUs
of each type its partition had available while it waited. Every value that comes from
Slurm (job id, partition, cluster) enters PromQL through ``promql_string``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.model import PendingReason, QueueContext, Series
from webapp.sources.prometheus import PrometheusSource, choose_step, promql_string

# {sel}: cluster (+ partition) matchers; {job}: the job's matchers; {w}: the wait window.
QUEUE_QUERIES: dict[str, str] = {
    # Did slurm-exporter's squeue run at all while the job waited (else: no context).
    "seen": 'max(max_over_time(slurm_up{{{cluster},source="squeue"}}[{w}]))',
    "reasons": "max by (reason) (slurm_job_pending_info{{{job}}})",
    "cpus_idle": "sum(slurm_partition_cpus_idle{{{sel}}})",
    "cpus_total": "sum(slurm_partition_cpus{{{sel}}})",
    "gpus_available": "max by (gpu_type) (slurm_partition_gpus_available{{{sel}}})",
    # No pending job means no series: 0 while squeue was answering.
    "queue_length": 'sum(slurm_pending_jobs{{{sel}}})'
    ' or (0 * max(slurm_up{{{cluster},source="squeue"}}))',
    "gpus_available_max": (
        "max by (gpu_type) (max_over_time(slurm_partition_gpus_available{{{sel}}}[{w}]))"
    ),
}


def _queries(cluster: str, partition: str | None, job_id: str, window: float) -> dict[str, str]:
    c = f"cluster={promql_string(cluster)}"
    sel = f"{c},partition={promql_string(partition or '')}"
    job = f"{c},jobid={promql_string(job_id)}"
    w = f"{max(int(window), 1)}s"
    return {k: q.format(cluster=c, sel=sel, job=job, w=w) for k, q in QUEUE_QUERIES.items()}


def reasons_from(series: list[Series], step: float, limit: float | None) -> list[PendingReason]:
    """One ``PendingReason`` per series (labelled by reason), in the order first seen;
    seconds = samples x step, never more than the whole wait."""
    out = []
    for s in series:
        if not s.points or not s.label or s.label == "?":
            continue
        seconds = len(s.points) * step
        if limit is not None:
            seconds = min(seconds, limit)
        out.append(PendingReason(s.label, seconds, datetime.fromtimestamp(s.points[0][0], UTC)))
    return sorted(out, key=lambda r: r.first_seen)


def _value(series: list[Series]) -> int | None:
    values = [v for s in series for v in s.values]
    return None if not values else int(sum(values))


def _per_type(series: list[Series]) -> tuple[tuple[str, int], ...]:
    return tuple((s.label, int(s.values[0])) for s in series if s.values)


class ClusterSource:
    """Queue context of one job from the ``slurm_*`` series of one cluster."""

    name = "cluster"

    def __init__(self, prometheus: PrometheusSource, cluster: str) -> None:
        self.prometheus = prometheus
        self.cluster = cluster

    def queue(self, job_id: str, partition: str | None, submit: datetime,
              start: datetime | None, now: datetime | None = None) -> QueueContext:
        """The job's wait; raises SourceUnavailable when Prometheus fails."""
        now = now or datetime.now(UTC)
        end = start or now
        pending = max((end - submit).total_seconds(), 0.0)
        t0, t1 = submit.timestamp(), end.timestamp()
        q = _queries(self.cluster, partition, job_id, t1 - t0 + self.prometheus.scrape_interval)
        p = self.prometheus
        base = QueueContext(partition=partition, pending_seconds=pending)
        if _value(p.instant(q["seen"], t1, "")) is None:
            return base  # no slurm-exporter data over the wait: the caller names the gap
        step = choose_step(t1 - t0, p.scrape_interval)
        reasons = reasons_from(p.range(q["reasons"], t0, t1, "reason"), step, pending)
        return QueueContext(
            partition=partition,
            pending_seconds=pending,
            reasons=tuple(reasons),
            cpus_idle=_value(p.instant(q["cpus_idle"], t0, "")),
            cpus_total=_value(p.instant(q["cpus_total"], t0, "")),
            gpus_available=_per_type(p.instant(q["gpus_available"], t0, "gpu_type")),
            queue_length=_value(p.instant(q["queue_length"], t0, "")),
            gpus_available_max=_per_type(p.instant(q["gpus_available_max"], t1, "gpu_type")),
            seen=True,
        )
