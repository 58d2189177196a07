"""Queue context of many ended jobs from a bounded number of PromQL queries.

``ClusterSource.queue`` asks up to eight queries per job; the sync asks, per window of
jobs, six range queries over [first submit, last start] (cluster up, pending reasons by
job, partition CPUs idle and total, pending jobs, GPUs available, grouped by partition)
and reads each job's wait out of them: the partition's state at the last step at or
before its submit, its reasons over its own wait, the most GPUs available during it.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from webapp.model import QueueContext, Series, SourceUnavailable
from webapp.sources.cluster import reasons_from
from webapp.sources.prometheus import PrometheusSource, promql_string

MAX_STEPS = 10_000  # per series of one range query
JOBS_PER_QUERY = 400

QUERIES: dict[str, str] = {
    "seen": 'max(max_over_time(slurm_up{{{c},source="squeue"}}[{step}s]))',
    "reasons": "max by (jobid, reason) (slurm_job_pending_info{{{c},{jobs}}})",
    "cpus_idle": "sum by (partition) (slurm_partition_cpus_idle{{{c},{parts}}})",
    "cpus_total": "sum by (partition) (slurm_partition_cpus{{{c},{parts}}})",
    "queue_length": "sum by (partition) (slurm_pending_jobs{{{c},{parts}}})",
    "gpus_available": (
        "max by (partition, gpu_type) (slurm_partition_gpus_available{{{c},{parts}}})"
    ),
}


@dataclass(frozen=True)
class Wait:
    """A job's wait: what its queue context is read for."""

    job_id: str
    partition: str | None
    submit: float
    start: float


def _regex(label: str, values: Iterable[str]) -> str:
    alt = "|".join(re.escape(v) for v in sorted(set(values)))
    return f"{label}=~{promql_string(f'({alt})')}"


def _at(points: tuple[tuple[float, float], ...], t: float) -> float | None:
    """The value at the last point at or before ``t`` (as an instant query there reads)."""
    best = None
    for when, value in points:
        if when > t:
            break
        best = value
    return best


class BulkQueue:
    """The bulk queue queries, on a ``PrometheusSource``."""

    def __init__(self, source: PrometheusSource, cluster: str) -> None:
        self.source = source
        self.cluster = cluster
        self.requests = 0

    def _range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        self.requests += 1
        payload = self.source._get("/api/v1/query_range",  # noqa: SLF001 - same client
                                   {"query": query, "start": start, "end": end, "step": step})
        if payload.get("status") != "success":
            raise SourceUnavailable("prometheus", str(payload.get("error", "query failed")))
        return cast("list[dict[str, Any]]", payload["data"]["result"])

    def fetch(self, waits: Iterable[Wait]) -> dict[str, QueueContext]:
        """Each job's queue context; a window whose queries fail is left out."""
        todo = sorted(waits, key=lambda w: w.submit)
        out: dict[str, QueueContext] = {}
        for i in range(0, len(todo), JOBS_PER_QUERY):
            try:
                out.update(self.window(todo[i : i + JOBS_PER_QUERY]))
            except SourceUnavailable:
                continue  # those jobs are asked one by one
        return out

    def window(self, waits: list[Wait]) -> dict[str, QueueContext]:
        scrape = self.source.scrape_interval
        lo = min(w.submit for w in waits) - scrape
        hi = max(w.start for w in waits) + scrape
        step = float(max(math.ceil(scrape), math.ceil((hi - lo) / (MAX_STEPS - 1))))
        fmt = {"c": f"cluster={promql_string(self.cluster)}", "step": int(step),
               "jobs": _regex("jobid", (w.job_id for w in waits)),
               "parts": _regex("partition", (w.partition or "" for w in waits))}
        answers = {name: self._range(q.format(**fmt), lo, hi, step) for name, q in QUERIES.items()}
        return {w.job_id: context(w, answers, step) for w in waits}


def _during(points: tuple[tuple[float, float], ...], submit: float, start: float) -> list[float]:
    """The values a wait saw: the state at submit, and every point up to the start, never
    one after it (the per-job query's max_over_time ends at the start too)."""
    at_submit = _at(points, submit)
    inside = [v for when, v in points if submit < when <= start]
    return inside if at_submit is None else [at_submit, *inside]


def _series(result: list[dict[str, Any]], **match: str
            ) -> dict[str, tuple[tuple[float, float], ...]]:
    """label-less key or the first free label -> points, for results matching ``match``."""
    out: dict[str, tuple[tuple[float, float], ...]] = defaultdict(tuple)
    for item in result:
        metric = item.get("metric", {})
        if any(metric.get(k, "") != v for k, v in match.items()):
            continue
        key = metric.get("reason") or metric.get("gpu_type") or ""
        out[key] = tuple((float(t), float(v)) for t, v in item.get("values", []))
    return out


def context(w: Wait, answers: Mapping[str, list[dict[str, Any]]], step: float) -> QueueContext:
    """One job's wait from the window's answers (as ``ClusterSource.queue`` reads it)."""
    pending = max(w.start - w.submit, 0.0)
    seen = _series(answers["seen"]).get("", ())
    base = QueueContext(partition=w.partition, pending_seconds=pending)
    if not any(w.submit - step <= t <= w.start + step for t, _ in seen):
        return base
    part = {"partition": w.partition or ""}
    reasons = [Series(reason, tuple(p for p in pts if w.submit <= p[0] <= w.start))
               for reason, pts in _series(answers["reasons"], jobid=w.job_id).items()]

    def value(name: str) -> int | None:
        v = _at(_series(answers[name], **part).get("", ()), w.submit)
        return None if v is None else int(v)

    gpus = _series(answers["gpus_available"], **part)
    queue_length = value("queue_length")
    if queue_length is None and _at(seen, w.submit) is not None:
        queue_length = 0  # squeue answered and listed no pending job
    return QueueContext(
        partition=w.partition,
        pending_seconds=pending,
        reasons=tuple(reasons_from(reasons, step, pending)),
        cpus_idle=value("cpus_idle"),
        cpus_total=value("cpus_total"),
        gpus_available=tuple((t, int(v)) for t, pts in sorted(gpus.items())
                             if (v := _at(pts, w.submit)) is not None),
        queue_length=queue_length,
        gpus_available_max=tuple(
            (t, int(max(during))) for t, pts in sorted(gpus.items())
            if (during := _during(pts, w.submit, w.start))),
        seen=True,
    )


class PrefetchedCluster:
    """A ``ClusterReader`` answering from bulk-fetched queue context, else from ``live``."""

    name = "cluster"

    def __init__(self, live: Any, contexts: Mapping[str, QueueContext]) -> None:
        self.live = live
        self.prefetched = dict(contexts)

    def queue(self, job_id: str, partition: str | None, submit: datetime,
              start: datetime | None) -> QueueContext:
        found = self.prefetched.get(job_id)
        if found is not None and start is not None:
            return found
        return cast(QueueContext, self.live.queue(job_id, partition, submit, start))
