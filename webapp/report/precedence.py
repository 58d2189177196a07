"""Which source wins for each figure of a report: pure rules over what the sources said.

``webapp.report.build`` reads the sources (accounting view, sacct, Prometheus, scontrol);
these functions only choose. Precedence when sources disagree (documented in the README):

- identity and request (user, account, partition, QoS, CPUs, memory, GPUs, time limit,
  nodes): the accounting view, then sacct;
- outcome: the state from sacct (its latest record of the job), then the accounting
  view; exit code and times from the accounting view, then sacct; elapsed from sacct's
  Elapsed, else end (or now) - start; a start that sacct's Elapsed dates when only the
  end is known;
- the time limit: the job's own, else the partition's MaxTime for ``Partition_Limit``
  (resolved by the caller through scontrol), "unlimited" only when Slurm says so;
- CPU time: the sum of sacct's step TotalCPU (what seff uses), else the allocation line's
  TotalCPU when sacct lists no steps; while the job runs (sacct has no TotalCPU yet), when
  it ended NODE_FAIL (its steps' usage died with the node), or without sacct, the
  integral of Prometheus' CPU rate;
- a heterogeneous job asked for whole (``123``, not ``123+1``): the whole job's figures,
  each component's from sacct added up (CPUs, memory, GPUs, TotalCPU), its nodes the
  union, its run the longest component's; Prometheus asked for every component's id
  (each component is a job of its own to the exporter). Components stay lines of the
  details;
- peak memory: defined once in ``webapp.report.peak`` (Prometheus per node, else sacct's
  MaxRSS x tasks estimate);
- time series, I/O, open files, threads, scratch, GPUs: Prometheus only, asked by the
  job's own numeric id (an array task's cgroup is named after its raw id).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from webapp.model import (
    AccountingJob,
    CpuSource,
    Gap,
    JobId,
    JobReport,
    NodeMemory,
    SacctJob,
    Step,
    TimeLimitKind,
    Usage,
)
from webapp.report.peak import job_peak, node_memory, prometheus_peak, sacct_peak
from webapp.sources.sacct_values import parse_nodelist
from webapp.states import NODE_FAIL, running, started


def first(*values: Any) -> Any:
    """The first value that is known (not None)."""
    return next((v for v in values if v is not None), None)


def owner(acct: AccountingJob | None, sj: SacctJob | None) -> tuple[str | None, str | None]:
    """(user, job name) as the report will show them."""
    return (first(acct and acct.user, sj and sj.user),
            first(acct and acct.job_name, sj and sj.job_name))


@dataclass(frozen=True)
class Timing:
    """The job's outcome and where it ran: what the Prometheus lookup needs."""

    state: str | None
    start: datetime | None
    end: datetime | None
    elapsed: float | None
    nodes: tuple[str, ...]
    metrics_id: str  # the id the exporter labels series with: an array task's raw id
    # A whole het job's: every component's raw id (its series are each component's)
    metrics_ids: tuple[str, ...] = ()


def timing(job_id: JobId, acct: AccountingJob | None, sj: SacctJob | None,
           now: datetime) -> Timing:
    state = first(sj and sj.state, acct and acct.state)
    start = first(acct and acct.start_time, sj and sj.start_time)
    end = first(acct and acct.end_time, sj and sj.end_time)
    elapsed = sj.elapsed_seconds if sj else None
    if elapsed is None and start:
        elapsed = ((end or now) - start).total_seconds()
    if start is None and end is not None and elapsed:
        start = end - timedelta(seconds=elapsed)  # sacct's Elapsed dates the start
    nodes = (acct.nodes if acct and acct.nodes else ()) or nodes_from_sacct(sj)
    metrics_id = str(acct.job) if acct else (sj.raw_id if sj and sj.raw_id else str(job_id))
    ids: tuple[str, ...] = ()
    if parts := het_components(job_id, sj):
        nodes = tuple(dict.fromkeys(n for c in parts for n in c.nodes)) or tuple(nodes)
        elapsed = max((c.elapsed_seconds for c in parts if c.elapsed_seconds is not None),
                      default=elapsed)
        if all(c.raw_id for c in parts):
            ids = tuple(str(c.raw_id) for c in parts)
    return Timing(state, start, end, elapsed, tuple(nodes), metrics_id, ids)


def het_components(job_id: JobId, sj: SacctJob | None) -> tuple[Step, ...]:
    """The components of a het job asked for whole, whose figures the report's add up;
    () for any other job (and for one component asked for by ``123+1``)."""
    if job_id.het_offset is not None or sj is None or len(sj.components) < 2:
        return ()
    return sj.components


def node_requests(parts: tuple[Step, ...], nodes: tuple[str, ...], memory: int | None,
                  limits: tuple[tuple[str, float], ...] = ()) -> dict[str, int]:
    """Each node's own memory request in bytes: a whole het job's, each component's
    request split over its own nodes (``--mem`` is per node; two components on one node
    add up); any other job's, the request split over its nodes as Slurm gave it to them:
    in proportion to each node's cgroup limit (``limits``, the exporter's
    jobs_memory_limit_bytes) when every node has one and they differ (``--mem-per-cpu``
    with tasks spread unevenly: 2 CPUs on one node, 1 on the other), else evenly. In
    proportion, not the limits themselves: a site's AllowedRAMSpace may set limits above
    or below the request, and the nodes' requests add up to the job's. {} when unknown."""
    if parts and all(c.memory_requested_bytes and c.nodes for c in parts):
        out: dict[str, int] = {}
        for c in parts:
            share = (c.memory_requested_bytes or 0) // len(c.nodes)
            for node in c.nodes:
                out[node] = out.get(node, 0) + share
        return out
    if not memory or not nodes:
        return {}
    limit = dict(limits)
    if all(limit.get(n, 0) > 0 for n in nodes) and len({limit[n] for n in nodes}) > 1:
        total = sum(limit[n] for n in nodes)
        return {n: int(memory * limit[n] / total) for n in nodes}
    return dict.fromkeys(nodes, memory // len(nodes))


def summed(values: list[int | None]) -> int | None:
    """The sum, or None when a part is unknown."""
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def cpu_time(sj: SacctJob | None, usage: Usage, t: Timing, parts: tuple[Step, ...] = ()
             ) -> tuple[float | None, CpuSource | None]:
    """CPU seconds and where they come from; none before the job started. ``parts``: a
    whole het job's components, whose TotalCPU is added up."""
    if not started(t.state):
        return None, None
    seconds, source = None, None
    whole = [c.total_cpu_seconds for c in parts]
    if whole and all(v is not None for v in whole):
        seconds, source = sum(v or 0.0 for v in whole), CpuSource.STEPS
    elif sj and sj.total_cpu_seconds is not None:
        seconds, source = sj.total_cpu_seconds, CpuSource.STEPS
    elif sj and not sj.steps and sj.alloc_cpu_seconds is not None:
        seconds, source = sj.alloc_cpu_seconds, CpuSource.ALLOCATION
    if (running(t.state) or seconds is None or t.state == NODE_FAIL) and usage.cpu_cores \
            and t.elapsed:
        # sacct writes TotalCPU when a step ends: while a job runs, Prometheus knows better;
        # so it does when the node died, its slurmstepd with it: the step's usage never
        # reached slurmctld and sacct says 0 (measured on 24.11: a busy job, TotalCPU 0).
        seconds = sum(s.mean() or 0.0 for s in usage.cpu_cores) * t.elapsed
        source = CpuSource.PROMETHEUS
    return seconds, source


def time_limit(acct: AccountingJob | None, sj: SacctJob | None
               ) -> tuple[TimeLimitKind | None, float | None]:
    """The kind of limit and its seconds as the records say (the partition's still to be
    resolved when the kind is ``PARTITION``)."""
    for record in (acct, sj):
        if record is not None and record.time_limit_seconds is not None:
            return record.time_limit_kind or TimeLimitKind.JOB, record.time_limit_seconds
        if record is not None and record.time_limit_kind is not None:
            return record.time_limit_kind, None
    return None, None


def join(job_id: JobId, cluster: str, acct: AccountingJob | None, sj: SacctJob | None,
         t: Timing, usage: Usage, limit: tuple[TimeLimitKind | None, float | None],
         gaps: tuple[Gap, ...] = (), notes: tuple[str, ...] = ()) -> JobReport:
    """The report the sources describe, each figure from the source that wins it."""
    parts = het_components(job_id, sj)
    cpu_seconds, cpu_source = cpu_time(sj, usage, t, parts)
    user, name = owner(acct, sj)
    record = None if parts else first(acct and acct.job_id, sj and sj.job_id)
    cpus = first(acct and acct.cpus, sj and sj.cpus)
    memory = first(acct and acct.memory_requested_bytes, sj and sj.memory_requested_bytes)
    gpus = first(acct and acct.gpus, sj and sj.gpus) or 0
    if parts:
        cpus = first(summed([c.cpus for c in parts]), cpus)
        memory = first(summed([c.memory_requested_bytes for c in parts]), memory)
        gpus = sum(c.gpus for c in parts) or gpus
    peak = job_peak(sacct_peak(sj, parts) if sj else None, prometheus_peak(usage), usage)
    return JobReport(
        job_id=str(job_id),
        cluster=acct.cluster if acct else cluster,
        user=user,
        uid=acct.uid if acct else None,
        account=first(acct and acct.account, sj and sj.account),
        job_name=name,
        partition=partition(acct, sj),
        qos=first(acct and acct.qos, sj and sj.qos),
        nodes=t.nodes,
        work_dir=first(acct and acct.work_dir, sj and sj.work_dir),
        cpus=cpus,
        memory_requested_bytes=memory,
        gpus=gpus,
        time_limit_seconds=limit[1],
        time_limit_kind=limit[0],
        state=t.state,
        exit_code=first(acct and acct.exit_code, sj and sj.exit_code),
        submit_time=acct.submit_time if acct else None,
        start_time=t.start,
        end_time=t.end,
        elapsed_seconds=t.elapsed,
        figures_from=record if record and record != str(job_id) else None,
        cpu_seconds=cpu_seconds,
        cpu_source=cpu_source,
        memory_peak=peak,
        memory_nodes=node_memory(usage, sj, node_requests(parts, t.nodes, memory,
                                                           usage.memory_limit_by_node), parts,
                                 peak),
        usage=usage,
        steps=sj.steps if sj else (),
        components=sj.components if sj else (),
        metrics_id=t.metrics_id,
        metrics_ids=t.metrics_ids,
        billing=first(acct and acct.billing, sj and sj.billing),
        cancelled_by=sj.cancelled_by if sj else None,
        array_job=first(acct and acct.array_job, array_job_of(sj)),
        gaps=gaps,
        notes=notes,
    )


def partition(acct: AccountingJob | None, sj: SacctJob | None) -> str | None:
    return cast("str | None", first(acct and acct.partition, sj and sj.partition))


def array_job_of(sj: SacctJob | None) -> int | None:
    """``123`` for sacct's ``123_4``; None when the job is not an array task."""
    if sj is None or "_" not in sj.job_id:
        return None
    head = sj.job_id.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def sacct_memory_nodes(job: SacctJob, requested: int | None) -> tuple[NodeMemory, ...]:
    """Each node's memory as the report judges it from sacct alone (no Prometheus): the
    request (``requested``, the job's or one het component's) split over sacct's nodes,
    and each node's peak from the steps' MaxRSS where sacct says whose it is, the job's
    peak (seff's estimate) on its node. The job lists and the staff tables read a job
    that only sacct has this way."""
    peak = sacct_peak(job)
    return node_memory(Usage(), job, node_requests((), nodes_from_sacct(job), requested),
                       (), peak)


def nodes_from_sacct(sj: SacctJob | None) -> tuple[str, ...]:
    try:
        return parse_nodelist(sj.node_list) if sj else ()
    except ValueError:
        return ()  # a corrupt host list costs the node filter, not the report
