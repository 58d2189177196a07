"""Read the sources for one job and join them into one ``JobReport`` (findings are attached
by the service). This module does the I/O (the accounting view, sacct, Prometheus,
scontrol); which source wins for each figure is ``webapp.report.precedence``'s, pure.

A source that fails becomes a ``Gap``; only a job no source knows is ``JobNotFound``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from webapp.formatting import format_duration
from webapp.model import (
    AccountingJob,
    Gap,
    JobId,
    JobNotFound,
    JobReport,
    SacctJob,
    SourceUnavailable,
    TimeLimitKind,
    Usage,
)
from webapp.report.gpu_from_tres import with_gpu_tres
from webapp.report.peak import while_running
from webapp.report.precedence import Timing, join, owner, partition, time_limit, timing
from webapp.sources.protocols import (
    AccountingReader,
    JobFiguresReader,
    MetricsReader,
    PartitionReader,
    SacctReader,
)
from webapp.states import started

log = logging.getLogger(__name__)

ACCOUNTING_DOWN = "accounting database unreachable; owner and limits from sacct"
# Series this coarse (or coarser) are worth a note: plots of jobs over ~3.5 days.
COARSE_STEP = 300.0


@dataclass
class Records:
    """What the accounting view and sacct said of one job, and the gaps they left."""

    acct: AccountingJob | None = None
    sacct: SacctJob | None = None
    gaps: list[Gap] = field(default_factory=list)


def read_records(job_id: JobId, accounting: AccountingReader, sacct: SacctReader,
                 strict_accounting: bool = False,
                 on_owner: Callable[[str, str], None] | None = None) -> Records:
    """The accounting view's and sacct's records; raises JobNotFound when neither knows the
    job, SourceUnavailable when neither answered (or the view failed, if strict)."""
    gaps: list[Gap] = []
    acct: AccountingJob | None = None
    sj: SacctJob | None = None
    not_found = 0
    try:
        acct = accounting.job(job_id)
    except JobNotFound:
        not_found += 1
    except SourceUnavailable as exc:
        if strict_accounting:
            raise
        gaps.append(_gap(job_id, exc))
    told = False
    if on_owner is not None and acct is not None and acct.user and acct.job_name:
        on_owner(acct.user, acct.job_name)
        told = True
    try:
        # The view's tres_alloc already gave GPUs, memory and billing: sacct's AllocTRES
        # would repeat them at the cost of a second slurmdbd request.
        if acct is not None and isinstance(sacct, JobFiguresReader):
            sj = sacct.job_figures(job_id)
        else:
            sj = sacct.job(job_id)
    except JobNotFound:
        not_found += 1
    except SourceUnavailable as exc:
        gaps.append(_gap(job_id, exc))
    if on_owner is not None and not told:
        user, name = owner(acct, sj)
        if user and name:
            on_owner(user, name)
    if acct is None and sj is None:
        if not_found:
            raise JobNotFound(str(job_id))
        raise SourceUnavailable(
            "accounting",
            "; ".join(f"{g.source}: {g.reason}" for g in gaps),
            "; ".join(f"{g.source}: {g.detail}" for g in gaps if g.detail) or None,
        )
    if acct is None and sj is not None:
        # Users read a plain sentence; the driver's words stay in the gap's detail.
        gaps = [Gap(g.source, ACCOUNTING_DOWN, g.detail) if g.source == "accounting" else g
                for g in gaps]
    return Records(acct, sj, gaps)


def read_usage(job_id: JobId, prometheus: MetricsReader, t: Timing, now: datetime,
               resolution: str, gaps: list[Gap]) -> Usage:
    """What Prometheus recorded of the job; a gap (appended to ``gaps``) when nothing."""
    if not started(t.state):
        gaps.append(Gap("prometheus", f"the job has not started yet ({t.state}): no metrics"))
        return Usage()
    if t.start is None:
        gaps.append(Gap("prometheus", "the job's start time is unknown, so its metrics "
                                      "could not be looked up"))
        return Usage()
    try:
        ids = t.metrics_ids if len(t.metrics_ids) > 1 else JobId.of(t.metrics_id)
        usage = prometheus.usage(ids, t.start, t.end or now, t.nodes, resolution=resolution)
    except SourceUnavailable as exc:
        gaps.append(_gap(job_id, exc))
        return Usage()
    if usage.empty:
        gaps.append(Gap("prometheus",
                        "no metrics kept for this job (not scraped, or older than the retention)"))
    return while_running(usage, t.end.timestamp() if t.end else None)


def read_time_limit(records: Records, partitions: PartitionReader | None
                    ) -> tuple[TimeLimitKind | None, float | None]:
    """The records' limit, with ``Partition_Limit`` resolved through scontrol."""
    kind, seconds = time_limit(records.acct, records.sacct)
    name = partition(records.acct, records.sacct)
    if kind == TimeLimitKind.PARTITION and name and partitions is not None:
        try:
            kind, seconds = partitions.max_time(name)
        except SourceUnavailable as exc:
            # The report still says "the partition's limit"; only the figure is missing.
            log.info("partition %s: %s (%s)", name, exc.reason, exc.detail)
    return kind, seconds


def build_report(
    job_id: JobId,
    cluster: str,
    accounting: AccountingReader,
    sacct: SacctReader,
    prometheus: MetricsReader,
    now: datetime | None = None,
    strict_accounting: bool = False,
    resolution: str = "plot",
    partitions: PartitionReader | None = None,
    on_owner: Callable[[str, str], None] | None = None,
    gpu_tres: bool = False,
) -> JobReport:
    """Read the sources for one job and join them. ``strict_accounting`` re-raises an
    accounting outage; ``resolution`` is the series' (``plot`` or ``full``, see
    PrometheusSource.usage); ``on_owner(user, job name)`` is called once, as soon as both
    are known (the report's own, by precedence), so that a caller can start on them
    meanwhile. ``gpu_tres`` (JOBREPORT_GPU_METRICS=tres): the GPU figures are the steps'
    usage TRES from sacct (``webapp.report.gpu_from_tres``), not Prometheus series."""
    records = read_records(job_id, accounting, sacct, strict_accounting, on_owner)
    gaps = records.gaps
    now = now or datetime.now(UTC)
    t = timing(job_id, records.acct, records.sacct, now)
    usage = read_usage(job_id, prometheus, t, now, resolution, gaps)
    notes: tuple[str, ...] = ((coarse_note(usage.step_seconds),)
                              if (usage.step_seconds or 0) >= COARSE_STEP else ())
    if usage.counter_resets:
        notes += (reset_note(usage.counter_resets),)
    report = join(job_id, cluster, records.acct, records.sacct, t, usage,
                  read_time_limit(records, partitions), tuple(gaps), notes)
    return with_gpu_tres(report) if gpu_tres else report


def _gap(job_id: JobId, exc: SourceUnavailable) -> Gap:
    if exc.detail:
        log.warning("job %s: %s unavailable: %s (%s)", job_id, exc.source, exc.reason, exc.detail)
    return Gap(exc.source, exc.reason, exc.detail)


def reset_note(nodes: tuple[str, ...]) -> str:
    """The note of a job whose exporter restarted without its saved sums."""
    return (f"jobs-exporter on {', '.join(nodes)} restarted during the job without its "
            "saved state, so its energy, I/O and wait counters started again from 0. The "
            "figures add back what they had counted before; what it counted after its last "
            "scrape before the restart (up to one scrape interval) is missing.")


def coarse_note(step: float | None) -> str:
    """The coverage note of a long job whose series were fetched at a coarse step."""
    return (f"Plots show one point per {format_duration(step)}: each report asks Prometheus "
            "for a bounded number of points, so long jobs are drawn coarsely and shorter "
            "peaks may not show (CPU time comes from Slurm's accounting; when one task's "
            "MaxRSS exceeds the plotted memory, the peak is sacct's).")
