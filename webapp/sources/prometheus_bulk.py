"""Usage of many ended jobs from a bounded number of PromQL queries.

``PrometheusSource.usage`` asks ~20 queries per job; summarising 10,000 jobs that way is
200,000 requests. Here jobs are grouped by the resolution their length calls for (a
step class: the scrape interval times a power of two) and, within a class, into time
windows of at most ``WINDOW_POINTS`` steps and ``JOBS_PER_QUERY`` jobs; each window costs
one range query per series (grouped by ``jobid`` and node), one instant query for every
one-number figure, two for the per-core totals and one for the GPUs' energy, faults and
identities (one more range query dates faults where any counted), whatever the number
of jobs in it. The answers are split per job, cut to the job's own window (its series)
and to its nodes, and reduced as the per-job queries reduce them, so a job's ``Usage``
here matches the one ``PrometheusSource`` would build (at the class's step).

``PrefetchedMetrics`` hands these to the report build as a ``MetricsReader``; a job that
was not prefetched (or whose window failed) is asked for the usual way.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from webapp.model import Coverage, JobId, Series, SourceUnavailable, Usage
from webapp.sources.counter_resets import RESETS_QUERY
from webapp.sources.gpu_metrics import JOBS, total_query
from webapp.sources.prometheus import (
    PrometheusSource,
    braced,
    cluster_matcher,
    matchers,
    promql_string,
    rate_window,
)
from webapp.sources.prometheus_answers import (
    dated,
    mean_since,
    parse_fault_matrix,
    parse_gpu_devices,
    parse_gpu_faults,
    parse_matrix,
    parse_replayed,
)
from webapp.sources.prometheus_coverage import coverages
from webapp.sources.prometheus_queries import (
    FIGURE_LABEL,
    GPU_ENERGY_QUERY,
    GPU_FAULT_QUERIES,
    GPU_FAULT_SERIES,
    GPU_INFO_QUERY,
    REPLAY_QUERY,
    TAIL_FIGURES,
    WINDOW_PEAKS,
    combined,
    own_matchers,
)

BULK_POINTS = 600  # per job series: the archive keeps ~300, detectors need a shape
WINDOW_POINTS = 10_000  # per series of one range query (Prometheus refuses > 11,000)
JOBS_PER_QUERY = 400  # bounds the regex, the URL (~4 KB) and one answer's size
WORKERS = 4  # concurrent bulk queries: bounded, like a report's
COVERAGE_SAMPLES = 500_000  # raw samples per coverage request (~12 MB of JSON)

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
# Every one-number figure of the per-job report (prometheus_queries: TAIL_FIGURES and
# WINDOW_PEAKS, one record), per job and node from the job's own samples over the window
# (a job's series begin and end with its cgroup): the tail figures' last sample, as the
# per-job query reads them, the window figures' largest; nodes then combined as the
# per-job query combines them (sum or max). Not each step's maximum on the range grid:
# its last instant falls up to a step before the job's end plus a scrape, where the
# per-job query reads the final sample (a job writing to its end lost its last writes).
# name -> (metric with its own matchers, how series combine within a node and over nodes).
PEAKS: dict[str, tuple[str, str]] = {
    name: (metric, agg) for name, (agg, metric) in {**TAIL_FIGURES, **WINDOW_PEAKS}.items()}
PEAK_QUERY = "{agg} by (jobid, {node}) ({fn}({metric}{{{sel}{extra}}}[{span}s]))"


def peak_query(name: str, sel: str, node: str, span: int) -> str:
    """One PEAKS figure per job and node over ``span`` seconds before the window's end
    (``name{label="v"}`` keeps its matchers)."""
    metric, agg = PEAKS[name]
    metric, extra = own_matchers(metric)
    fn = "last_over_time" if name in TAIL_FIGURES else "max_over_time"
    return PEAK_QUERY.format(agg=agg, fn=fn, metric=metric, sel=sel, extra=extra, node=node,
                             span=span)


# A job's cpuacct counters start at zero with its cgroup: the last value / run time is the
# mean per core (as the per-job query reads it).
PER_CORE = "last_over_time(jobs_cpu_core_seconds_total{{{sel}}}[{span}s])"
# ... and the time of that last value (a subquery: timestamp() of a raw selector is the
# sample's own time), at a resolution well inside the 5-minute lookback.
PER_CORE_TIME = ("max by (jobid, {node}, core) (max_over_time("
                 "timestamp(jobs_cpu_core_seconds_total{{{sel}}})[{span}s:{res}s]))")

# Which jobs ran on a node that replayed readings (REPLAY_QUERY names a node's replays, and
# a replay series has no jobid): each job's nodes with its jobs_info there, as the per-job
# query's join finds them; no answer where no node replays.
REPLAY_JOBS = ("max by (jobid, {node}) (last_over_time(jobs_info{{{sel}}}[{span}])) "
               "and on ({node}) max by ({node}) "
               "(max_over_time(jobs_exporter_replay_info{scope}[{span}]))")


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


def id_selector(job_ids: Iterable[str], cluster_label: str = "", cluster: str = "",
                job_label: str = "jobid") -> str:
    """``jobid=~"(1|2|3_4)"``: every id literal (ids are checked JobIds, escaped anyway);
    with a cluster label, ``jobid=~"(1|2)",cluster="v24"`` (``cluster_matcher``);
    ``job_label``: a GPU exporter's own label for the id (``gpu_metrics``)."""
    alt = "|".join(re.escape(j) for j in sorted(set(job_ids)))
    return matchers(f"{job_label}=~{promql_string(f'({alt})')}",
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
        self.coverages: dict[str, Coverage] = {}  # each fetched job's, by its id

    def _get(self, path: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.requests += 1
        payload = self.source._get(path, params)  # noqa: SLF001 - same package, same client
        if payload.get("status") != "success":
            raise SourceUnavailable("prometheus", str(payload.get("error", "query failed")))
        return cast("list[dict[str, Any]]", payload["data"]["result"])

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
        gm = self.source.gpu_metrics
        ids = [j.job_id for j in b.jobs]
        sel = id_selector(ids, self.source.cluster_label, self.source.cluster)
        gsel = id_selector(ids, self.source.cluster_label, self.source.cluster, gm.job_label)
        fmt = {"sel": sel, "node": self.node, "rate": rate_window(b.step, scrape),
               "step": int(b.step)}
        rng = {"start": b.start, "end": b.end, "step": b.step}
        queries = {name: (q.format(**fmt), "jobid") for name, q in RANGE.items()}
        span = int(b.end - b.start + 2 * scrape)
        peak_queries = {name: (peak_query(name, sel, self.node, span), "jobid")
                        for name in PEAKS}
        if gm is not JOBS:  # the GPU figures from the exporter the site runs (gpu_metrics)
            by = f"{gm.job_label}, {self.node}"
            for name, template in (("gpu_utilization", gm.utilization),
                                   ("gpu_memory_used", gm.memory_used)):
                queries.pop(name)
                if template:
                    queries[name] = (template.format(sel=gsel, node=by), gm.job_label)
            peak_queries.pop("gpu_memory_total_bytes")
            if gm.memory_total:
                peak_queries["gpu_memory_total_bytes"] = (total_query(
                    gm, gsel, by, "last_over_time", f"{span}s", "max by ({node})"),
                    gm.job_label)
        ranges = {name: by_job(self._get("/api/v1/query_range", {"query": q, **rng}), label)
                  for name, (q, label) in queries.items()}
        at = {"time": b.end}
        figures = by_job(self._get("/api/v1/query", {
            "query": combined({name: q for name, (q, _) in peak_queries.items()}), **at}),
            FIGURE_LABEL)
        peaks = {name: by_job(({"metric": m, "value": v} for m, v in figures.get(name, ())),
                              label) for name, (_, label) in peak_queries.items()}
        cores = self._get("/api/v1/query", {"query": PER_CORE.format(sel=sel, span=span), **at})
        res = int(min(b.step, 60))
        times = self._get("/api/v1/query", {
            "query": PER_CORE_TIME.format(sel=sel, span=span, res=res, node=self.node), **at})
        # The GPUs' energy, faults and identities, each job's by its id (one request).
        job_node = f"jobid, {self.node}"
        scope = braced(cluster_matcher(self.source.cluster_label, self.source.cluster))
        gpus = self._get("/api/v1/query", {"query": combined({
            "energy": GPU_ENERGY_QUERY.format(node=job_node, sel=sel, span=f"{span}s"),
            **{k: q.format(node=job_node, sel=sel, span=f"{span}s")
               for k, q in GPU_FAULT_QUERIES.items()},
            "info": GPU_INFO_QUERY.format(node=job_node, sel=sel, span=f"{span}s"),
            "resets": RESETS_QUERY.format(node=job_node, sel=sel, span=f"{span}s"),
            # per node, not per job (a replay has no jobid); and the jobs on those nodes
            "replay": REPLAY_QUERY.format(node=self.node, sel=sel, span=f"{span}s",
                                          scope=scope),
            "replay_jobs": REPLAY_JOBS.format(node=self.node, sel=sel, span=f"{span}s",
                                              scope=scope),
        }), **at})
        faults: list[dict[str, Any]] = []
        if any(item.get("metric", {}).get(FIGURE_LABEL) in GPU_FAULT_QUERIES for item in gpus):
            # rare: the counters over the window date each job's first error
            faults = self._get("/api/v1/query_range", {
                "query": GPU_FAULT_SERIES.format(node=job_node, sel=sel), **rng})
        self.coverages.update(self.batch_coverage(b))
        usage = split(b, ranges, peaks, cores, self.node, scrape, _core_times(times, self.node),
                      gpus=gpus, gpu_faults=faults)
        # Rare: a job whose summed counters were reset is read on its own, where what they
        # counted before is added back (sources/counter_resets.py): one computation.
        reset = {item["metric"].get("jobid") for item in gpus
                 if item.get("metric", {}).get(FIGURE_LABEL) == "resets"
                 and float(item["value"][1]) > 0}
        return {job_id: u for job_id, u in usage.items() if job_id not in reset}

    def batch_coverage(self, b: Batch) -> dict[str, Coverage]:
        """Each job's samples' coverage, as ``PrometheusSource.coverage`` computes it, from
        one query per covered series over the window (its stored samples, every job's)."""
        src, scrape = self.source, self.source.scrape_interval
        first = datetime.fromtimestamp(min(j.start for j in b.jobs), UTC)
        last = datetime.fromtimestamp(max(j.end for j in b.jobs), UTC)
        span = src.coverage_span(first, last)[2]
        ids = sorted({j.job_id for j in b.jobs})
        # Raw samples: every scrape of every node of each job; a request holds at most
        # COVERAGE_SAMPLES of them (estimated from the longest, widest job of the window).
        longest = max(j.end - j.start for j in b.jobs) / scrape + 2
        per_job = longest * max(1, max(len(j.nodes) for j in b.jobs))
        size = max(1, int(COVERAGE_SAMPLES // per_job))
        nodes: Rows = {}
        gpus: Rows = {}
        node_label = gpu_label = ""
        for k in range(0, len(ids), size):
            (_, on_nodes, node_label), (_, on_gpus, gpu_label) = src.coverage_queries(
                tuple(ids[k:k + size]), (), span)
            nodes |= by_job(self._get("/api/v1/query", {"query": on_nodes, "time": b.end}))
            gpus |= by_job(self._get("/api/v1/query", {"query": on_gpus, "time": b.end}),
                           src.gpu_metrics.job_label)
        node_label, gpu_label = node_label.format(node=self.node), gpu_label.format(node=self.node)
        out = {}
        for job in b.jobs:
            start = datetime.fromtimestamp(job.start, UTC)
            end = datetime.fromtimestamp(job.end, UTC)
            a, z, job_span = src.coverage_span(start, end)
            mine = [{"metric": m, "values": v} for m, v in nodes.get(job.job_id, ())
                    if node_matches(m.get(self.node, ""), job.nodes)]
            theirs = [{"metric": m, "values": v} for m, v in gpus.get(job.job_id, ())
                      if node_matches(m.get(self.node, ""), job.nodes)]
            out[job.job_id] = Coverage(
                nodes=coverages(_matrix(mine, node_label), job.nodes, a, z, scrape),
                gpus=coverages(_matrix(theirs, gpu_label), (), a, z, scrape),
                queries=tuple((name, q) for name, q, _ in
                              src.coverage_queries(job.job_id, job.nodes, job_span)))
        return out


Rows = dict[str, list[tuple[dict[str, str], Any]]]


def by_job(result: Iterable[dict[str, Any]], label: str = "jobid") -> Rows:
    """An answer's series by the job id in ``label``: (labels, values or value)."""
    per_job: Rows = defaultdict(list)
    for item in result:
        metric = item.get("metric", {})
        per_job[metric.get(label, "")].append((metric, item.get("values", item.get("value"))))
    return per_job


def _matrix(items: list[dict[str, Any]], label: str) -> list[Series]:
    """Raw samples (a range selector's answer) as ``parse_matrix`` names its series."""
    return parse_matrix({"status": "success", "data": {"result": items}}, label)


def _points(values: list[Any], lo: float, hi: float) -> tuple[tuple[float, float], ...]:
    out = []
    for t, v in values:
        t = float(t)
        if lo <= t <= hi and v not in ("NaN", "+Inf", "-Inf"):
            out.append((t, float(v)))
    return tuple(out)


def _core_times(result: list[dict[str, Any]], node: str) -> dict[tuple[str, str, str], float]:
    return {(m.get("jobid", ""), m.get(node, ""), m.get("core", "")): float(item["value"][1])
            for item in result if (m := item.get("metric", {}))}


def split(b: Batch, ranges: Mapping[str, Rows], peaks: Mapping[str, Rows],
          cores: list[dict[str, Any]], node: str, scrape: float,
          core_times: Mapping[tuple[str, str, str], float] | None = None,
          gpus: Sequence[dict[str, Any]] = (), gpu_faults: Sequence[dict[str, Any]] = ()
          ) -> dict[str, Usage]:
    """The bulk answers of one window (``by_job``) cut into one ``Usage`` per job: the
    fields ``PrometheusSource.usage`` fills, each reduced as it reduces them."""
    c = by_job(cores)
    g = by_job(gpus)
    f = defaultdict(list)
    for item in gpu_faults:
        f[item.get("metric", {}).get("jobid", "")].append(item)
    out = {}
    for job in b.jobs:
        lo, hi = job.start, job.end + scrape

        def mine(metric: dict[str, str], job: JobWindow = job) -> bool:
            return node_matches(metric.get(node, ""), job.nodes)

        def series(name: str, parts: tuple[str, ...], job: JobWindow = job,
                   lo: float = lo, hi: float = hi) -> tuple[Series, ...]:
            got = []
            for metric, values in ranges.get(name, {}).get(job.job_id, ()):
                if mine(metric):
                    pts = _points(values or [], lo, hi)
                    if pts:
                        got.append(Series("/".join(metric.get(k, "?") for k in parts), pts))
            return tuple(sorted(got, key=lambda s: s.label))

        peak: dict[str, float | None] = {}
        energy_by_node: list[tuple[str, float]] = []
        limit_by_node: list[tuple[str, float]] = []
        for name, (_, combine) in PEAKS.items():
            per_node = [(metric.get(node, ""), value)
                        for metric, (_, v) in peaks.get(name, {}).get(job.job_id, ())
                        if mine(metric) and math.isfinite(value := float(v))]
            values = [v for _, v in per_node]
            peak[name] = (sum(values) if combine == "sum" else max(values)) \
                if values else None
            if name == "energy_joules":
                energy_by_node = sorted(per_node)
            elif name == "memory_limit_bytes":
                limit_by_node = sorted(per_node)
        per_core = []
        for m, v in c.get(job.job_id, ()):
            if mine(m):
                key = (job.job_id, m.get(node, ""), m.get("core", ""))
                last = (core_times or {}).get(key, job.end)
                mean = mean_since(float(v[1]), last, job.start, job.end)
                if mean is not None:
                    per_core.append(Series(f"{m.get(node, '?')}/{m.get('core', '?')}",
                                           ((job.end, mean),)))
        figures: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        for m, v in g.get(job.job_id, ()):
            if mine(m) and math.isfinite(value := float(v[1])):
                figures[m.get(FIGURE_LABEL, "")].append((m, value))
        faults = parse_gpu_faults([*figures["xid"], *figures["ecc"]], node)
        # The replays of the nodes where the job ran (labelled by node alone, no jobid)
        ran = {m.get(node, "") for m, _ in g.get(job.job_id, ())
               if m.get(FIGURE_LABEL) == "replay_jobs"}
        replays = [(m, float(v[1])) for m, v in g.get("", ())
                   if m.get(FIGURE_LABEL) == "replay" and m.get(node, "") in ran and mine(m)]
        if faults:
            counters = [i for i in f.get(job.job_id, ()) if mine(i.get("metric", {}))]
            faults = dated(faults, parse_fault_matrix(
                {"status": "success", "data": {"result": counters}}, node))
        out[job.job_id] = Usage(
            cpu_cores=series("cpu_cores", (node,)),
            cpu_per_core=tuple(sorted(per_core, key=lambda s: s.label)),
            memory_rss=series("memory_rss", (node,)),
            memory_shmem=series("memory_shmem", (node,)),
            memory_cache=series("memory_cache", (node,)),
            memory_limit_bytes=_int(peak["memory_limit_bytes"]),
            memory_limit_by_node=tuple(limit_by_node),
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
            step_seconds=b.step,
            cpu_pressure_seconds=peak["cpu_pressure_seconds"],
            io_pressure_seconds=peak["io_pressure_seconds"],
            memory_pressure_seconds=peak["memory_pressure_seconds"],
            memory_high_events=peak["memory_high_events"],
            cpu_wait_seconds=peak["cpu_wait_seconds"],
            io_wait_seconds=peak["io_wait_seconds"],
            busy_tasks_max=peak["busy_tasks_max"],
            energy_joules=peak["energy_joules"],
            energy_gpu_joules=peak["energy_gpu_joules"],
            energy_other_joules=peak["energy_other_joules"],
            energy_by_node=tuple(energy_by_node),
            gpu_energy=tuple(sorted((f"{m.get(node, '?')}/{m.get('gpu', '?')}", v)
                                    for m, v in figures["energy"])),
            gpu_faults=faults,
            gpu_devices=parse_gpu_devices(figures["info"], node),
            replayed=parse_replayed(replays, node),
        )
    return out


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


class PrefetchedMetrics:
    """A ``MetricsReader`` answering from bulk-fetched usage and coverage (so a batch's
    reports withhold the same thin verdicts as the job's own), else from ``live``; any
    instant query (a site's carbon intensity series) from ``live``."""

    name = "prometheus"

    def __init__(self, live: Any, usage: Mapping[str, Usage],
                 coverage: Mapping[str, Coverage] | None = None) -> None:
        self.live = live
        self.prefetched = dict(usage)
        self.covered = dict(coverage or {})

    def usage(self, job_id: JobId | str | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        # The bulk answers are at the plots' resolution; full resolution asks live.
        found = self.prefetched.get(str(job_id)) if resolution == "plot" else None
        if found is not None:
            return found
        return cast(Usage, self.live.usage(job_id, start, end, nodes, resolution=resolution))

    def coverage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
                 nodes: Iterable[str] = ()) -> Coverage:
        found = self.covered.get(str(job_id)) if not isinstance(job_id, tuple) else None
        if found is not None:
            return found
        return cast(Coverage, self.live.coverage(job_id, start, end, nodes))

    def vector(self, query: str, time: float | None = None
               ) -> list[tuple[dict[str, str], float]]:
        return cast("list[tuple[dict[str, str], float]]", self.live.vector(query, time))
