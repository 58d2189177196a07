"""A user's history of jobs of one name, and the ``#SBATCH`` block it suggests.

``history()`` is the one entry point (the command line, the web page and the single
report call it); it reads sacct and Prometheus now and is where the ended-job archive
will be read once it holds enough. Each job's figures are the single report's: the
memory peak by ``webapp.report.peak``'s rule, CPU efficiency by seff's formula.

The block, from the jobs that ended (documented in docs/findings.md, "History and
right-sizing"):

- ``--mem`` and ``--time``: the one policy for a set of past runs, an array's tasks' too
  (``webapp.detectors.advice.next_request``): the 95th percentile of the peaks (of the
  elapsed times of the jobs that completed) times the margin, never less than the
  largest, rounded up; after an OOM kill (a TIMEOUT), at least the largest limit that
  ran out times ``oom_growth`` (``timeout_growth``);
- ``--cpus-per-task``: the 95th percentile of the cores busy per task (CPU time / elapsed
  / tasks), rounded up, at least 1;
- ``--gpus``: when the jobs had GPUs, the 95th percentile of the GPUs busy (mean
  utilization at least the ``gpu_idle`` threshold), rounded up; left out when none was.

What it would have saved is in GiB-hours (2**30 bytes, as every memory figure), core-hours
and GPU-hours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from jobreport_common.units import GIB
from webapp.detectors.advice import PERCENTILE, PastRun, next_cpus, next_request, percentile
from webapp.formatting import format_duration, slurm_mem_bytes, slurm_time_seconds
from webapp.model import (
    History,
    HistoryJob,
    MemoryPeak,
    PeakSource,
    Series,
    SizingSuggestion,
    Usage,
)
from webapp.report.peak import job_peak, node_memory, sacct_peak
from webapp.report.precedence import node_requests, nodes_from_sacct
from webapp.sources.history_data import HistorySource, PastJob
from webapp.states import ended as has_ended
from webapp.thresholds import Thresholds

MIN_JOBS = 3  # fewer ended jobs make no history worth a suggestion
DEFAULT_SINCE = timedelta(days=30)


def history(source: HistorySource, user: str | None, name: str | None,
            since: datetime | None = None, until: datetime | None = None,
            thresholds: Thresholds | None = None) -> History:
    """The jobs of ``user`` named ``name`` (any name when None) in [since, until], newest
    first, with the ``#SBATCH`` block they suggest (None under MIN_JOBS ended jobs).
    Raises SourceUnavailable when the job list cannot be read."""
    until = until or datetime.now(UTC)
    since = since or until - DEFAULT_SINCE
    jobs = sorted((history_job(p) for p in source.jobs(user, name, since, until)),
                  key=lambda j: (j.submit_time or j.start_time or until), reverse=True)
    basis = (f"jobs named '{name}'" if name else "jobs") + (f" of {user}" if user else "") \
        + f" since {since:%Y-%m-%d}"
    return History(user, name, since, tuple(jobs),
                   suggest(jobs, thresholds or Thresholds(), basis))


def history_job(past: PastJob) -> HistoryJob:
    """One past job reduced to what the history shows and the suggestion reads; its
    memory judged node by node as the report judges it (``JobReport.memory_judged``):
    each node's Prometheus peak against its own share of the request."""
    j = past.sacct
    hosts = nodes_from_sacct(j)
    nodes = max(1, len(hosts))
    prom = None
    if past.rss_peak_per_node:
        node, top = max(past.rss_peak_per_node.items(), key=lambda kv: kv[1])
        prom = MemoryPeak(int(top), PeakSource.PROMETHEUS, node=node or None)
    peak = job_peak(sacct_peak(j), prom)
    end = j.end_time.timestamp() if j.end_time else 0.0
    usage = Usage(memory_rss=tuple(Series(n, ((end, v),))
                                   for n, v in sorted(past.rss_peak_per_node.items())))
    requests = node_requests((), hosts, j.memory_requested_bytes,
                             tuple(sorted(past.memory_limit_per_node.items())))
    cpu = j.total_cpu_seconds
    if cpu is None and not j.steps:
        cpu = j.alloc_cpu_seconds
    tasks = max([s.tasks or 1 for s in j.steps if s.step_id not in ("extern",)] or [1])
    return HistoryJob(
        job_id=j.job_id, name=j.job_name, state=j.state,
        submit_time=datetime.fromtimestamp(past.submit, UTC) if past.submit else None,
        start_time=j.start_time, end_time=j.end_time, elapsed_seconds=j.elapsed_seconds,
        time_limit_seconds=j.time_limit_seconds, cpus=j.cpus, tasks=tasks, nodes=nodes,
        memory_requested_per_node=(j.memory_requested_bytes // nodes
                                   if j.memory_requested_bytes else None),
        gpus=j.gpus, gpus_busy=past.gpus_busy, cpu_seconds=cpu,
        memory_peak=peak, memory_nodes=node_memory(usage, j, requests, (), peak),
    )


def suggest(jobs: Sequence[HistoryJob], thresholds: Thresholds, basis: str = ""
            ) -> SizingSuggestion | None:
    """The ``#SBATCH`` block the ended jobs call for, and what it would have saved."""
    ended = [j for j in jobs if has_ended(j.state) and j.elapsed_seconds]
    if len(ended) < MIN_JOBS:
        return None
    options: list[tuple[str, str]] = []
    mem, time = next_request([past_run(j) for j in ended], thresholds)
    if mem:
        options.append(("--mem", mem))
    if time:
        options.append(("--time", time))
    busy = [j.cpu_seconds / j.elapsed_seconds / j.tasks for j in ended
            if j.cpu_seconds is not None and j.elapsed_seconds]
    cpus = next_cpus(_p(busy)) if busy else None
    if cpus:
        options.append(("--cpus-per-task", str(cpus)))
    gpus = _gpus(ended)
    if gpus:
        options.append(("--gpus", str(gpus)))
    if not options:
        return None
    return SizingSuggestion(tuple(options), len(ended), _saved(ended, mem, time, cpus, gpus),
                            basis)


def past_run(job: HistoryJob) -> PastRun:
    """One past job as the sizing policy reads it."""
    return PastRun(job.state, job.memory_peak.bytes if job.memory_peak else None,
                   job.elapsed_seconds, job.memory_requested_per_node, job.time_limit_seconds)


def _p(values: Sequence[float]) -> float:
    return percentile(values, PERCENTILE) or 0.0


def _gpus(ended: Sequence[HistoryJob]) -> int | None:
    """GPUs to ask for: None when the jobs had none, or none was busy."""
    if not any(j.gpus for j in ended):
        return None
    busy = [float(j.gpus if j.gpus_busy is None else j.gpus_busy) for j in ended if j.gpus]
    n = math.ceil(_p(busy) - 1e-9)
    return n or None


def _saved(ended: Sequence[HistoryJob], mem: str | None, time: str | None,
           cpus: int | None, gpus: int | None) -> tuple[str, ...]:
    """What the jobs asked for beyond the block, summed over them, as phrases."""
    gib_h = core_h = gpu_h = limit_s = 0.0
    mem_b = slurm_mem_bytes(mem) if mem else None
    limit = slurm_time_seconds(time) if time else None
    for j in ended:
        hours = (j.elapsed_seconds or 0.0) / 3600
        if mem_b and j.memory_requested_per_node:
            gib_h += max(0, j.memory_requested_per_node - mem_b) * j.nodes / GIB * hours
        if cpus and j.cpus:
            core_h += max(0, j.cpus - cpus * j.tasks) * hours
        if j.gpus:
            gpu_h += max(0, j.gpus - (gpus or 0)) * hours
        if limit and j.time_limit_seconds:
            limit_s += max(0.0, j.time_limit_seconds - limit)
    waited = sum(j.pending_seconds or 0.0 for j in ended)
    out = []
    if gib_h > 0:
        out.append(f"{gib_h:,.2f} GiB-hours of memory")
    if core_h > 0:
        out.append(f"{core_h:,.2f} core-hours")
    if gpu_h > 0:
        out.append(f"{gpu_h:,.2f} GPU-hours")
    if limit_s > 0:
        out.append(f"{format_duration(limit_s)} of time limit (shorter limits start sooner "
                   f"through backfill; these jobs waited {format_duration(waited)} in all)")
    return tuple(out)
