"""A job list's rows: a user's (or an account's) recent jobs with their efficiencies and waste.

Every figure is the report's own: CPU efficiency is ``model.cpu_efficiency``, the memory
peak ``report.peak``, GPU use ``model.gpu_utilization``. Per job, the first source that
has it wins, and the row says which:

- ``archive``: the ended-job archive's copy of the full report (the figures and the
  findings the report showed);
- ``sacct``: the figures the report computes when only sacct has the job (TotalCPU of the
  steps; the peak as seff's estimate), with GPU use from one Prometheus query for all
  jobs (the source JOBREPORT_GPU_METRICS chose: ``gpu_job_queries``; a GPU exporter's
  asked for the listed jobs' ids); findings are unknown until the job is archived or its
  report opened;
- ``accounting``: identity and request only (sacct did not answer).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from webapp.model import (
    AccountingJob,
    Finding,
    JobReport,
    SacctJob,
    SourceUnavailable,
    cpu_efficiency,
    memory_by_node,
    memory_judged,
)
from webapp.report.peak import sacct_peak
from webapp.report.precedence import sacct_memory_nodes
from webapp.sources.accounting import LIST_LIMIT
from webapp.sources.gpu_job_queries import duration, mean_per_job
from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.sources.prometheus import matchers
from webapp.sources.prometheus_bulk import id_selector
from webapp.sources.protocols import (
    ClusterScoped,
    RecentJobsReader,
    VectorReader,
)
from webapp.states import ended
from webapp.unused import Held, gpus_busy, unused

if TYPE_CHECKING:
    from webapp.archive.store import Archive

RUNNING_NOTE = "not ended: the report has the live figures"
# Mean GPU utilisation of each job (gpu_job_queries.mean_per_job): jobs-exporter's in one
# query for all jobs; a GPU exporter's asked by the listed jobs' ids, this many a query.
ID_CHUNK = 200


@dataclass(frozen=True)
class TopFinding:
    """The most severe of a job's findings: the first its report shows."""

    name: str
    severity: str  # Severity's value: critical, warning, info
    message: str


def top_finding(findings: Iterable[Finding]) -> TopFinding | None:
    """The first of ``findings`` in the report's order (most severe first, stable)."""
    first = min(findings, key=lambda f: f.severity.rank, default=None)
    return None if first is None else TopFinding(first.name, first.severity.value,
                                                  first.message)


@dataclass(frozen=True)
class JobRow:
    """One line of a job list (seconds, bytes, ratios 0..1; None when unknown)."""

    cluster: str
    job_id: str
    name: str
    user: str
    account: str
    state: str
    submit: datetime | None
    end: datetime | None
    elapsed: float | None
    cpus: int | None
    nodes: int
    gpus: int
    memory_requested_per_node: int | None
    cpu_efficiency: float | None = None
    memory_peak: int | None = None
    memory_efficiency: float | None = None
    gpu_utilization: float | None = None
    findings: int | None = None
    top_finding: TopFinding | None = None  # known where ``findings`` is
    source: str = "accounting"
    missing: tuple[str, ...] = ()  # why a figure is blank, in plain words
    raw_id: str = ""  # the numeric id the exporter labels series with (an array task's own)
    # What the waste columns are computed from (``webapp.unused``, as the report's own).
    cpu_seconds: float | None = None
    gpus_busy: float | None = None  # the GPUs' mean utilisations summed
    memory_requested: int | None = None  # the whole job's (per node x nodes)
    # Each node's own (request, peak), as the report's (``JobReport.memory_by_node``)
    memory_by_node: tuple[tuple[int, int | None], ...] = ()
    memory_used: int | None = None  # an archived staff row's ``Held.memory_used``

    def _unused(self, resource: str) -> float | None:
        amount = unused(Held(self.elapsed, self.cpus, self.cpu_seconds, self.gpus,
                             self.gpus_busy, self.memory_requested, self.memory_peak,
                             self.nodes, self.memory_by_node, self.memory_used)).get(resource)
        return amount.unused if amount else None

    @property
    def cpu_hours_unused(self) -> float | None:
        """Core-hours allocated and not used (the report's waste figure)."""
        return self._unused("cpu")

    @property
    def gpu_hours_unused(self) -> float | None:
        """GPU-hours allocated and idle (the report's waste figure); 0 without GPUs."""
        return self._unused("gpu") if self.gpus else 0.0

    @property
    def memory_gib_hours_unused(self) -> float | None:
        """Memory GiB-hours requested and not used (the report's waste figure)."""
        return self._unused("memory")



# -- the rows, from the sources ---------------------------------------------------------
def base_row(job: AccountingJob) -> JobRow:
    """Identity, state and request from the accounting view."""
    elapsed = None
    if job.start_time is not None:
        elapsed = ((job.end_time or datetime.now(UTC)) - job.start_time).total_seconds()
    nodes = max(1, len(job.nodes))
    per_node = job.memory_requested_bytes // nodes if job.memory_requested_bytes else None
    return JobRow(job.cluster, job.job_id, job.job_name or "", job.user or "",
                  job.account or "", job.state, job.submit_time, job.end_time, elapsed,
                  job.cpus, nodes, job.gpus, per_node, raw_id=str(job.job),
                  memory_requested=job.memory_requested_bytes)


def from_report(row: JobRow, report: JobReport) -> JobRow:
    """The archived report's own figures and findings."""
    return replace(row, elapsed=report.elapsed_seconds, cpu_efficiency=report.cpu_efficiency,
                   memory_peak=report.memory_peak_bytes,
                   memory_efficiency=report.memory_efficiency,
                   gpu_utilization=report.gpu_utilization if row.gpus else None,
                   findings=len(report.findings), top_finding=top_finding(report.findings),
                   source="archive", missing=(),
                   cpu_seconds=report.cpu_seconds,
                   gpus_busy=gpus_busy(s.mean() for s in report.usage.gpu_utilization),
                   memory_requested=report.memory_requested_bytes,
                   memory_requested_per_node=(report.memory_requested_per_node
                                              or row.memory_requested_per_node),
                   memory_by_node=report.memory_by_node)


def row_from_report(report: JobReport) -> JobRow:
    """A list row from a built report alone (its figures, its findings)."""
    nodes = max(1, len(report.nodes))
    row = JobRow(report.cluster, report.job_id, report.job_name or "", report.user or "",
                 report.account or "", report.state or "", report.submit_time,
                 report.end_time, report.elapsed_seconds, report.cpus, nodes, report.gpus,
                 report.memory_requested_per_node)
    return replace(from_report(row, report), source="report")


def from_sacct(row: JobRow, job: SacctJob, gpu_mean: float | None,
               gpu_missing: str | None) -> JobRow:
    """The figures the report computes from sacct alone (it says the peak is an estimate)."""
    elapsed = job.elapsed_seconds if job.elapsed_seconds is not None else row.elapsed
    cpus = job.cpus or row.cpus
    missing = ["findings: not archived yet (open the report)"]
    seconds = job.total_cpu_seconds
    if seconds is None and not job.steps:
        seconds = job.alloc_cpu_seconds
    peak = sacct_peak(job)
    # each node's request and peak as the report judges them (a list row is one job, or
    # one het component, of its own)
    memory = sacct_memory_nodes(job, row.memory_requested)
    judged = memory_judged(memory)
    per_node = row.memory_requested_per_node
    mem_eff = peak.bytes / per_node if peak is not None and per_node else None
    if judged is not None and judged.peak_bytes is not None and judged.requested_bytes:
        per_node, mem_eff = judged.requested_bytes, judged.peak_bytes / judged.requested_bytes
    if peak is None:
        missing.append("memory: sacct has no MaxRSS")
    gpu = gpu_mean if row.gpus else None
    if row.gpus and gpu is None:
        missing.append(gpu_missing or "GPU use: no samples in Prometheus")
    return replace(row, elapsed=elapsed, cpu_efficiency=cpu_efficiency(seconds, elapsed, cpus),
                   memory_peak=peak.bytes if peak else None, memory_efficiency=mem_eff,
                   memory_requested_per_node=per_node,
                   memory_by_node=memory_by_node(memory),
                   gpu_utilization=gpu, source="sacct", missing=tuple(missing),
                   cpu_seconds=seconds,
                   # one mean over the job's GPUs is all the bulk query gives
                   gpus_busy=None if gpu is None else gpu * row.gpus)


@dataclass
class ListSources:
    """What one cluster's list reads (the report service's own sources)."""

    accounting: RecentJobsReader[AccountingJob]
    sacct: RecentJobsReader[SacctJob]
    prometheus: VectorReader
    archived: Callable[[str, str], JobReport | None]  # (cluster, job id) -> report or None
    gaps: list[str] = field(default_factory=list)


def list_jobs(src: ListSources, since: datetime, now: datetime, user: str | None = None,
              account: str | None = None) -> list[JobRow]:
    """One user's or one account's jobs since ``since`` on one cluster, newest first.

    Raises SourceUnavailable when the accounting view fails (it decides who sees what);
    sacct or Prometheus failing leaves blanks and a line in ``src.gaps``."""
    jobs = src.accounting.recent(since, user=user, account=account)
    if len(jobs) >= LIST_LIMIT:
        src.gaps.append(f"only the newest {LIST_LIMIT} jobs are listed: choose fewer days")
    rows = [base_row(j) for j in jobs]
    pending: list[int] = []
    for i, row in enumerate(rows):
        report = src.archived(row.cluster, row.job_id) if ended(row.state) else None
        if report is not None:
            rows[i] = from_report(row, report)
        else:
            pending.append(i)
    if not pending:
        return rows
    try:
        sacct = {j.job_id: j for j in src.sacct.recent(since, user=user,
                                                       account=account)}
    except SourceUnavailable as exc:
        src.gaps.append(f"sacct unavailable ({exc.reason}): efficiencies of jobs not yet "
                        "archived are blank")
        sacct = {}
    gpu, gpu_missing = _gpu_means(src, rows, pending, since, now)
    for i in pending:
        job = sacct.get(rows[i].job_id)
        if not ended(rows[i].state):
            rows[i] = replace(rows[i], missing=(RUNNING_NOTE,))
        elif job is not None:
            rows[i] = from_sacct(rows[i], job, gpu.get(rows[i].job_id), gpu_missing)
        else:
            rows[i] = replace(rows[i], missing=("sacct does not list this job",))
    return rows


def _gpu_means(src: ListSources, rows: list[JobRow], pending: list[int], since: datetime,
               now: datetime) -> tuple[dict[str, float], str | None]:
    """Job id -> mean GPU utilisation over its samples in the window: one query (one per
    ``ID_CHUNK`` GPU jobs where a GPU exporter's series are read)."""
    if not any(rows[i].gpus for i in pending):
        return {}, None
    window = f"{max(1, math.ceil((now - since).total_seconds()))}s"
    # A reader that is no PrometheusSource (none configured, withheld, a test's) has no
    # other cluster's series to keep out, and reads jobs-exporter's.
    scope = (src.prometheus.cluster_matcher
             if isinstance(src.prometheus, ClusterScoped) else "")
    gm: GpuMetrics = getattr(src.prometheus, "gpu_metrics", JOBS)
    if gm is JOBS or not gm.series:  # every job's series in one query, as always
        selectors = [scope]
    else:  # a GPU exporter's, the listed jobs' alone (each mean is a subquery)
        ids = sorted({rows[i].raw_id for i in pending if rows[i].gpus and rows[i].raw_id})
        selectors = [matchers(id_selector(ids[k:k + ID_CHUNK], job_label=gm.job_label),
                              scope) for k in range(0, len(ids), ID_CHUNK)]
    node = getattr(src.prometheus, "node_label", "") or "instance"
    step = duration(getattr(src.prometheus, "scrape_interval", 30.0))
    by_raw: dict[str, float] = {}
    try:
        for sel in selectors:
            answer = src.prometheus.vector(mean_per_job(gm, sel, node, window, step),
                                           now.timestamp())
            by_raw.update((labels.get("jobid", ""), value) for labels, value in answer)
    except SourceUnavailable as exc:
        return {}, f"GPU use: {exc.reason}"
    # The exporter names a job by its numeric id (an array task's own, not ``123_4``).
    return {rows[i].job_id: by_raw[rows[i].raw_id] for i in pending
            if rows[i].raw_id in by_raw}, None


def archived_report(
    open_archive: Callable[[], Archive | None],
) -> Callable[[str, str], JobReport | None]:
    """(cluster, job id) -> the archived report, None when not archived (or no archive)."""
    from webapp.report.archived import from_archive

    def lookup(cluster: str, job_id: str) -> JobReport | None:
        archive = open_archive()
        record = archive.get(cluster, job_id) if archive is not None else None
        return from_archive(record) if record is not None else None

    return lookup
