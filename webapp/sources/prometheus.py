"""Prometheus source: named PromQL over the job's own window, returned as ``Usage``.

Works against any Prometheus-compatible HTTP API (Thanos, Mimir, VictoriaMetrics): only
``/api/v1/query`` and ``/api/v1/query_range`` are used.

Work is budgeted by points, not by time: the step grows with the job's length (and its
node count) so that a range query returns at most ``MAX_POINTS`` points per series and
``POINTS_BUDGET`` points in all; each is fetched in pieces of ``PIECE_STEPS`` steps, so a
report makes at most ``REQUEST_BUDGET`` requests however long the job ran (a 10-year
runaway as few as a 1-hour job). The queries of one report run concurrently, at most
``MAX_WORKERS`` at a time (see bench/bench_report.py). The answers are read by
``webapp.sources.prometheus_answers`` (its parsers are re-exported here).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests

from webapp.model import Coverage, JobId, Series, SourceUnavailable, Usage
from webapp.sources.counter_resets import (
    RESETS_QUERY,
    SAMPLES_QUERY,
    added_back,
    losses,
    reset_nodes,
)
from webapp.sources.gpu_metrics import JOBS, GpuMetrics, gpu_coverage_query, total_query

# The answer parsers are re-exported: callers import them from here too.
from webapp.sources.prometheus_answers import (
    dated,
    merge_series,
    parse_fault_matrix,
    parse_gpu_devices,
    parse_gpu_faults,
    parse_matrix,
    parse_matrix_body,
    parse_mean_since,
    parse_replayed,
    parse_vector,
)
from webapp.sources.prometheus_coverage import COVERAGE_QUERIES, coverages

# The named queries are re-exported: tests and the benchmark read them from here.
from webapp.sources.prometheus_queries import (
    ENERGY_FIGURES,
    FIGURE_LABEL,
    GPU_ENERGY_QUERY,
    GPU_FAULT_QUERIES,
    GPU_FAULT_SERIES,
    GPU_INFO_QUERY,
    MAYBE_ABSENT_FIGURES,
    RANGE_QUERIES,
    REPLAY_QUERY,
    TAIL_FIGURES,
    VECTOR_QUERIES,
    WINDOW_FIGURES,
    WINDOW_QUERIES,
    combined,
    peak_query,
    tail_query,
)

T = TypeVar("T")  # what a parser of an answer returns
MAX_POINTS = 1000  # per series of a range query: the "full" resolution
PLOT_POINTS = 500  # the default: about one point per pixel of a plot (axes ~490 pt wide)
RESOLUTIONS = {"plot": PLOT_POINTS, "full": MAX_POINTS}
MIN_POINTS = 120  # however many nodes: a plot needs some shape
POINTS_BUDGET = 24_000  # per range query, estimated as nodes x points (jobs on <= 24 nodes: 1000)
MAX_WORKERS = 8  # concurrent queries per report: bounded, a report must not flood Prometheus
# Range queries are fetched whole (one request of up to MAX_POINTS steps): every request
# costs Prometheus a series lookup and chunk seeks, and a report's queries already run
# concurrently. Pieces only bound a request whose step was not chosen here.
PIECE_STEPS = MAX_POINTS
LOOKBACK = "5m"  # Prometheus' default staleness lookback: where an instant selector looks
TAIL_SCRAPES = 10  # the last samples are looked for this many scrapes (at least 5 min) back
LOOPBACK = ("localhost", "127.0.0.1", "::1")

# Requests one report may make: every range query in its pieces, each vector query with
# its fallback, the tail figures, the window figures, the GPUs' energy, faults and devices
# (one request) and the tail figures' fallback, whatever the job's length; a job whose
# GPUs reported faults makes one more, to date them.
REQUEST_BUDGET = (
    len(RANGE_QUERIES) * math.ceil(MAX_POINTS / PIECE_STEPS) + 2 * len(VECTOR_QUERIES) + 4
)


def max_points(n_nodes: int, resolution: str = "full") -> int:
    """Points per series for a job on ``n_nodes`` nodes: the resolution's points
    (``RESOLUTIONS``) shared out of the POINTS_BUDGET, never fewer than MIN_POINTS."""
    full = max(MIN_POINTS, min(MAX_POINTS, POINTS_BUDGET // max(1, n_nodes)))
    return max(MIN_POINTS, full * RESOLUTIONS[resolution] // MAX_POINTS)


def choose_step(seconds: float, scrape_interval: float, points: int = MAX_POINTS) -> float:
    """Smallest step (whole seconds, >= the scrape interval) keeping <= ``points`` points."""
    return float(max(math.ceil(scrape_interval), math.ceil(seconds / (points - 1))))


def grid_ending(end: float, seconds: float, step: float) -> float:
    """The start of a range query of at least ``seconds`` whose last instant is ``end``.
    Prometheus evaluates ``start + k * step`` up to ``end``: from ``end - seconds`` the last
    point falls up to a step short of ``end``, and a chart "until now" stops before now."""
    return end - math.ceil(seconds / step - 1e-9) * step


def grid_start(start: float, step: float) -> float:
    """The first instant at or after ``start`` on the grid of multiples of ``step``: every
    range query of a job evaluates these instants, so one job's series are the same
    points whether asked for alone or in a bulk window shared with other jobs."""
    return math.ceil(start / step) * step


def rate_window(step: float, scrape_interval: float) -> str:
    """Like Grafana's $__rate_interval: wide enough to always hold two samples."""
    return f"{int(max(step + scrape_interval, 4 * scrape_interval))}s"


def pieces(start: float, end: float, step: float) -> list[tuple[float, float]]:
    """Split one range query into consecutive ones that evaluate exactly the same instants.

    Prometheus evaluates ``start + k * step`` for ``k = 0, 1, ...`` up to ``end``; the pieces
    start on those instants, so their answers joined are the whole query's answer. Only
    whole-second starts and steps are split (float sums stay exact); others stay one piece.
    """
    if step <= 0 or start != int(start) or step != int(step):
        return [(start, end)]
    last = max(0, int((end - start) // step))  # index of the last instant evaluated
    out = []
    for k in range(0, last + 1, PIECE_STEPS):
        k_end = min(k + PIECE_STEPS - 1, last)
        out.append((start + k * step, end if k_end == last else start + k_end * step))
    return out


def job_selector(job_id: str | tuple[str, ...], nodes: Iterable[str] = (),
                 node_label: str = "instance", cluster_label: str = "", cluster: str = "",
                 job_label: str = "jobid") -> str:
    """PromQL label matchers for one job (or the ids of a het job's components, which
    the exporter sees as jobs of their own), optionally restricted to its nodes, and to
    its cluster where one Prometheus holds several (``cluster_matcher``). ``job_label``:
    the label holding the id (``jobid``; a GPU exporter's own, ``gpu_metrics``)."""
    if isinstance(job_id, tuple):
        alt = "|".join(re.escape(i) for i in job_id)
        sel = f"{job_label}=~{promql_string(alt)}"
    else:
        sel = f"{job_label}={promql_string(job_id)}"
    nodes = [n for n in nodes if n]
    if nodes and node_label:
        # re.escape makes each name literal for the regex; promql_string then makes the
        # regex one string literal (re.escape leaves '"' alone).
        alt = "|".join(re.escape(n) for n in nodes)
        sel += f",{node_label}=~{promql_string(f'({alt})(:[0-9]+)?')}"
    return matchers(sel, cluster_matcher(cluster_label, cluster))


def cluster_matcher(label: str, cluster: str) -> str:
    """``cluster="v24"``: what keeps one cluster's ``jobs_*`` series apart where one
    Prometheus holds several clusters' (their job ids overlap), the cluster named in
    ``label`` (JOBREPORT_PROMETHEUS_CLUSTER_LABEL); empty without a label."""
    return f"{label}={promql_string(cluster)}" if label else ""


def matchers(*parts: str) -> str:
    """Label matchers joined, the empty ones left out:

        'jobid=~"1|2"', ''  ->  jobid=~"1|2"
    """
    return ",".join(p for p in parts if p)


def braced(matcher_list: str) -> str:
    """The braces after a bare metric name: ``{cluster="v24"}``, or nothing at all when
    there are no matchers (the query is then what it was before clusters had labels)."""
    return f"{{{matcher_list}}}" if matcher_list else ""


# Backslash, quote, and every control character (as Go's \\xHH, which PromQL reads).
_PROMQL_ESCAPES = str.maketrans({
    "\\": "\\\\", '"': '\\"',
    **{chr(c): f"\\x{c:02x}" for c in (*range(0x20), 0x7F)},
})


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal (Go escapes), whatever it holds.

        n1"} or {x="  ->  "n1\\"} or {x=\\""
    """
    return '"' + value.translate(_PROMQL_ESCAPES) + '"'


@dataclass(frozen=True)
class Window:
    start: float
    end: float


class PrometheusSource:
    """Reads a job's ``jobs_*`` series. ``session`` is injectable (tests, auth, proxies)."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        timeout: float = 10.0,
        scrape_interval: float = 30.0,
        node_label: str = "instance",
        session: requests.Session | None = None,
        compress: bool | None = None,
        cluster_label: str = "",
        cluster: str = "",
        gpu_metrics: GpuMetrics = JOBS,
    ) -> None:
        self.url = url.rstrip("/")
        # Where the GPU figures come from (JOBREPORT_GPU_METRICS): gpu_metrics.py
        self.gpu_metrics = gpu_metrics
        self.timeout = timeout
        self.scrape_interval = scrape_interval
        self.node_label = node_label
        # One Prometheus holding several clusters' series: every jobs_* selector also
        # matches the cluster (``cluster_matcher``; "" where the series are one cluster's).
        self.cluster_label, self.cluster = cluster_label, cluster
        self.cluster_matcher = cluster_matcher(cluster_label, cluster)
        self.session = session or requests.Session()
        # Prometheus gzips its answers when asked (requests always asks). On the loopback
        # interface that only costs CPU: a 7-day, 256-core job's per-core answer is 9 MB of
        # JSON, ~0.4 s of gzip on a 2-CPU host. None: compress unless the URL is loopback.
        if compress is None:
            compress = urlsplit(self.url).hostname not in LOOPBACK
        self._headers = None if compress else {"Accept-Encoding": "identity"}

    def selector(self, job_id: str | tuple[str, ...], nodes: Iterable[str] = (),
                 job_label: str = "jobid") -> str:
        """``job_selector`` with this source's node and cluster labels."""
        return job_selector(job_id, nodes, self.node_label, self.cluster_label, self.cluster,
                            job_label)

    def gpu_queries(self, job_id: str | tuple[str, ...], nodes: Iterable[str], node: str,
                    rate: str) -> dict[str, tuple[str, str]]:
        """The range queries of the report, the GPU ones from ``gpu_metrics``'s table
        (none where its figures are not series): name -> (PromQL, label of each series)."""
        gm = self.gpu_metrics
        sel = self.selector(job_id, nodes)
        out = {name: (template.format(sel=sel, rate=rate, node=node), label)
               for name, (template, label) in RANGE_QUERIES.items()}
        gsel = self.selector(job_id, nodes, gm.job_label)
        for name, template in (("gpu_utilization", gm.utilization),
                               ("gpu_memory_used", gm.memory_used)):
            if template:
                out[name] = (template.format(sel=gsel, node=node), out[name][1])
            else:
                del out[name]
        return out

    def _get(self, path: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return self._payload(self._request(path, params))

    def _request(self, path: str, params: Mapping[str, Any]) -> requests.Response:
        try:
            resp = self.session.get(
                f"{self.url}{path}", params=params, timeout=self.timeout, headers=self._headers
            )
        except requests.RequestException as exc:
            raise SourceUnavailable(
                self.name, f"cannot reach {self.url}: {exc.__class__.__name__}"
            ) from exc
        return resp

    def _payload(self, resp: requests.Response) -> Mapping[str, Any]:
        try:
            payload = resp.json()
        except ValueError:
            raise SourceUnavailable(self.name, f"HTTP {resp.status_code} without JSON") from None
        if not isinstance(payload, Mapping):  # a proxy's page or list, not Prometheus's answer
            raise SourceUnavailable(
                self.name, f"HTTP {resp.status_code}: JSON {type(payload).__name__}, not an object"
            )
        if resp.status_code >= 400 and payload.get("errorType") not in ("bad_data",):
            raise SourceUnavailable(
                self.name, f"HTTP {resp.status_code}: {payload.get('error', '')}"
            )
        return payload

    def usage(
        self,
        job_id: JobId | str | tuple[str, ...],
        start: datetime,
        end: datetime,
        nodes: Iterable[str] = (),
        resolution: str = "plot",
    ) -> Usage:
        """Everything the report needs about one job; empty ``Usage`` when nothing was kept.

        ``resolution``: ``plot`` (the default, about one point per pixel of a plot) or
        ``full`` (MAX_POINTS per series: every scrape of a job up to ~8 h at 30 s)."""
        window = Window(start.timestamp(), max(end.timestamp(), start.timestamp() + 1))
        nodes = tuple(nodes)
        sel = self.selector(job_id if isinstance(job_id, tuple) else str(job_id), nodes)
        node = self.node_label or "instance"  # grouping label, even when not filtering
        # The last instant asked for is one scrape after the end (the final sample).
        step = choose_step(
            window.end + self.scrape_interval - window.start,
            self.scrape_interval,
            max_points(len(nodes), resolution),
        )
        rate = rate_window(step, self.scrape_interval)
        span_s = int(window.end - window.start + 2 * self.scrape_interval)
        span = f"{span_s}s"
        tail = f"{min(span_s, int(max(300, TAIL_SCRAPES * self.scrape_interval)))}s"
        at_end = window.end + self.scrape_interval
        calls: list[Callable[[], Any]] = []
        n_chunks: dict[str, int] = {}
        sent: list[tuple[str, str]] = []  # (name, PromQL) for the report's audit section
        spans = pieces(min(grid_start(window.start, step), at_end), at_end, step)
        job = job_id if isinstance(job_id, tuple) else str(job_id)
        for name, (query, label) in self.gpu_queries(job, nodes, node, rate).items():
            sent.append((f"{name} (range, step {step:g}s)", query))
            label = label.format(node=node)
            n_chunks[name] = len(spans)
            for a, b in spans:
                params: dict[str, Any] = {"query": query, "start": a, "end": b, "step": step}
                calls.append(self._matrix_call(params, label))
        for vname, (template, fallback, label) in VECTOR_QUERIES.items():
            # up to one scrape after the end, as the tail figures: a job shorter than a
            # scrape may have no sample before its (whole-second) end
            params = {"query": template.format(sel=sel, lookback=LOOKBACK), "time": at_end}
            sent.append((vname, params["query"]))
            slow = {"query": fallback.format(sel=sel, window=span, node=node), "time": at_end}
            since = (int(window.start), window.end)
            calls.append(self._vector_call(params, slow, label.format(node=node), since))
        gm, gsel = self.gpu_metrics, self.selector(job, nodes, self.gpu_metrics.job_label)
        tails = combined({name: tail_query(name, sel, node, tail) for name in TAIL_FIGURES}
                         | _gpu_total(gm, gsel, node, "last_over_time", tail, "max by ({node})"))
        calls.append(self._call("/api/v1/query", {"query": tails, "time": at_end}, parse_labelled))
        sent.append(("tail figures", tails))
        whole = {n: WINDOW_QUERIES[n].format(sel=sel, window=span) for n in WINDOW_QUERIES}
        whole |= _gpu_total(gm, gsel, node, "last_over_time", span, "max")
        peaks = {n: peak_query(n, sel, window.start - self.scrape_interval, at_end)
                 for n in WINDOW_FIGURES}
        gauges: dict[str, Any] = {"query": combined({n: q for n, (q, _) in peaks.items()}),
                  "time": next(iter(peaks.values()))[1]}
        calls.append(self._call("/api/v1/query", gauges, parse_labelled))
        sent.append(("window peaks", gauges["query"]))
        # The GPUs' energy, faults and identities: one request (each answer its figure)
        gpus = combined({
            "energy": GPU_ENERGY_QUERY.format(node=node, sel=sel, span=span),
            **{k: q.format(node=node, sel=sel, span=span) for k, q in GPU_FAULT_QUERIES.items()},
            "info": GPU_INFO_QUERY.format(node=node, sel=sel, span=span),
            # the counters the exporter sums itself, if a restart without its state reset them
            "resets": RESETS_QUERY.format(node=node, sel=sel, span=span),
            # readings its nodes replayed, not measured (test and demo stacks)
            "replay": REPLAY_QUERY.format(node=node, sel=sel, span=span,
                                          scope=braced(self.cluster_matcher)),
        })
        calls.append(self._call("/api/v1/query", {"query": gpus, "time": at_end},
                                parse_labelled))
        sent.append(("GPU energy, faults and devices; summed counters' resets; replays",
                     gpus))
        if gm is not JOBS:
            sent.append((f"GPU figures from {gm.exporter}", gm.note))
        answers = iter(self._run(calls))
        ranges: dict[str, tuple[Series, ...]] = {
            name: merge_series([next(answers) for _ in range(n)]) for name, n in n_chunks.items()
        }
        ranges.setdefault("gpu_utilization", ())
        ranges.setdefault("gpu_memory_used", ())
        vectors = {name: tuple(next(answers)) for name in VECTOR_QUERIES}
        per_node = next(answers)
        scalars = _figures(next(answers))
        by_figure: dict[str, list[tuple[dict[str, str], float]]] = {}
        for labels, value in next(answers):
            by_figure.setdefault(labels.get(FIGURE_LABEL, ""), []).append((labels, value))
        per_gpu = tuple(sorted((f"{m.get(node, '?')}/{m.get('gpu', '?')}", v)
                               for m, v in by_figure.get("energy", ())))
        gpu_faults = parse_gpu_faults(
            [*by_figure.get("xid", ()), *by_figure.get("ecc", ())], node)
        gpu_devices = parse_gpu_devices(by_figure.get("info", []), node)
        if gpu_faults:  # rare: one more query dates each fault's first sample
            params = {"query": GPU_FAULT_SERIES.format(node=node, sel=sel),
                      "start": window.start, "end": at_end, "step": step}
            sent.append(("GPU fault counters (range)", params["query"]))
            gpu_faults = dated(gpu_faults, self._parse(
                parse_fault_matrix, self._get("/api/v1/query_range", params), node))
        scalars.update(_tail_figures(per_node))
        # A node with series in the window but no last sample (its exporter stopped before
        # the job ended): those figures are computed over the whole window instead.
        missing = _missing_tails(per_node, _nodes(ranges, "cpu_cores", "memory_rss"),
                                 _nodes(ranges, "gpu_utilization", "gpu_memory_used"))
        if missing:
            # the exporter stopped before the job ended: its energy counters too, in the
            # same request (never asked alone: a node without an energy source has none)
            missing += [n for n in sorted(ENERGY_FIGURES) if scalars.get(n) is None]
            again: dict[str, Any] = {"query": combined({n: whole[n] for n in missing}),
                                     "time": at_end}
            answer = self._get("/api/v1/query", again)
            sent.append(("window figures (a node without last samples)", again["query"]))
            found = _figures(self._parse(parse_labelled, answer))
            scalars.update({name: found.get(name) for name in missing})
        energy_by_node = _by_node(per_node, "energy_joules")
        resets = reset_nodes(by_figure.get("resets", ()), node)
        if resets:  # rare: what the counters held before each reset, added back
            params = {"query": SAMPLES_QUERY.format(sel=sel, span=span), "time": at_end}
            sent.append(("summed counters' samples (a reset)", params["query"]))
            lost = losses(self._parse(_matrix_result, self._get("/api/v1/query", params)))
            scalars, energy_by_node, per_gpu = added_back(lost, node, scalars,
                                                          energy_by_node, per_gpu)
        scratch = scalars.get("scratch_in_use")
        return Usage(
            cpu_cores=ranges["cpu_cores"],
            cpu_per_core=vectors["cpu_per_core"],
            memory_rss=ranges["memory_rss"],
            memory_shmem=ranges["memory_shmem"],
            memory_cache=ranges["memory_cache"],
            memory_limit_bytes=_int(scalars.get("memory_limit_bytes")),
            memory_limit_by_node=_by_node(per_node, "memory_limit_bytes"),
            memory_max_usage_bytes=_int(scalars.get("memory_max_usage_bytes")),
            gpu_utilization=ranges["gpu_utilization"],
            gpu_memory_used=ranges["gpu_memory_used"],
            gpu_memory_total_bytes=_int(scalars.get("gpu_memory_total_bytes")),
            read_bytes=scalars.get("read_bytes"),
            write_bytes=scalars.get("write_bytes"),
            read_syscalls=scalars.get("read_syscalls"),
            write_syscalls=scalars.get("write_syscalls"),
            io_read_rate=ranges["io_read_rate"],
            io_write_rate=ranges["io_write_rate"],
            processes_max=scalars.get("processes_max"),
            threads_max=scalars.get("threads_max"),
            open_files_max=scalars.get("open_files_max"),
            open_files_limit_ratio_max=scalars.get("open_files_limit_ratio_max"),
            scratch_in_use=None if scratch is None else scratch > 0,
            step_seconds=step,
            cpu_pressure_seconds=scalars.get("cpu_pressure_seconds"),
            io_pressure_seconds=scalars.get("io_pressure_seconds"),
            memory_pressure_seconds=scalars.get("memory_pressure_seconds"),
            memory_high_events=scalars.get("memory_high_events"),
            cpu_wait_seconds=scalars.get("cpu_wait_seconds"),
            io_wait_seconds=scalars.get("io_wait_seconds"),
            busy_tasks_max=scalars.get("busy_tasks_max"),
            energy_joules=scalars.get("energy_joules"),
            energy_gpu_joules=scalars.get("energy_gpu_joules"),
            energy_other_joules=scalars.get("energy_other_joules"),
            energy_by_node=energy_by_node,
            gpu_energy=per_gpu,
            counter_resets=resets,
            gpu_faults=gpu_faults,
            gpu_devices=gpu_devices,
            replayed=parse_replayed(by_figure.get("replay", []), node),
            queries=tuple(sent),
        )

    def coverage_queries(self, job_id: str | tuple[str, ...], nodes: Iterable[str],
                         span: int) -> list[tuple[str, str, str]]:
        """(name, PromQL, series label) of the samples' coverage: each series' stored
        samples over the ``span`` seconds before the instant asked (prometheus_coverage);
        the GPUs' from the source's own series (``gpu_metrics``)."""
        nodes = tuple(nodes)
        sel = self.selector(job_id, nodes)
        gsel = self.selector(job_id, nodes, self.gpu_metrics.job_label)
        out = []
        for name, template, label in COVERAGE_QUERIES:
            query = template.format(sel=sel, span=span)
            if name == "coverage_gpus" and self.gpu_metrics is not JOBS:
                query, label = gpu_coverage_query(self.gpu_metrics, gsel, "{node}", span)
            out.append((name, query, label))
        return out

    def coverage_span(self, start: datetime, end: datetime) -> tuple[float, float, int]:
        """(run start, run end, span of the samples asked for) of a coverage read: the
        run and a scrape either side, asked for one scrape after the end."""
        a, b = start.timestamp(), max(end.timestamp(), start.timestamp() + 1)
        return a, b, int(b - a + 2 * self.scrape_interval)

    def coverage(self, job_id: JobId | str | tuple[str, ...], start: datetime, end: datetime,
                 nodes: Iterable[str] = ()) -> Coverage:
        """The samples' coverage of the run per node and per GPU (prometheus_coverage)."""
        nodes = tuple(nodes)
        a, b, span = self.coverage_span(start, end)
        node = self.node_label or "instance"
        job = job_id if isinstance(job_id, tuple) else str(job_id)
        queries = self.coverage_queries(job, nodes, span)
        calls = [self._call("/api/v1/query", {"query": q, "time": b + self.scrape_interval},
                            parse_matrix, label.format(node=node)) for _, q, label in queries]
        node_series, gpu_series = self._run(calls)
        return Coverage(
            nodes=coverages(node_series, nodes, a, b, self.scrape_interval),
            gpus=coverages(gpu_series, (), a, b, self.scrape_interval),
            queries=tuple((name, q) for name, q, _ in queries),
        )

    def _call(
        self, path: str, params: Mapping[str, Any], parser: Any, *args: Any
    ) -> Callable[[], Any]:
        return lambda: self._parse(parser, self._get(path, params), *args)

    def _vector_call(
        self,
        params: Mapping[str, Any],
        fallback: Mapping[str, Any],
        label: str,
        since: tuple[float, float],
    ) -> Callable[[], Any]:
        def call() -> list[Series]:
            answer = self._get("/api/v1/query", params)
            series = self._parse(parse_mean_since, answer, label, *since)
            if series:
                return series
            return self._parse(parse_vector, self._get("/api/v1/query", fallback), label)

        return call

    def _matrix_call(self, params: Mapping[str, Any], label: str) -> Callable[[], Any]:
        def call() -> list[Series]:
            resp = self._request("/api/v1/query_range", params)
            if resp.status_code < 400:
                fast = parse_matrix_body(resp.content, label)
                if fast is not None:
                    return fast
            return self._parse(parse_matrix, self._payload(resp), label)

        return call

    def _run(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Every call's answer, in order; the first failure (in order) is raised."""
        if len(calls) <= 1:
            return [call() for call in calls]
        pool = ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(calls)))
        try:
            futures = [pool.submit(call) for call in calls]
            return [f.result() for f in futures]
        finally:
            # On failure do not wait for (or start) the rest: a down Prometheus costs one
            # timeout, as it did when the queries ran one after another.
            pool.shutdown(wait=False, cancel_futures=True)

    def _parse(self, parser: Callable[..., T], payload: Mapping[str, Any], *args: Any) -> T:
        try:
            return parser(payload, *args)
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceUnavailable(self.name, f"unexpected answer: {exc}") from exc

    # Public helpers for other named queries (the cluster series): one query, parsed.
    def instant(self, query: str, time: float | None, label: str) -> list[Series]:
        """An instant query at ``time`` (None: now), one single-point Series per result."""
        params: dict[str, Any] = {"query": query}
        if time is not None:
            params["time"] = time
        return self._parse(parse_vector, self._get("/api/v1/query", params), label)

    def vector(self, query: str, time: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant query's (labels, value) pairs, whatever the labels hold."""
        params: dict[str, Any] = {"query": query}
        if time is not None:
            params["time"] = time
        return self._parse(parse_labelled, self._get("/api/v1/query", params))

    def range(self, query: str, start: float, end: float, label: str,
              step: float | None = None) -> list[Series]:
        """A range query over [start, end] at ``step`` (default: the one ``choose_step``
        picks)."""
        step = step or choose_step(end - start, self.scrape_interval)
        params = {"query": query, "start": start, "end": max(end, start), "step": step}
        return self._parse(parse_matrix, self._get("/api/v1/query_range", params), label)


def _gpu_total(gm: GpuMetrics, sel: str, node: str, fn: str, rng: str,
               agg: str) -> dict[str, str]:
    """The card's memory from a GPU exporter's table (``jobs`` keeps its definitions)."""
    if gm is JOBS:
        return {}
    if not gm.memory_total:  # a source without series: no such figure
        return {"gpu_memory_total_bytes": "vector(0) > 1"}
    return {"gpu_memory_total_bytes": total_query(gm, sel, node, fn, rng, agg)}


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _matrix_result(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A range selector's answer (an instant query of ``metric[span]``): its series."""
    if payload.get("status") != "success" or payload["data"]["resultType"] != "matrix":
        raise ValueError(payload.get("error", "not a matrix"))
    return list(payload["data"]["result"])


def parse_labelled(payload: Mapping[str, Any]) -> list[tuple[dict[str, str], float]]:
    """A vector answer as (labels, value) pairs, non-finite values left out."""
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    out = []
    for item in payload["data"]["result"]:
        value = float(item["value"][1])
        if math.isfinite(value):
            out.append((dict(item.get("metric", {})), value))
    return out


def _figures(answer: list[tuple[dict[str, str], float]]) -> dict[str, float | None]:
    """A combined answer (``prometheus_queries.combined``) as {figure: value}."""
    return {labels[FIGURE_LABEL]: value for labels, value in answer if FIGURE_LABEL in labels}


def _tail_figures(per_node: list[tuple[dict[str, str], float]]) -> dict[str, float | None]:
    """The tail answer's per-node values combined over nodes as each figure says."""
    values: dict[str, list[float]] = {}
    for labels, value in per_node:
        values.setdefault(labels.get(FIGURE_LABEL, ""), []).append(value)
    out: dict[str, float | None] = {}
    for name, (agg, _) in TAIL_FIGURES.items():
        found = values.get(name)
        out[name] = None if not found else (sum(found) if agg == "sum" else max(found))
    return out


def _by_node(per_node: list[tuple[dict[str, str], float]], figure: str
             ) -> tuple[tuple[str, float], ...]:
    """One tail figure's value on each node, by node name."""
    out = []
    for labels, value in per_node:
        if labels.get(FIGURE_LABEL) == figure:
            out.append((next((v for k, v in labels.items() if k != FIGURE_LABEL), ""), value))
    return tuple(sorted(out))


def _nodes(ranges: Mapping[str, tuple[Series, ...]], *names: str) -> set[str]:
    """The nodes with points in the named range answers (labels ``node`` or ``node/...``)."""
    return {s.label.split("/")[0] for n in names for s in ranges[n] if s.points}


def _missing_tails(
    per_node: list[tuple[dict[str, str], float]], nodes: set[str], gpu_nodes: set[str]
) -> list[str]:
    """Tail figures lacking a node that has series in the job's window."""
    seen: dict[str, set[str]] = {}
    for labels, _ in per_node:
        node = next((v for k, v in labels.items() if k != FIGURE_LABEL), "")
        seen.setdefault(labels.get(FIGURE_LABEL, ""), set()).add(node)
    return [
        name
        for name in TAIL_FIGURES
        if name not in MAYBE_ABSENT_FIGURES
        and not (gpu_nodes if name == "gpu_memory_total_bytes" else nodes) <= seen.get(name, set())
    ]
