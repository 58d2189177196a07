"""Join the three sources into one ``JobReport`` (findings are attached by the service).

Precedence when sources disagree (documented in the README):
- identity and request (user, account, partition, CPUs, memory, GPUs, time limit, nodes):
  the accounting view, then sacct;
- outcome (state, exit code, times): the accounting view, then sacct; elapsed from
  sacct's Elapsed, else end - start;
- CPU time and peak memory: sacct's steps (TotalCPU, MaxRSS: what seff uses), peak memory
  falling back to the largest RSS Prometheus saw; while the job runs (sacct has no
  TotalCPU yet, or sacct is unavailable) CPU time is the integral of Prometheus' CPU rate,
  and while it runs the peak is the larger of the two;
- time series, I/O, open files, threads, scratch, GPUs: Prometheus only.
A source that fails becomes a ``Gap``; only a job no source knows is ``JobNotFound``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webapp.formatting import format_duration
from webapp.model import (
    RUNNING_STATES,
    AccountingJob,
    Gap,
    JobId,
    JobNotFound,
    JobReport,
    SacctJob,
    SourceUnavailable,
    Usage,
)
from webapp.sources.protocols import AccountingReader, MetricsReader, SacctReader
from webapp.sources.sacct_values import parse_nodelist

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
) -> JobReport:
    """Join the sources for one job. ``strict_accounting`` re-raises an accounting outage;
    ``resolution`` is the series' (``plot`` or ``full``, see PrometheusSource.usage)."""
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
        gaps.append(Gap(exc.source, exc.reason))
    try:
        sj = sacct.job(job_id)
    except JobNotFound:
        not_found += 1
    except SourceUnavailable as exc:
        gaps.append(Gap(exc.source, exc.reason))
    if acct is None and sj is None:
        if not_found:
            raise JobNotFound(str(job_id))
        raise SourceUnavailable("accounting", "; ".join(f"{g.source}: {g.reason}" for g in gaps))

    now = now or datetime.now(UTC)
    start = _first(acct and acct.start_time, sj and sj.start_time)
    end = _first(acct and acct.end_time, sj and sj.end_time)
    elapsed = sj.elapsed_seconds if sj else None
    if elapsed is None and start:
        elapsed = ((end or now) - start).total_seconds()
    nodes = (acct.nodes if acct and acct.nodes else ()) or _nodes_from_sacct(sj)

    usage = Usage()
    if start is None:
        gaps.append(Gap("prometheus", "the job has not started: no metrics yet"))
    else:
        try:
            usage = prometheus.usage(job_id, start, end or now, nodes, resolution=resolution)
            if usage.empty:
                gaps.append(
                    Gap(
                        "prometheus",
                        "no metrics kept for this job (not scraped, or older than the retention)",
                    )
                )
        except SourceUnavailable as exc:
            gaps.append(Gap(exc.source, exc.reason))

    notes = (coarse_note(usage.step_seconds),) if (usage.step_seconds or 0) >= COARSE_STEP else ()
    state = _first(sj and sj.state, acct and acct.state)
    running = state in RUNNING_STATES
    cpu_seconds = sj.total_cpu_seconds if sj else None
    peak = sj.max_rss_bytes if sj else None
    prom_peak = int(max(s.max() or 0 for s in usage.memory_rss)) if usage.memory_rss else None
    if running or peak is None:
        # sacct writes TotalCPU when a step ends and MaxRSS only from its sampling: while a
        # job runs, what Prometheus saw is the better account.
        peak = max(filter(None, (peak, prom_peak)), default=peak)
    if (running or cpu_seconds is None) and usage.cpu_cores and elapsed:
        cpu_seconds = sum(s.mean() or 0.0 for s in usage.cpu_cores) * elapsed

    return JobReport(
        job_id=str(job_id),
        cluster=acct.cluster if acct else cluster,
        user=_first(acct and acct.user, sj and sj.user),
        uid=acct.uid if acct else None,
        account=_first(acct and acct.account, sj and sj.account),
        job_name=_first(acct and acct.job_name, sj and sj.job_name),
        partition=_first(acct and acct.partition, sj and sj.partition),
        nodes=nodes,
        work_dir=_first(acct and acct.work_dir, sj and sj.work_dir),
        cpus=_first(acct and acct.cpus, sj and sj.cpus),
        memory_requested_bytes=_first(
            acct and acct.memory_requested_bytes, sj and sj.memory_requested_bytes
        ),
        gpus=_first(acct and acct.gpus, sj and sj.gpus) or 0,
        time_limit_seconds=_first(acct and acct.time_limit_seconds, sj and sj.time_limit_seconds),
        state=state,
        exit_code=_first(acct and acct.exit_code, sj and sj.exit_code),
        submit_time=acct.submit_time if acct else None,
        start_time=start,
        end_time=end,
        elapsed_seconds=elapsed,
        cpu_seconds=cpu_seconds,
        memory_peak_bytes=peak,
        usage=usage,
        steps=sj.steps if sj else (),
        cancelled_by=sj.cancelled_by if sj else None,
        array_job=_first(acct and acct.array_job, _array_job_of(sj)),
        gaps=tuple(gaps),
        notes=notes,
    )


def coarse_note(step: float | None) -> str:
    """The coverage note of a long job whose series were fetched at a coarse step."""
    return (f"Plots show one point per {format_duration(step)}: each report asks Prometheus "
            "for a bounded number of points, so long jobs are drawn coarsely and shorter "
            "peaks may not show (peak memory and CPU time come from Slurm's accounting).")


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
