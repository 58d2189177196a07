"""Join the three sources into one ``JobReport`` (findings are attached by the service).

Precedence when sources disagree (documented in the README):
- identity and request (user, account, partition, CPUs, memory, GPUs, time limit, nodes):
  the accounting view, then sacct;
- outcome (state, exit code, times): the accounting view, then sacct; elapsed from
  sacct's Elapsed, else end - start;
- the time limit: the job's own, else the partition's MaxTime for ``Partition_Limit``
  (scontrol, cached), "unlimited" only when Slurm says so;
- CPU time: the sum of sacct's step TotalCPU (what seff uses), else the allocation line's
  TotalCPU when sacct lists no steps; while the job runs (sacct has no TotalCPU yet), or
  without sacct, the integral of Prometheus' CPU rate;
- peak memory: defined once in ``webapp.report.peak`` (Prometheus per node, else sacct's
  MaxRSS x tasks estimate);
- time series, I/O, open files, threads, scratch, GPUs: Prometheus only, asked by the
  job's own numeric id (an array task's cgroup is named after its raw id).
A source that fails becomes a ``Gap``; only a job no source knows is ``JobNotFound``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from webapp.formatting import format_duration
from webapp.model import (
    AccountingJob,
    CpuSource,
    Gap,
    JobId,
    JobNotFound,
    JobReport,
    SacctJob,
    SourceUnavailable,
    TimeLimitKind,
    Usage,
)
from webapp.report.peak import job_peak, prometheus_peak, sacct_peak
from webapp.sources.protocols import (
    AccountingReader,
    MetricsReader,
    PartitionReader,
    SacctReader,
)
from webapp.sources.sacct_values import parse_nodelist
from webapp.states import running as holds_allocation
from webapp.states import started

log = logging.getLogger(__name__)

ACCOUNTING_DOWN = "accounting database unreachable; owner and limits from sacct"
# Series this coarse (or coarser) are worth a note: plots of jobs over ~3.5 days.
COARSE_STEP = 300.0


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


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
) -> JobReport:
    """Join the sources for one job. ``strict_accounting`` re-raises an accounting outage;
    ``resolution`` is the series' (``plot`` or ``full``, see PrometheusSource.usage);
    ``on_owner(user, job name)`` is called once, as soon as both are known (the report's
    own, by the precedence below), so that a caller can start on them meanwhile."""
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
        figures = getattr(sacct, "job_figures", None) if acct is not None else None
        sj = figures(job_id) if figures is not None else sacct.job(job_id)
    except JobNotFound:
        not_found += 1
    except SourceUnavailable as exc:
        gaps.append(_gap(job_id, exc))
    if on_owner is not None and not told:
        user = _first(acct and acct.user, sj and sj.user)
        name = _first(acct and acct.job_name, sj and sj.job_name)
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

    now = now or datetime.now(UTC)
    state = _first(sj and sj.state, acct and acct.state)
    start = _first(acct and acct.start_time, sj and sj.start_time)
    end = _first(acct and acct.end_time, sj and sj.end_time)
    elapsed = sj.elapsed_seconds if sj else None
    if elapsed is None and start:
        elapsed = ((end or now) - start).total_seconds()
    if start is None and end is not None and elapsed:
        start = end - timedelta(seconds=elapsed)  # sacct's Elapsed dates the start
    nodes = (acct.nodes if acct and acct.nodes else ()) or _nodes_from_sacct(sj)

    usage = Usage()
    # The exporter labels series with the cgroup's job id: an array task's raw id.
    metrics_id = str(acct.job) if acct else (sj.raw_id if sj and sj.raw_id else str(job_id))
    if not started(state):
        gaps.append(Gap("prometheus", f"the job has not started yet ({state}): no metrics"))
    elif start is None:
        gaps.append(Gap("prometheus", "the job's start time is unknown, so its metrics "
                                      "could not be looked up"))
    else:
        try:
            usage = prometheus.usage(JobId.of(metrics_id), start, end or now, nodes,
                                     resolution=resolution)
            if usage.empty:
                gaps.append(
                    Gap(
                        "prometheus",
                        "no metrics kept for this job (not scraped, or older than the retention)",
                    )
                )
        except SourceUnavailable as exc:
            gaps.append(_gap(job_id, exc))

    notes = (coarse_note(usage.step_seconds),) if (usage.step_seconds or 0) >= COARSE_STEP else ()
    running = holds_allocation(state)
    cpu_seconds, cpu_source = (None, None) if not started(state) else _cpu(
        sj, usage, elapsed, running
    )
    peak = job_peak(sacct_peak(sj) if sj else None, prometheus_peak(usage))
    partition = _first(acct and acct.partition, sj and sj.partition)
    limit_kind, limit = _time_limit(acct, sj, partition, partitions)
    record = _first(acct and acct.job_id, sj and sj.job_id)

    return JobReport(
        job_id=str(job_id),
        cluster=acct.cluster if acct else cluster,
        user=_first(acct and acct.user, sj and sj.user),
        uid=acct.uid if acct else None,
        account=_first(acct and acct.account, sj and sj.account),
        job_name=_first(acct and acct.job_name, sj and sj.job_name),
        partition=partition,
        nodes=nodes,
        work_dir=_first(acct and acct.work_dir, sj and sj.work_dir),
        cpus=_first(acct and acct.cpus, sj and sj.cpus),
        memory_requested_bytes=_first(
            acct and acct.memory_requested_bytes, sj and sj.memory_requested_bytes
        ),
        gpus=_first(acct and acct.gpus, sj and sj.gpus) or 0,
        time_limit_seconds=limit,
        time_limit_kind=limit_kind,
        state=state,
        exit_code=_first(acct and acct.exit_code, sj and sj.exit_code),
        submit_time=acct.submit_time if acct else None,
        start_time=start,
        end_time=end,
        elapsed_seconds=elapsed,
        figures_from=record if record != str(job_id) else None,
        cpu_seconds=cpu_seconds,
        cpu_source=cpu_source,
        memory_peak=peak,
        usage=usage,
        steps=sj.steps if sj else (),
        components=sj.components if sj else (),
        metrics_id=metrics_id,
        billing=_first(acct and acct.billing, sj and sj.billing),
        cancelled_by=sj.cancelled_by if sj else None,
        array_job=_first(acct and acct.array_job, _array_job_of(sj)),
        gaps=tuple(gaps),
        notes=notes,
    )


def _gap(job_id: JobId, exc: SourceUnavailable) -> Gap:
    if exc.detail:
        log.warning("job %s: %s unavailable: %s (%s)", job_id, exc.source, exc.reason, exc.detail)
    return Gap(exc.source, exc.reason, exc.detail)


def _cpu(
    sj: SacctJob | None, usage: Usage, elapsed: float | None, running: bool
) -> tuple[float | None, CpuSource | None]:
    """CPU seconds and where they come from (see the module's docstring)."""
    seconds, source = None, None
    if sj and sj.total_cpu_seconds is not None:
        seconds, source = sj.total_cpu_seconds, CpuSource.STEPS
    elif sj and not sj.steps and sj.alloc_cpu_seconds is not None:
        seconds, source = sj.alloc_cpu_seconds, CpuSource.ALLOCATION
    if (running or seconds is None) and usage.cpu_cores and elapsed:
        # sacct writes TotalCPU when a step ends: while a job runs, Prometheus knows better.
        seconds = sum(s.mean() or 0.0 for s in usage.cpu_cores) * elapsed
        source = CpuSource.PROMETHEUS
    return seconds, source


def _time_limit(
    acct: AccountingJob | None,
    sj: SacctJob | None,
    partition: str | None,
    partitions: PartitionReader | None,
) -> tuple[TimeLimitKind | None, float | None]:
    """The kind of limit and its seconds; ``Partition_Limit`` resolved through scontrol."""
    kind, seconds = None, None
    for record in (acct, sj):
        if record is not None and record.time_limit_seconds is not None:
            kind, seconds = record.time_limit_kind or TimeLimitKind.JOB, record.time_limit_seconds
            break
        if record is not None and record.time_limit_kind is not None:
            kind = record.time_limit_kind
            break
    if kind == TimeLimitKind.PARTITION and partition and partitions is not None:
        try:
            kind, seconds = partitions.max_time(partition)
        except SourceUnavailable as exc:
            # The report still says "the partition's limit"; only the figure is missing.
            log.info("partition %s: %s (%s)", partition, exc.reason, exc.detail)
    return kind, seconds


def coarse_note(step: float | None) -> str:
    """The coverage note of a long job whose series were fetched at a coarse step."""
    return (f"Plots show one point per {format_duration(step)}: each report asks Prometheus "
            "for a bounded number of points, so long jobs are drawn coarsely and shorter "
            "peaks may not show (CPU time comes from Slurm's accounting; when one task's "
            "MaxRSS exceeds the plotted memory, the peak is sacct's).")


def _array_job_of(sj: SacctJob | None) -> int | None:
    """``123`` for sacct's ``123_4``; None when the job is not an array task."""
    if sj is None or "_" not in sj.job_id:
        return None
    head = sj.job_id.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _nodes_from_sacct(sj: SacctJob | None) -> tuple[str, ...]:
    try:
        return parse_nodelist(sj.node_list) if sj else ()
    except ValueError:
        return ()  # a corrupt host list costs the node filter, not the report
