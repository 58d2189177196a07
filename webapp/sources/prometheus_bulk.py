"""Usage of many ended jobs from a bounded number of PromQL queries.

``PrometheusSource.usage`` asks ~20 queries per job; summarising 10,000 jobs that way is
200,000 requests. Here jobs are grouped by the resolution their length calls for (a
step class: the scrape interval times a power of two) and, within a class, into time
windows of at most ``WINDOW_POINTS`` steps and ``JOBS_PER_QUERY`` jobs; each window costs
one range query per metric (grouped by ``jobid`` and node) plus one instant query for
the per-core totals, whatever the number of jobs in it. The answers are split per job,
cut to the job's own window and to its nodes, and reduced as the per-job queries reduce
them, so a job's ``Usage`` here matches the one ``PrometheusSource`` would build (at the
class's step).

``PrefetchedMetrics`` hands these to the report build as a ``MetricsReader``; a job that
was not prefetched (or whose window failed) is asked for the usual way.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webapp.model import JobId, Series, SourceUnavailable, Usage
from webapp.sources.prometheus import (
    PrometheusSource,
    cluster_matcher,
    matchers,
    promql_string,
    rate_window,
)

BULK_POINTS = 600  # per job series: the archive keeps ~300, detectors need a shape
WINDOW_POINTS = 10_000  # per series of one range query (Prometheus refuses > 11,000)
JOBS_PER_QUERY = 400  # bounds the regex, the URL (~4 KB) and one answer's size
WORKERS = 4  # concurrent bulk queries: bounded, like a report's

# name -> PromQL with {sel} (jobid regex), {node} (node label), {rate}; grouped by jobid.
RANGE: dict[str, str] = {
    "cpu_cores": "sum by (jobid, {node}) (rate(jobs_cpu_seconds_total{{{sel}}}[{rate}]))",
    "memory_rss": "sum by (jobid, {node}) (jobs_memory_rss_bytes{{{sel}}})",
    "memory_shmem": "sum by (jobid, {node}) (jobs_memory_shmem_bytes{{{sel}}})",
    "memory_cache": "sum by (jobid, {node}) (jobs_memory_cache_bytes{{{sel}}})",
    "gpu_utilization": "max by (jobid, {node}, gpu) (jobs_gpu_utilization_ratio{{{sel}}})",
    "gpu_memory_used": "max by (jobid, {node}, gpu) (jobs_gpu_memory_used_bytes{{{sel}}})",
    "io_read_rate": "sum by (jobid, {node}) (rate(jobs_read_bytes_total{{{sel}}}[{rate}]))",
    "io_write_rate": "sum by (jobid, {node}) (rate(jobs_write_bytes_total{{{sel}}}[{rate}]))",
}
# The per-job instant maxima, as each step's maximum per node (max_over_time over the
# step sees every sample); the job's value is the largest step, then nodes are combined
# as the per-job query combines them (sum or max).
PEAKS: dict[str, tuple[str, str]] = {
    "memory_limit_bytes": ("jobs_memory_limit_bytes", "max"),
    "memory_max_usage_bytes": ("jobs_memory_max_usage_bytes", "sum"),
    "gpu_memory_total_bytes": ("jobs_gpu_memory_total_bytes", "max"),
    "read_bytes": ("jobs_read_bytes_total", "sum"),
    "write_bytes": ("jobs_write_bytes_total", "sum"),
    "read_syscalls": ("jobs_read_syscalls_total", "sum"),
    "write_syscalls": ("jobs_write_syscalls_total", "sum"),
    "processes_max": ("jobs_processes", "max"),
    "threads_max": ("jobs_threads", "max"),
    "open_files_max": ("jobs_open_files", "max"),
    "open_files_limit_ratio_max": ("jobs_open_files_limit_ratio", "max"),
    "scratch_in_use": ("jobs_scratch_in_use", "max"),
    # per-thread waits (counters: their peak is their last value) and busy threads
    "cpu_wait_seconds": ("jobs_cpu_wait_seconds_total", "sum"),
    "io_wait_seconds": ("jobs_io_wait_seconds_total", "sum"),
    "busy_tasks_max": ("jobs_busy_tasks", "max"),
}
PEAK_QUERY = "max by (jobid, {node}) (max_over_time({metric}{{{sel}}}[{step}s]))"
# Counters split by a label (the energy's ``source``): summed over it per node, not maxed.
SUM_PEAKS: dict[str, tuple[str, str]] = {
    "energy_joules": ("jobs_energy_joules_total", "sum"),
}
SUM_PEAK_QUERY = "sum by (jobid, {node}) (max_over_time({metric}{{{sel}}}[{step}s]))"
# A job's cpuacct counters start at zero with its cgroup: the last value / run time is the
# mean per core (as the per-job query reads it).
PER_CORE = "last_over_time(jobs_cpu_core_seconds_total{{{sel}}}[{span}s])"
# ... and the time of that last value (a subquery: timestamp() of a raw selector is the
# sample's own time), at a resolution well inside the 5-minute lookback.
PER_CORE_TIME = ("max by (jobid, {node}, core) (max_over_time("
                 "timestamp(jobs_cpu_core_seconds_total{{{sel}}})[{span}s:{res}s]))")


@dataclass(frozen=True)
class JobWindow:
    """What a job's usage is read for: its id, run time (Unix s) and nodes."""

    job_id: str
    start: float
    end: float
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Batch:
    """One time window of one step class: the unit of the bulk queries."""

    step: float
    start: float
    end: float
    jobs: tuple[JobWindow, ...]


def step_class(seconds: float, scrape: float, points: int = BULK_POINTS) -> float:
    """The scrape interval times the smallest power of two keeping <= ``points`` points."""
    k = max(0, math.ceil(math.log2(max(seconds / (points - 1), scrape) / scrape)))
    return float(math.ceil(scrape) * 2**k)


def plan(jobs: Iterable[JobWindow], scrape: float) -> list[Batch]:
    """Jobs grouped by step class, then packed, by start, into bounded windows."""
    by_step: dict[float, list[JobWindow]] = defaultdict(list)
    for job in jobs:
        by_step[step_class(job.end + scrape - job.start, scrape)].append(job)
    out = []
    for step, members in sorted(by_step.items()):
        members.sort(key=lambda j: j.start)
        group: list[JobWindow] = []
        lo = hi = 0.0
        for job in members:
            # On the multiples of the step: from the job's start on, the instants its own
            # query evaluates (prometheus.grid_start), so alone or in bulk, the same points.
            start = math.floor(job.start / step) * step
            end = job.end + scrape
            if group and (len(group) >= JOBS_PER_QUERY
                          or (max(hi, end) - lo) / step > WINDOW_POINTS):
                out.append(Batch(step, lo, hi, tuple(group)))
                group = []
            if not group:
                lo, hi = start, end
            group.append(job)
            hi = max(hi, end)
        if group:
            out.append(Batch(step, lo, hi, tuple(group)))
    return out


def id_selector(job_ids: Iterable[str], cluster_label: str = "", cluster: str = "") -> str:
    """``jobid=~"(1|2|3_4)"``: every id literal (ids are checked JobIds, escaped anyway);
    with a cluster label, ``jobid=~"(1|2)",cluster="v24"`` (``cluster_matcher``)."""
    alt = "|".join(re.escape(j) for j in sorted(set(job_ids)))
    return matchers(f"jobid=~{promql_string(f'({alt})')}",
                    cluster_matcher(cluster_label, cluster))


def node_matches(instance: str, nodes: tuple[str, ...]) -> bool:
    """Does a series' node label belong to one of the job's nodes (``node01:9306``)?"""
    if not nodes:
        return True
    name = instance.rsplit(":", 1)[0] if re.search(r":[0-9]+$", instance) else instance
    return name in nodes


class BulkMetrics:
    """The bulk queries, on a ``PrometheusSource`` (its session, auth and timeouts)."""

    def __init__(self, source: PrometheusSource) -> None:
        self.source = source
        self.node = source.node_label or "instance"
        self.requests = 0

    def _get(self, path: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.requests += 1
        payload = self.source._get(path, params)  # noqa: SLF001 - same package, same client
        if payload.get("status") != "success":
            raise SourceUnavailable("prometheus", str(payload.get("error", "query failed")))
        return payload["data"]["result"]

    def fetch(self, jobs: Iterable[JobWindow]) -> dict[str, Usage]:
        """Each job's usage; jobs of a window whose queries failed are left out."""
        batches = plan(jobs, self.source.scrape_interval)
        out: dict[str, Usage] = {}
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for result in pool.map(self._batch_or_none, batches):
                out.update(result)
        return out

    def _batch_or_none(self, batch: Batch) -> dict[str, Usage]:
        try:
            return self.batch(batch)
        except SourceUnavailable:
            return {}  # these jobs are asked one by one (and a gap named if that fails)

    def batch(self, b: Batch) -> dict[str, Usage]:
        scrape = self.source.scrape_interval
        sel = id_selector((j.job_id for j in b.jobs), self.source.cluster_label,
                          self.source.cluster)
        fmt = {"sel": sel, "node": self.node, "rate": rate_window(b.step, scrape),
               "step": int(b.step)}
        rng = {"start": b.start, "end": b.end, "step": b.step}
        ranges = {name: self._get("/api/v1/query_range", {"query": q.format(**fmt), **rng})
                  for name, q in RANGE.items()}
        peaks = {name: self._get("/api/v1/query_range", {
                     "query": PEAK_QUERY.format(metric=metric, **fmt), **rng})
                 for name, (metric, _) in PEAKS.items()}
        peaks.update({name: self._get("/api/v1/query_range", {
                          "query": SUM_PEAK_QUERY.format(metric=metric, **fmt), **rng})
                      for name, (metric, _) in SUM_PEAKS.items()})
        span = int(b.end - b.start + 2 * scrape)
        at = {"time": b.end}
        cores = self._get("/api/v1/query", {"query": PER_CORE.format(sel=sel, span=span), **at})
        res = int(min(b.step, 60))
        times = self._get("/api/v1/query", {
            "query": PER_CORE_TIME.format(sel=sel, span=span, res=res, node=self.node), **at})
        return split(b, ranges, peaks, cores, self.node, scrape, _core_times(times, self.node))


def _rows(result: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, str], Any]]]:
    per_job: dict[str, list[tuple[dict[str, str], Any]]] = defaultdict(list)
    for item in result:
        metric = item.get("metric", {})
        per_job[metric.get("jobid", "")].append((metric, item.get("values", item.get("value"))))
    return per_job


def _points(values: list, lo: float, hi: float) -> tuple[tuple[float, float], ...]:
    out = []
    for t, v in values:
        t = float(t)
        if lo <= t <= hi and v not in ("NaN", "+Inf", "-Inf"):
            out.append((t, float(v)))
    return tuple(out)


def _core_times(result: list[dict[str, Any]], node: str) -> dict[tuple[str, str, str], float]:
    return {(m.get("jobid", ""), m.get(node, ""), m.get("core", "")): float(item["value"][1])
            for item in result if (m := item.get("metric", {}))}


def split(b: Batch, ranges: Mapping[str, list], peaks: Mapping[str, list], cores: list,
          node: str, scrape: float,
          core_times: Mapping[tuple[str, str, str], float] | None = None) -> dict[str, Usage]:
    """The bulk answers of one window cut into one ``Usage`` per job."""
    r = {name: _rows(res) for name, res in ranges.items()}
    p = {name: _rows(res) for name, res in peaks.items()}
    c = _rows(cores)
    out = {}
    for job in b.jobs:
        lo, hi = job.start, job.end + scrape

        def series(name: str, parts: tuple[str, ...], job: JobWindow = job,
                   lo: float = lo, hi: float = hi) -> tuple[Series, ...]:
            got = []
            for metric, values in r[name].get(job.job_id, ()):
                if node_matches(metric.get(node, ""), job.nodes):
                    pts = _points(values or [], lo, hi)
                    if pts:
                        got.append(Series("/".join(metric.get(k, "?") for k in parts), pts))
            return tuple(sorted(got, key=lambda s: s.label))

        peak: dict[str, float | None] = {}
        for name, (_, combine) in {**PEAKS, **SUM_PEAKS}.items():
            per_node = [max(v for _, v in pts)
                        for metric, values in p.get(name, {}).get(job.job_id, ())
                        if node_matches(metric.get(node, ""), job.nodes)
                        and (pts := _points(values or [], lo, hi))]
            peak[name] = (sum(per_node) if combine == "sum" else max(per_node)) \
                if per_node else None
        per_core = []
        for m, v in c.get(job.job_id, ()):
            if node_matches(m.get(node, ""), job.nodes):
                key = (job.job_id, m.get(node, ""), m.get("core", ""))
                last = (core_times or {}).get(key, job.end)
                per_core.append(Series(f"{m.get(node, '?')}/{m.get('core', '?')}",
                                       ((job.end, float(v[1]) / max(last - job.start, 1.0)),)))
        out[job.job_id] = Usage(
            cpu_cores=series("cpu_cores", (node,)),
            cpu_per_core=tuple(sorted(per_core, key=lambda s: s.label)),
            memory_rss=series("memory_rss", (node,)),
            memory_shmem=series("memory_shmem", (node,)),
            memory_cache=series("memory_cache", (node,)),
            memory_limit_bytes=_int(peak["memory_limit_bytes"]),
            memory_max_usage_bytes=_int(peak["memory_max_usage_bytes"]),
            gpu_utilization=series("gpu_utilization", (node, "gpu")),
            gpu_memory_used=series("gpu_memory_used", (node, "gpu")),
            gpu_memory_total_bytes=_int(peak["gpu_memory_total_bytes"]),
            read_bytes=peak["read_bytes"],
            write_bytes=peak["write_bytes"],
            read_syscalls=peak["read_syscalls"],
            write_syscalls=peak["write_syscalls"],
            io_read_rate=series("io_read_rate", (node,)),
            io_write_rate=series("io_write_rate", (node,)),
            processes_max=peak["processes_max"],
            threads_max=peak["threads_max"],
            open_files_max=peak["open_files_max"],
            open_files_limit_ratio_max=peak["open_files_limit_ratio_max"],
            scratch_in_use=None if peak["scratch_in_use"] is None
            else peak["scratch_in_use"] > 0,
            energy_joules=peak["energy_joules"],
            step_seconds=b.step,
            cpu_wait_seconds=peak["cpu_wait_seconds"],
            io_wait_seconds=peak["io_wait_seconds"],
            busy_tasks_max=peak["busy_tasks_max"],
        )
    return out


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


class PrefetchedMetrics:
    """A ``MetricsReader`` answering from bulk-fetched usage, else from ``live``."""

    name = "prometheus"

    def __init__(self, live: Any, usage: Mapping[str, Usage]) -> None:
        self.live = live
        self.prefetched = dict(usage)

    def usage(self, job_id: JobId | str | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        # The bulk answers are at the plots' resolution; full resolution asks live.
        found = self.prefetched.get(str(job_id)) if resolution == "plot" else None
        if found is not None:
            return found
        return self.live.usage(job_id, start, end, nodes, resolution=resolution)
