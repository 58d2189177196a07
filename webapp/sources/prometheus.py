"""Prometheus source: named PromQL over the job's own window, returned as ``Usage``.

Works against any Prometheus-compatible HTTP API (Thanos, Mimir, VictoriaMetrics): only
``/api/v1/query`` and ``/api/v1/query_range`` are used. The step is chosen so that no
series exceeds ``MAX_POINTS``; windows longer than ``CHUNK_SECONDS`` are fetched in chunks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests

from webapp.model import Series, SourceUnavailable, Usage

MAX_POINTS = 1000
CHUNK_SECONDS = 7 * 86400

# Named range queries: name -> (PromQL template, label that names each series).
# {sel} is the job selector, {rate} the rate window. Every metric used here is one the
# exporter emits (a test checks that against exporter/).
RANGE_QUERIES: dict[str, tuple[str, str]] = {
    "cpu_cores": ("sum by (instance) (rate(jobs_cpu_seconds_total{{{sel}}}[{rate}]))", "instance"),
    "cpu_per_core": (
        "sum by (instance, core) (rate(jobs_cpu_core_seconds_total{{{sel}}}[{rate}]))",
        "instance/core",
    ),
    "memory_rss": ("sum by (instance) (jobs_memory_rss_bytes{{{sel}}})", "instance"),
    "gpu_utilization": (
        "max by (instance, gpu) (jobs_gpu_utilization_ratio{{{sel}}})",
        "instance/gpu",
    ),
    "gpu_memory_used": (
        "max by (instance, gpu) (jobs_gpu_memory_used_bytes{{{sel}}})",
        "instance/gpu",
    ),
    "io_read_rate": (
        "sum by (instance) (rate(jobs_read_bytes_total{{{sel}}}[{rate}]))",
        "instance",
    ),
    "io_write_rate": (
        "sum by (instance) (rate(jobs_write_bytes_total{{{sel}}}[{rate}]))",
        "instance",
    ),
}
# Named instant queries evaluated at the job's end over its whole window {window}.
INSTANT_QUERIES: dict[str, str] = {
    "memory_limit_bytes": "sum(max_over_time(jobs_memory_limit_bytes{{{sel}}}[{window}]))",
    "memory_max_usage_bytes": "sum(max_over_time(jobs_memory_max_usage_bytes{{{sel}}}[{window}]))",
    "gpu_memory_total_bytes": "max(max_over_time(jobs_gpu_memory_total_bytes{{{sel}}}[{window}]))",
    "read_bytes": "sum(max_over_time(jobs_read_bytes_total{{{sel}}}[{window}]))",
    "write_bytes": "sum(max_over_time(jobs_write_bytes_total{{{sel}}}[{window}]))",
    "read_syscalls": "sum(max_over_time(jobs_read_syscalls_total{{{sel}}}[{window}]))",
    "write_syscalls": "sum(max_over_time(jobs_write_syscalls_total{{{sel}}}[{window}]))",
    "processes_max": "max(max_over_time(jobs_processes{{{sel}}}[{window}]))",
    "threads_max": "max(max_over_time(jobs_threads{{{sel}}}[{window}]))",
    "open_files_max": "max(max_over_time(jobs_open_files{{{sel}}}[{window}]))",
    "open_files_limit_ratio_max": (
        "max(max_over_time(jobs_open_files_limit_ratio{{{sel}}}[{window}]))"
    ),
    "scratch_in_use": "max(max_over_time(jobs_scratch_in_use{{{sel}}}[{window}]))",
}


def choose_step(seconds: float, scrape_interval: float) -> float:
    """Smallest step (whole seconds, >= the scrape interval) keeping <= MAX_POINTS points."""
    return float(max(math.ceil(scrape_interval), math.ceil(seconds / (MAX_POINTS - 1))))


def rate_window(step: float, scrape_interval: float) -> str:
    """Like Grafana's $__rate_interval: wide enough to always hold two samples."""
    return f"{int(max(step + scrape_interval, 4 * scrape_interval))}s"


def chunks(start: float, end: float, size: float = CHUNK_SECONDS) -> list[tuple[float, float]]:
    """Split [start, end] into consecutive windows of at most ``size`` seconds."""
    out, t = [], start
    while t < end:
        out.append((t, min(t + size, end)))
        t += size
    return out or [(start, end)]


def job_selector(job_id: str, nodes: Iterable[str] = (), node_label: str = "instance") -> str:
    """PromQL label matchers for one job, optionally restricted to its nodes."""
    sel = f'jobid="{_escape(job_id)}"'
    nodes = [n for n in nodes if n]
    if nodes and node_label:
        alt = "|".join(re.escape(n) for n in nodes).replace("\\", "\\\\")
        sel += f',{node_label}=~"({alt})(:[0-9]+)?"'
    return sel


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def parse_matrix(payload: Mapping[str, Any], label: str) -> list[Series]:
    """A ``query_range`` answer -> one ``Series`` per result, named by ``label`` (a/b joins).

    ``{"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},
    "values":[[1435781430.781,"1"], ...]}]}}``
    """
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    out = []
    for item in payload["data"]["result"]:
        metric = item.get("metric", {})
        name = "/".join(metric.get(part, "?") for part in label.split("/"))
        points = tuple(
            (float(t), float(v))
            for t, v in item.get("values", [])
            if v not in ("NaN", "+Inf", "-Inf")
        )
        out.append(Series(name, points))
    return sorted(out, key=lambda s: s.label)


def parse_scalar(payload: Mapping[str, Any]) -> float | None:
    """An instant ``query`` answer (vector) -> its single value, or None when empty."""
    if payload.get("status") != "success":
        raise ValueError(payload.get("error", "query failed"))
    result = payload["data"]["result"]
    if not result:
        return None
    value = float(result[0]["value"][1])
    return None if math.isnan(value) else value


def merge_series(parts: Iterable[list[Series]]) -> tuple[Series, ...]:
    """Join the chunks of one query: series with the same label are concatenated."""
    points: dict[str, dict[float, float]] = {}
    for part in parts:
        for s in part:
            points.setdefault(s.label, {}).update(s.points)
    return tuple(Series(k, tuple(sorted(v.items()))) for k, v in sorted(points.items()))


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
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.scrape_interval = scrape_interval
        self.node_label = node_label
        self.session = session or requests.Session()

    def _get(self, path: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            resp = self.session.get(f"{self.url}{path}", params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise SourceUnavailable(
                self.name, f"cannot reach {self.url}: {exc.__class__.__name__}"
            ) from exc
        try:
            payload = resp.json()
        except ValueError:
            raise SourceUnavailable(self.name, f"HTTP {resp.status_code} without JSON") from None
        if resp.status_code >= 400 and payload.get("errorType") not in ("bad_data",):
            raise SourceUnavailable(
                self.name, f"HTTP {resp.status_code}: {payload.get('error', '')}"
            )
        return payload

    def usage(
        self, job_id: str, start: datetime, end: datetime, nodes: Iterable[str] = ()
    ) -> Usage:
        """Everything the report needs about one job; empty ``Usage`` when nothing was kept."""
        window = Window(start.timestamp(), max(end.timestamp(), start.timestamp() + 1))
        sel = job_selector(job_id, nodes, self.node_label)
        step = choose_step(window.end - window.start, self.scrape_interval)
        rate = rate_window(step, self.scrape_interval)
        ranges: dict[str, tuple[Series, ...]] = {}
        for name, (template, label) in RANGE_QUERIES.items():
            query = template.format(sel=sel, rate=rate)
            parts = []
            for a, b in chunks(window.start, window.end + self.scrape_interval):
                params = {"query": query, "start": a, "end": b, "step": step}
                parts.append(
                    self._parse(parse_matrix, self._get("/api/v1/query_range", params), label)
                )
            ranges[name] = merge_series(parts)
        span = f"{int(window.end - window.start + 2 * self.scrape_interval)}s"
        scalars: dict[str, float | None] = {}
        for name, template in INSTANT_QUERIES.items():
            params = {
                "query": template.format(sel=sel, window=span),
                "time": window.end + self.scrape_interval,
            }
            scalars[name] = self._parse(parse_scalar, self._get("/api/v1/query", params))
        return Usage(
            cpu_cores=ranges["cpu_cores"],
            cpu_per_core=ranges["cpu_per_core"],
            memory_rss=ranges["memory_rss"],
            memory_limit_bytes=_int(scalars["memory_limit_bytes"]),
            memory_max_usage_bytes=_int(scalars["memory_max_usage_bytes"]),
            gpu_utilization=ranges["gpu_utilization"],
            gpu_memory_used=ranges["gpu_memory_used"],
            gpu_memory_total_bytes=_int(scalars["gpu_memory_total_bytes"]),
            read_bytes=scalars["read_bytes"],
            write_bytes=scalars["write_bytes"],
            read_syscalls=scalars["read_syscalls"],
            write_syscalls=scalars["write_syscalls"],
            io_read_rate=ranges["io_read_rate"],
            io_write_rate=ranges["io_write_rate"],
            processes_max=scalars["processes_max"],
            threads_max=scalars["threads_max"],
            open_files_max=scalars["open_files_max"],
            open_files_limit_ratio_max=scalars["open_files_limit_ratio_max"],
            scratch_in_use=None
            if scalars["scratch_in_use"] is None
            else scalars["scratch_in_use"] > 0,
        )

    def _parse(self, parser: Any, payload: Mapping[str, Any], *args: Any) -> Any:
        try:
            return parser(payload, *args)
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceUnavailable(self.name, f"unexpected answer: {exc}") from exc


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
