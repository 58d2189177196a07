"""JSON renderer: a documented, stable schema (``SCHEMA_VERSION``; see the README).

Fields are only ever added within one schema version; units are bytes, seconds and
ratios in 0..1; times are ISO 8601 UTC; unknown values are ``null``. Series are at the
resolution the report was built with (``plot`` by default, ``full`` on request).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from webapp.model import JobReport, MemoryPeak, Series
from webapp.renderers.queue import queue_dict

SCHEMA_VERSION = 1


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _series(series: tuple[Series, ...]) -> list[dict[str, Any]]:
    return [{"label": s.label, "points": [[t, v] for t, v in s.points]} for s in series]


def _peak(peak: MemoryPeak | None) -> dict[str, Any] | None:
    if peak is None:
        return None
    return {
        "bytes": peak.bytes,
        "source": str(peak.source),
        "estimate": peak.estimate,
        "node": peak.node,
        "step_id": peak.step_id,
        "per_task_bytes": peak.per_task_bytes,
        "tasks": peak.tasks,
    }


def to_dict(report: JobReport, include_series: bool = True) -> dict[str, Any]:
    """The report as plain data (what ``render`` serialises)."""
    u = report.usage
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "job_id": report.job_id,
        "cluster": report.cluster,
        "user": report.user,
        "uid": report.uid,
        "account": report.account,
        "job_name": report.job_name,
        "partition": report.partition,
        "nodes": list(report.nodes),
        "work_dir": report.work_dir,
        "state": report.state,
        "exit_code": report.exit_code,
        "submit_time": _time(report.submit_time),
        "start_time": _time(report.start_time),
        "end_time": _time(report.end_time),
        "elapsed_seconds": report.elapsed_seconds,
        "time_limit_seconds": report.time_limit_seconds,
        "time_limit_kind": report.time_limit_kind and str(report.time_limit_kind),
        "figures_from": report.figures_from,
        "cpus": report.cpus,
        "cpu_seconds": report.cpu_seconds,
        "cpu_seconds_source": report.cpu_source and str(report.cpu_source),
        "cpu_efficiency": report.cpu_efficiency,
        "memory_peak_bytes": report.memory_peak_bytes,
        "memory_peak": _peak(report.memory_peak),
        "memory_requested_bytes": report.memory_requested_bytes,
        "memory_requested_per_node_bytes": report.memory_requested_per_node,
        "memory_efficiency": report.memory_efficiency,
        "gpus": report.gpus,
        "usage": {
            "memory_limit_bytes": u.memory_limit_bytes,
            "memory_max_usage_bytes": u.memory_max_usage_bytes,
            "gpu_memory_total_bytes": u.gpu_memory_total_bytes,
            "read_bytes": u.read_bytes,
            "write_bytes": u.write_bytes,
            "read_syscalls": u.read_syscalls,
            "write_syscalls": u.write_syscalls,
            "processes_max": u.processes_max,
            "threads_max": u.threads_max,
            "open_files_max": u.open_files_max,
            "open_files_limit_ratio_max": u.open_files_limit_ratio_max,
            "scratch_in_use": u.scratch_in_use,
        },
        "steps": [
            {
                "step_id": s.step_id,
                "name": s.name,
                "state": s.state,
                "exit_code": s.exit_code,
                "elapsed_seconds": s.elapsed_seconds,
                "cpu_seconds": s.total_cpu_seconds,
                "max_rss_bytes": s.max_rss_bytes,
                "max_rss_node": s.max_rss_node,
                "tasks": s.tasks,
                "cpus": s.cpus,
            }
            for s in report.steps
        ],
        "findings": [
            {
                "name": f.name,
                "severity": f.severity.value,
                "message": f.message,
                "advice": f.advice,
                "evidence": dict(f.evidence),
                "evidence_text": f.evidence_text,
            }
            for f in report.findings
        ],
        # A gap's technical detail is logged and shown to staff on the web page, never here.
        "gaps": [{"source": g.source, "reason": g.reason} for g in report.gaps],
        "notes": list(report.notes),
        "array": None,
    }
    if report.array:
        a = report.array
        out["array"] = {
            "tasks": len(a.tasks),
            "elapsed_seconds_p50": a.elapsed_p50,
            "elapsed_seconds_p95": a.elapsed_p95,
            "memory_peak_bytes_p50": a.memory_peak_p50,
            "memory_peak_bytes_p95": a.memory_peak_p95,
            "cpu_efficiency_p50": a.cpu_efficiency_p50,
            "cpu_efficiency_p95": a.cpu_efficiency_p95,
            "outliers": list(a.outliers),
            "suggested_mem": a.suggested_mem,
            "suggested_time": a.suggested_time,
            "states": a.state_counts(),
            "task_list": [
                {
                    "job_id": t.job_id,
                    "state": t.state,
                    "elapsed_seconds": t.elapsed_seconds,
                    "cpu_efficiency": t.cpu_efficiency,
                    "memory_peak_bytes": t.memory_peak_bytes,
                }
                for t in a.tasks
            ],
        }
    out["queue"] = queue_dict(report.queue)
    if include_series:
        out["series"] = {
            "cpu_cores": _series(u.cpu_cores),
            "cpu_per_core": _series(u.cpu_per_core),
            "memory_rss_bytes": _series(u.memory_rss),
            "gpu_utilization": _series(u.gpu_utilization),
            "gpu_memory_used_bytes": _series(u.gpu_memory_used),
            "io_read_bytes_per_second": _series(u.io_read_rate),
            "io_write_bytes_per_second": _series(u.io_write_rate),
        }
    return out


def render(report: JobReport, pretty: bool = False) -> str:
    """Compact JSON by default (json's C encoder; indent=2 would keep it out, ~3x slower
    and ~2x larger); ``pretty`` indents it for people."""
    if pretty:
        return json.dumps(to_dict(report), indent=2) + "\n"
    return json.dumps(to_dict(report), separators=(",", ":")) + "\n"
