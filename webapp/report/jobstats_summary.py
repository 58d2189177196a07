"""A report's figures as the per-node summary jobstats stores in ``AdminComment``.

Every figure is the report's own, split over its nodes so that a tool averaging jobstats'
per-node efficiencies (reportseff) shows the report's CPU and memory efficiency and GPU
utilisation: CPU seconds in proportion to each node's measured CPU use (evenly without
series), each node's memory peak and its own request (``JobReport.memory_nodes``; without
them the report's peak on its node and the request split evenly), each GPU's mean
utilisation in percent.
"""

from __future__ import annotations

from typing import Any

from webapp.model import JobReport, Series
from webapp.sources.jobstats_comment import NONE, SHORT


def _node_of(series: Series) -> str:
    return series.label.split("/", 1)[0]


def _split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal integers, the larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _cpu_weights(report: JobReport) -> list[float]:
    """Each node's share of the job's CPU use: its cores-busy series' mean (even without)."""
    means = {_node_of(s): s.mean() or 0.0 for s in report.usage.cpu_cores}
    weights = [means.get(n, 0.0) for n in report.nodes]
    total = sum(weights)
    return [w / total for w in weights] if total else [1 / len(report.nodes)] * len(report.nodes)


def _memory_used(report: JobReport) -> list[int]:
    """Each node's peak of held memory (anonymous + shared, ``Usage.memory_held``: what
    the report's peak is the largest of); the report's own peak (what it judges) on the
    node that held it, or on the busiest node when it does not say which."""
    peaks = {_node_of(s): int(s.max() or 0) for s in report.usage.memory_held if s.points}
    out = [peaks.get(node, 0) for node in report.nodes]
    peak = report.memory_peak
    if peak is not None:
        at = (report.nodes.index(peak.node) if peak.node in report.nodes
              else out.index(max(out)))
        out[at] = peak.bytes
    return out


def _node_gpu(report: JobReport, series: Series) -> tuple[str, str]:
    """(node, GPU index) of a ``node/gpu`` label; a bare label is a GPU of the first node."""
    node, sep, gpu = series.label.partition("/")
    return (node, gpu) if sep else (report.nodes[0], node)


def _gpus(report: JobReport) -> dict[str, dict[str, dict[str, Any]]]:
    """Per node: gpu_utilization (percent), gpu_used_memory and gpu_total_memory (bytes),
    each keyed by the GPU's index as the exporter labels it."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for s in report.usage.gpu_utilization:
        mean = s.mean()
        if mean is None:
            continue
        node, gpu = _node_gpu(report, s)
        out.setdefault(node, {}).setdefault("gpu_utilization", {})[gpu] = round(mean * 100, 1)
    total = report.usage.gpu_memory_total_bytes
    for s in report.usage.gpu_memory_used:
        node, gpu = _node_gpu(report, s)
        if total and s.points:
            per_node = out.setdefault(node, {})
            per_node.setdefault("gpu_used_memory", {})[gpu] = int(s.max() or 0)
            per_node.setdefault("gpu_total_memory", {})[gpu] = int(total)
    return out


def build_jobstats_summary(report: JobReport, short_below: float) -> dict[str, Any] | str:
    """The summary of an ended job, or jobstats' marker: ``Short`` when it ran under
    ``short_below`` seconds (two scrapes), ``None`` when the report has no figures."""
    elapsed = report.elapsed_seconds
    if elapsed is not None and elapsed < short_below:
        return SHORT
    if not elapsed or not report.nodes or not report.cpus:
        return NONE
    if report.cpu_seconds is None and report.memory_peak is None and report.usage.empty:
        return NONE
    n = len(report.nodes)
    cores = _split(report.cpus, n)
    weights = _cpu_weights(report)
    memory = _memory_used(report)
    per_node_request = report.memory_requested_per_node or report.usage.memory_limit_bytes
    # each node's own request and peak where the report has them (a het job's components
    # ask for different amounts): jobstats' sums then never read a node against another's
    own = {n.node: n for n in report.memory_nodes if n.requested_bytes}
    gpus = _gpus(report)
    nodes: dict[str, dict[str, Any]] = {}
    for i, node in enumerate(report.nodes):
        data: dict[str, Any] = {"cpus": cores[i]}
        if report.cpu_seconds is not None:
            data["total_time"] = round(report.cpu_seconds * weights[i], 1)
        if node in own:
            data["used_memory"] = own[node].peak_bytes or 0
            data["total_memory"] = int(own[node].requested_bytes or 0)
        elif per_node_request:
            data["used_memory"] = memory[i]
            data["total_memory"] = int(per_node_request)
        data.update(gpus.get(node, {}))
        nodes[node] = data
    return {"nodes": nodes, "total_time": int(round(elapsed)), "gpus": report.gpus}
