"""JSON renderer: a documented, stable schema (``SCHEMA_VERSION``; see the README).

Fields are only ever added within one schema version; units are bytes, seconds and
ratios in 0..1; times are ISO 8601 UTC; unknown values are ``null``. Series are at the
resolution the report was built with (``plot`` by default, ``full`` on request).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from webapp.model import (
    Audit,
    Coverage,
    Energy,
    JobReport,
    MemoryPeak,
    Series,
    SeriesCoverage,
    Waste,
)
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


def _waste(w: Waste | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {
        "billing_per_hour": w.billing_per_hour,
        "weights_source": w.weights_source,
        "core_hours_per_billing_unit": w.core_hours_per_billing_unit,
        "total_billing_units": w.total_billing_units(),
        "items": [
            {"resource": i.resource, "unit": i.unit, "requested": i.requested,
             "unused": i.unused, "billing_weight": i.billing_weight,
             "billing_units": i.billing_units, "core_hours": i.core_hours}
            for i in w.items
        ],
    }


def _kwh(joules: float | None) -> float | None:
    return None if joules is None else joules / 3.6e6


def _energy(e: Energy | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "kwh": _kwh(e.joules),
        "by_node": [{"node": node, "kwh": _kwh(j)} for node, j in e.by_node],
        "unused_kwh": _kwh(e.unused_joules),
        "unused_cores_kwh": _kwh(e.unused_cores_joules),
        "unused_gpus_kwh": _kwh(e.unused_gpus_joules),
        "co2e_grams": e.co2e_grams,
        "carbon_intensity_g_per_kwh": e.intensity_g_per_kwh,
        "carbon_intensity_source": e.intensity_source or None,
    }


def _cov(parts: tuple[SeriesCoverage, ...]) -> list[dict[str, Any]]:
    return [{"label": p.label, "samples": p.samples, "interval_seconds": p.interval_seconds,
             "covered_seconds": p.covered_seconds, "fraction": p.fraction,
             "gaps": [list(g) for g in p.gaps]} for p in parts]


def _coverage(report: JobReport, c: Coverage | None, a: Audit | None) -> dict[str, Any]:
    """Coverage and audit: samples per node and GPU, sources, thresholds, verdicts, PromQL."""
    queries = list(report.usage.queries) + (list(c.queries) if c else [])
    return {
        "nodes": _cov(c.nodes) if c else [],
        "gpus": _cov(c.gpus) if c else [],
        "sources": [{"source": s, "status": r} for s, r in a.sources] if a else [],
        "rules_version": a.rules_version if a else None,
        "min_coverage": a.min_coverage if a else None,
        "thresholds": [{"name": n, "value": v, "overridden": o}
                       for n, v, o in a.thresholds] if a else [],
        "verdicts": [{"detector": v.detector, "rests_on": v.rests_on,
                      "withheld": v.withheld, "why": v.why} for v in a.verdicts] if a else [],
        "queries": [{"name": n, "promql": q} for n, q in queries],
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
            # cgroup v2 only; null on v1, where the cause of idle cores cannot be told
            "cpu_pressure_seconds": u.cpu_pressure_seconds,
            "io_pressure_seconds": u.io_pressure_seconds,
            "memory_pressure_seconds": u.memory_pressure_seconds,
            "memory_high_events": u.memory_high_events,
            # joules the exporter split to the job; null: no energy source on its nodes
            "energy_joules": u.energy_joules,
            "energy_gpu_joules": u.energy_gpu_joules,
            "energy_other_joules": u.energy_other_joules,
            "energy_by_node": [[node, j] for node, j in u.energy_by_node],
            "gpu_energy": [[label, j] for label, j in u.gpu_energy],
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
        "step_lines": [
            {
                "step_id": x.step_id,
                "kind": x.kind,
                "name": x.name,
                "state": x.state,
                "exit_code": x.exit_code,
                "elapsed_seconds": x.elapsed_seconds,
                "cpus": x.cpus,
                "cpu_seconds": x.cpu_seconds,
                "cpu_efficiency": x.cpu_efficiency,
                "memory_peak_bytes": x.memory_peak_bytes,
                "tasks": x.tasks,
            }
            for x in report.step_lines
        ],
        "billing": report.billing,
        "waste": _waste(report.waste),
        "energy": _energy(report.energy),
        "coverage": _coverage(report, report.coverage, report.audit),
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
    z = report.sizing
    out["sizing"] = None if z is None else {
        "options": [[option, value] for option, value in z.options],
        "lines": z.lines(),
        "based_on": z.based_on,
        "basis": z.basis,
        "saved": list(z.saved),
    }
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
