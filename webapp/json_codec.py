"""The report's JSON shape, both ways: ``encode`` is what the JSON renderer writes and the
archive stores, ``decode`` the report an archived summary describes.

One table per section names each field once, for both directions, so a field cannot be
written without being read back (``tests/test_json_codec.py`` round-trips every section).
Fields marked derived are computed from others (efficiencies, the per-node request, the
array's state counts): written for readers of the JSON, recomputed on the way back.
What the JSON deliberately leaves out: a gap's technical detail (logs and staff only),
the series' step (the notes say it), and which PromQL was the usage's and which the
coverage's (one ``queries`` list, decoded as the usage's: every renderer shows both).

The schema's promises (``SCHEMA_VERSION``; see the README): fields are only ever added
within one version; units are bytes, seconds and ratios in 0..1; times are ISO 8601 UTC;
unknown values are ``null``. Summaries archived before a field existed decode without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from webapp.formatting import JOULES_PER_KWH
from webapp.model import (
    ArraySummary,
    ArrayTask,
    Audit,
    Coverage,
    CpuSource,
    Energy,
    Finding,
    Gap,
    GpuDevice,
    GpuFault,
    JobReport,
    MemoryPeak,
    NodeEvent,
    NodeMemory,
    PeakSource,
    PendingReason,
    QueueContext,
    Replay,
    Series,
    SeriesCoverage,
    Severity,
    SizingSuggestion,
    Step,
    StepLine,
    TimeLimitKind,
    Usage,
    Verdict,
    Waste,
    WasteItem,
)

SCHEMA_VERSION = 1
Json = dict[str, Any]

# -- codecs of single values: (encode, decode) ----------------------------------------------
Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]


def _same(v: Any) -> Any:
    return v


PLAIN: Codec = (_same, _same)
LIST: Codec = (list, lambda v: tuple(v or ()))
TIME: Codec = (lambda v: v.isoformat() if v else None,
               lambda t: datetime.fromisoformat(t) if t else None)


def _enum(kind: type) -> Codec:
    def decode(text: str | None) -> Any:
        try:
            return kind(text) if text else None
        except ValueError:  # a value a later version added
            return None
    return (lambda v: str(v) if v else None, decode)


# -- the top level: (JSON key, JobReport attribute or None when derived, codec) -----------
# In the order the JSON is written; sections with their own functions are named by key.
SECTION = "section"
REPORT: tuple[tuple[str, str | None, Codec | str], ...] = (
    ("job_id", "job_id", PLAIN),
    ("cluster", "cluster", PLAIN),
    ("user", "user", PLAIN),
    ("uid", "uid", PLAIN),
    ("account", "account", PLAIN),
    ("job_name", "job_name", PLAIN),
    ("partition", "partition", PLAIN),
    ("qos", "qos", PLAIN),  # absent from summaries archived before it: null
    ("nodes", "nodes", LIST),
    ("work_dir", "work_dir", PLAIN),
    ("state", "state", PLAIN),
    ("exit_code", "exit_code", PLAIN),
    ("submit_time", "submit_time", TIME),
    ("start_time", "start_time", TIME),
    ("end_time", "end_time", TIME),
    ("elapsed_seconds", "elapsed_seconds", PLAIN),
    ("time_limit_seconds", "time_limit_seconds", PLAIN),
    ("time_limit_kind", "time_limit_kind", _enum(TimeLimitKind)),
    ("figures_from", "figures_from", PLAIN),
    ("cpus", "cpus", PLAIN),
    ("cpu_seconds", "cpu_seconds", PLAIN),
    ("cpu_seconds_source", "cpu_source", _enum(CpuSource)),
    ("cpu_efficiency", None, PLAIN),
    ("memory_peak_bytes", None, PLAIN),
    ("memory_peak", "memory_peak", SECTION),
    ("memory_nodes", "memory_nodes", SECTION),
    ("memory_requested_bytes", "memory_requested_bytes", PLAIN),
    ("memory_requested_per_node_bytes", None, PLAIN),
    ("memory_efficiency", None, PLAIN),
    ("gpus", "gpus", PLAIN),
    ("gpu_memory_peak_bytes", None, PLAIN),
    ("usage", "usage", SECTION),
    ("steps", "steps", SECTION),
    ("step_lines", "step_lines", SECTION),
    ("billing", "billing", PLAIN),
    ("waste", "waste", SECTION),
    ("energy", "energy", SECTION),
    ("coverage", "coverage", SECTION),  # and ``audit``
    ("findings", "findings", SECTION),
    ("node_events", "node_events", SECTION),
    ("gaps", "gaps", SECTION),
    ("notes", "notes", LIST),
    ("array", "array", SECTION),
    ("queue", "queue", SECTION),
    ("sizing", "sizing", SECTION),
)
# Report fields the JSON does not carry (an archived report is rebuilt without them): the
# exporter's id for the series, a het job's components, the uid that cancelled (the
# finding's sentence keeps it) and the array's id (the job id shows it).
LEFT_OUT = frozenset({"metrics_id", "metrics_ids", "components", "cancelled_by",
                      "array_job"})
DERIVED = {"cpu_efficiency": "cpu_efficiency", "memory_peak_bytes": "memory_peak_bytes",
           "memory_requested_per_node_bytes": "memory_requested_per_node",
           "memory_efficiency": "memory_efficiency",
           "gpu_memory_peak_bytes": "gpu_memory_peak_bytes"}
# summary "series" key -> Usage field
SERIES: tuple[tuple[str, str], ...] = (
    ("cpu_cores", "cpu_cores"),
    ("cpu_per_core", "cpu_per_core"),
    ("memory_rss_bytes", "memory_rss"),
    ("memory_shmem_bytes", "memory_shmem"),
    ("memory_cache_bytes", "memory_cache"),
    ("gpu_utilization", "gpu_utilization"),
    ("gpu_memory_used_bytes", "gpu_memory_used"),
    ("io_read_bytes_per_second", "io_read_rate"),
    ("io_write_bytes_per_second", "io_write_rate"),
)
USAGE = ("memory_limit_bytes", "memory_max_usage_bytes", "gpu_memory_total_bytes",
         "read_bytes", "write_bytes", "read_syscalls", "write_syscalls", "processes_max",
         "threads_max", "open_files_max", "open_files_limit_ratio_max", "scratch_in_use",
         # cgroup v2 only; null on v1, where the cause of idle cores cannot be told
         "cpu_pressure_seconds", "io_pressure_seconds", "memory_pressure_seconds",
         "memory_high_events",
         # per-thread waits and busy threads (v1 and v2); null from an exporter without them
         "cpu_wait_seconds", "io_wait_seconds", "busy_tasks_max",
         # joules the exporter split to the job; null: no energy source on its nodes
         "energy_joules", "energy_gpu_joules", "energy_other_joules",
         # null: the GPU figures are series; else their source (Slurm's TRES), no series
         "gpu_figures_from")
# Usage fields of (label, value) pairs: joules per node and per GPU (``node/gpu``), each
# node's memory limit
USAGE_PAIRS = ("energy_by_node", "gpu_energy", "memory_limit_by_node")
# JSON key -> Step field (sacct's TotalCPU is the JSON's cpu_seconds), codec
STEP: tuple[tuple[str, str, Codec], ...] = (
    ("step_id", "step_id", PLAIN), ("name", "name", PLAIN), ("state", "state", PLAIN),
    ("exit_code", "exit_code", PLAIN), ("elapsed_seconds", "elapsed_seconds", PLAIN),
    ("cpu_seconds", "total_cpu_seconds", PLAIN), ("max_rss_bytes", "max_rss_bytes", PLAIN),
    ("max_rss_node", "max_rss_node", PLAIN), ("tasks", "tasks", PLAIN), ("cpus", "cpus", PLAIN),
    # the step's nodes: its tasks per node, which its peak is MaxRSS times
    ("nodes", "nodes", LIST))
ARRAY = (("elapsed_seconds_p50", "elapsed_p50"), ("elapsed_seconds_p95", "elapsed_p95"),
         ("memory_peak_bytes_p50", "memory_peak_p50"),
         ("memory_peak_bytes_p95", "memory_peak_p95"),
         ("cpu_efficiency_p50", "cpu_efficiency_p50"),
         ("cpu_efficiency_p95", "cpu_efficiency_p95"))


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


# -- sections, each as an encode/decode pair -------------------------------------------------
def _series(series: tuple[Series, ...]) -> list[Json]:
    return [{"label": s.label, "points": [[t, v] for t, v in s.points]} for s in series]


def _series_back(items: list[Json]) -> tuple[Series, ...]:
    return tuple(Series(s["label"], tuple((float(t), float(v)) for t, v in s["points"]))
                 for s in items)


def _peak(peak: MemoryPeak | None) -> Json | None:
    if peak is None:
        return None
    return {"bytes": peak.bytes, "source": str(peak.source), "estimate": peak.estimate,
            "node": peak.node, "step_id": peak.step_id, "per_task_bytes": peak.per_task_bytes,
            "tasks": peak.tasks}


def _peak_back(summary: Mapping[str, Any]) -> MemoryPeak | None:
    """Summaries written before ``memory_peak`` only kept the bytes."""
    p = summary.get("memory_peak")
    if p:
        return MemoryPeak(p["bytes"], PeakSource(p["source"]), p.get("node"), p.get("step_id"),
                          p.get("per_task_bytes"), p.get("tasks"))
    old = summary.get("memory_peak_bytes")
    return MemoryPeak(old, PeakSource.SACCT) if old is not None else None


def _waste(w: Waste | None) -> Json | None:
    if w is None:
        return None
    return {"billing_per_hour": w.billing_per_hour, "weights_source": w.weights_source,
            "core_hours_per_billing_unit": w.core_hours_per_billing_unit,
            "total_billing_units": w.total_billing_units(),
            "items": [{k: getattr(i, k) for k in _names(WasteItem)} for i in w.items]}


def _waste_back(w: Json | None) -> Waste | None:
    if not w:
        return None
    return Waste(tuple(WasteItem(**{k: i[k] for k in _names(WasteItem)}) for i in w["items"]),
                 w["billing_per_hour"], w["weights_source"], w.get("core_hours_per_billing_unit"))


def _kwh(joules: float | None) -> float | None:
    return None if joules is None else joules / JOULES_PER_KWH


def _energy(e: Energy | None) -> Json | None:
    """Joules (read back) and kWh (derived, for readers) of the job and its unused part."""
    if e is None:
        return None
    return {"joules": e.joules, "kwh": _kwh(e.joules),
            "by_node": [{"node": n, "joules": j, "kwh": _kwh(j)} for n, j in e.by_node],
            "unused_cores_joules": e.unused_cores_joules,
            "unused_gpus_joules": e.unused_gpus_joules, "unused_kwh": _kwh(e.unused_joules),
            "co2e_grams": e.co2e_grams, "carbon_intensity_g_per_kwh": e.intensity_g_per_kwh,
            "carbon_intensity_source": e.intensity_source}


def _energy_back(e: Json | None) -> Energy | None:
    if not e:
        return None
    return Energy(e["joules"], tuple((n["node"], n["joules"]) for n in e["by_node"]),
                  e["unused_cores_joules"], e["unused_gpus_joules"],
                  e["carbon_intensity_g_per_kwh"], e["carbon_intensity_source"],
                  e["co2e_grams"])


def _pairs(value: tuple[tuple[str, float], ...]) -> list[list[Any]]:
    return [[label, joules] for label, joules in value]


def _pairs_back(value: list[list[Any]] | None) -> tuple[tuple[str, float], ...]:
    return tuple((str(label), float(joules)) for label, joules in value or ())


def _cov(parts: tuple[SeriesCoverage, ...]) -> list[Json]:
    return [{"label": p.label, "samples": p.samples, "interval_seconds": p.interval_seconds,
             "covered_seconds": p.covered_seconds, "fraction": p.fraction,
             "gaps": [list(g) for g in p.gaps]} for p in parts]


def _cov_back(parts: list[Json]) -> tuple[SeriesCoverage, ...]:
    return tuple(SeriesCoverage(p["label"], p["samples"], p["interval_seconds"],
                                p["covered_seconds"], p["fraction"],
                                tuple(tuple(g) for g in p["gaps"])) for p in parts)


def _coverage(report: JobReport) -> Json:
    """Coverage and audit: samples per node and GPU, sources, thresholds, verdicts, PromQL."""
    c, a = report.coverage, report.audit
    queries = list(report.usage.queries) + (list(c.queries) if c else [])
    return {
        "nodes": _cov(c.nodes) if c else [],
        "gpus": _cov(c.gpus) if c else [],
        "sources": [{"source": s, "status": r} for s, r in a.sources] if a else [],
        "rules_version": a.rules_version if a else None,
        "policy_version": a.policy_version if a else None,
        "min_coverage": a.min_coverage if a else None,
        "thresholds": [{"name": n, "value": v, "overridden": o}
                       for n, v, o in a.thresholds] if a else [],
        "verdicts": [{"detector": v.detector, "rests_on": v.rests_on,
                      "withheld": v.withheld, "why": v.why} for v in a.verdicts] if a else [],
        "queries": [{"name": n, "promql": q} for n, q in queries],
        # derived from usage.replayed: readings replayed, not measured (test, demo stacks)
        "replay_note": report.usage.replay_note,
    }


def _coverage_back(c: Json | None) -> tuple[Coverage | None, Audit | None]:
    """Coverage (its queries go back with the usage's: the JSON keeps one list) and audit."""
    if not c:
        return None, None
    cov = Coverage(_cov_back(c["nodes"]), _cov_back(c["gpus"]))
    audit = None
    if c.get("rules_version"):
        audit = Audit(
            sources=tuple((s["source"], s["status"]) for s in c["sources"]),
            thresholds=tuple((t["name"], t["value"], t["overridden"]) for t in c["thresholds"]),
            rules_version=c["rules_version"], min_coverage=c["min_coverage"],
            verdicts=tuple(Verdict(v["detector"], v["rests_on"], v["withheld"], v["why"])
                           for v in c["verdicts"]),
            policy_version=c.get("policy_version"))
    return (cov if cov.nodes or cov.gpus else None), audit


def _findings(findings: tuple[Finding, ...]) -> list[Json]:
    return [{"name": f.name, "severity": f.severity.value, "message": f.message,
             "advice": f.advice, "evidence": dict(f.evidence), "evidence_text": f.evidence_text}
            for f in findings]


def _findings_back(items: list[Json] | None) -> tuple[Finding, ...]:
    return tuple(Finding(f["name"], Severity(f["severity"]), f["message"], f["advice"],
                         dict(f.get("evidence") or {}), f.get("evidence_text"))
                 for f in items or ())


def _array(a: ArraySummary | None) -> Json | None:
    if a is None:
        return None
    return {
        "tasks": len(a.tasks),
        **{k: getattr(a, attr) for k, attr in ARRAY},
        "outliers": list(a.outliers),
        "suggested_mem": a.suggested_mem,
        "suggested_time": a.suggested_time,
        "states": a.state_counts(),
        "task_list": [{k: getattr(t, k) for k in _names(ArrayTask)} for t in a.tasks],
    }


def _array_back(a: Json | None) -> ArraySummary | None:
    if not a:
        return None
    if "task_list" in a:
        tasks = tuple(ArrayTask(**{k: t[k] for k in _names(ArrayTask)}) for t in a["task_list"])
    else:  # older summaries kept the count: placeholders keep len() right
        tasks = tuple(ArrayTask(f"task {i + 1}", "", None, None, None)
                      for i in range(int(a["tasks"])))
    return ArraySummary(tasks=tasks, **{attr: a[k] for k, attr in ARRAY},
                        outliers=tuple(a["outliers"]), suggested_mem=a["suggested_mem"],
                        suggested_time=a["suggested_time"])


def queue_dict(q: QueueContext | None) -> Json | None:
    """The JSON ``queue`` object (null without a queue context)."""
    if q is None:
        return None
    return {
        "partition": q.partition,
        "pending_seconds": q.pending_seconds,
        "seen": q.seen,
        "long_wait": q.long_wait,
        "reasons": [{"reason": r.reason, "seconds": r.seconds,
                     "first_seen": r.first_seen.isoformat()} for r in q.reasons],
        "at_submit": {
            "cpus_idle": q.cpus_idle,
            "cpus_total": q.cpus_total,
            "gpus_available": dict(q.gpus_available),
            "pending_jobs": q.queue_length,
        },
        "gpus_available_max": dict(q.gpus_available_max),
        "requested_gpu_types": list(q.requested_gpu_types),
        "usual_time_limit_seconds": q.usual_time_limit_seconds,
        "usual_time_limit_jobs": q.usual_time_limit_jobs,
    }


def _queue_back(q: Json | None) -> QueueContext | None:
    if not q:
        return None
    at = q.get("at_submit") or {}
    return QueueContext(
        partition=q["partition"], pending_seconds=q["pending_seconds"],
        reasons=tuple(PendingReason(r["reason"], r["seconds"],
                                    datetime.fromisoformat(r["first_seen"]))
                      for r in q["reasons"]),
        cpus_idle=at.get("cpus_idle"), cpus_total=at.get("cpus_total"),
        gpus_available=tuple((at.get("gpus_available") or {}).items()),
        queue_length=at.get("pending_jobs"),
        gpus_available_max=tuple(q["gpus_available_max"].items()),
        requested_gpu_types=tuple(q["requested_gpu_types"]),
        usual_time_limit_seconds=q["usual_time_limit_seconds"],
        usual_time_limit_jobs=q["usual_time_limit_jobs"], seen=q["seen"],
        long_wait=bool(q.get("long_wait")))


def _sizing(z: SizingSuggestion | None) -> Json | None:
    if z is None:
        return None
    return {"options": [[option, value] for option, value in z.options], "lines": z.lines(),
            "based_on": z.based_on, "basis": z.basis, "saved": list(z.saved)}


def _sizing_back(z: Json | None) -> SizingSuggestion | None:
    """The archived ``#SBATCH`` block (summaries from before it have none)."""
    if not z:
        return None
    return SizingSuggestion(tuple((o, v) for o, v in z["options"]), int(z["based_on"]),
                            tuple(z.get("saved") or ()), z.get("basis") or "")


# Section key -> (encode from the report, decode from the whole summary).
SECTIONS: dict[str, tuple[Callable[[JobReport], Any], Callable[[Mapping[str, Any]], Any]]] = {
    "memory_peak": (lambda r: _peak(r.memory_peak), _peak_back),
    "memory_nodes": (lambda r: [{k: getattr(x, k) for k in _names(NodeMemory)}
                                for x in r.memory_nodes],
                     lambda s: tuple(NodeMemory(**x) for x in s.get("memory_nodes") or ())),
    "usage": (lambda r: {**{k: getattr(r.usage, k) for k in USAGE},
                         **{k: _pairs(getattr(r.usage, k)) for k in USAGE_PAIRS},
                         "gpu_faults": [{k: getattr(f, k) for k in _names(GpuFault)}
                                        for f in r.usage.gpu_faults],
                         "gpu_devices": [{k: getattr(d, k) for k in _names(GpuDevice)}
                                         for d in r.usage.gpu_devices],
                         "counter_resets": list(r.usage.counter_resets),
                         "replayed": [{k: getattr(x, k) for k in _names(Replay)}
                                      for x in r.usage.replayed]},
              lambda s: None),
    # its nodes down or drained during the run (slurmdbd's node events)
    "node_events": (lambda r: [{"node": e.node, "start": TIME[0](e.start),
                                "end": TIME[0](e.end), "state": e.state, "reason": e.reason}
                               for e in r.node_events],
                    lambda s: tuple(NodeEvent(e["node"], TIME[1](e["start"]), TIME[1](e["end"]),
                                              e["state"], e["reason"])
                                    for e in s.get("node_events") or ())),
    "steps": (lambda r: [{k: c[0](getattr(x, attr)) for k, attr, c in STEP} for x in r.steps],
              lambda s: tuple(Step(**{attr: c[1](x.get(k)) for k, attr, c in STEP})
                              for x in s.get("steps") or ())),
    "step_lines": (lambda r: [{k: getattr(x, k) for k in _names(StepLine)}
                              for x in r.step_lines],
                   lambda s: tuple(StepLine(**x) for x in s.get("step_lines") or ())),
    "waste": (lambda r: _waste(r.waste), lambda s: _waste_back(s.get("waste"))),
    "energy": (lambda r: _energy(r.energy), lambda s: _energy_back(s.get("energy"))),
    "coverage": (_coverage, lambda s: None),
    "findings": (lambda r: _findings(r.findings), lambda s: _findings_back(s.get("findings"))),
    # A gap's technical detail is logged and shown to staff on the web page, never here.
    "gaps": (lambda r: [{"source": g.source, "reason": g.reason} for g in r.gaps],
             lambda s: tuple(Gap(g["source"], g["reason"]) for g in s.get("gaps") or ())),
    "array": (lambda r: _array(r.array), lambda s: _array_back(s.get("array"))),
    "queue": (lambda r: queue_dict(r.queue), lambda s: _queue_back(s.get("queue"))),
    "sizing": (lambda r: _sizing(r.sizing), lambda s: _sizing_back(s.get("sizing"))),
}


def encode(report: JobReport, include_series: bool = True) -> Json:
    """The report as plain data: the JSON renderer's output and the archive's summary."""
    out: Json = {"schema_version": SCHEMA_VERSION}
    for key, attr, codec in REPORT:
        if attr is None:
            out[key] = getattr(report, DERIVED[key])
        elif isinstance(codec, str):  # SECTION
            out[key] = SECTIONS[key][0](report)
        else:
            out[key] = codec[0](getattr(report, attr))
    if include_series:
        out["series"] = {key: _series(getattr(report.usage, attr)) for key, attr in SERIES}
    return out


def decode(summary: Mapping[str, Any], series: Mapping[str, Any] | None = None) -> JobReport:
    """The report ``encode`` wrote (``series``: the summary's own when None)."""
    series = summary.get("series") or {} if series is None else series
    u = summary.get("usage") or {}
    queries = tuple((q["name"], q["promql"])
                    for q in (summary.get("coverage") or {}).get("queries") or ())
    usage_values: dict[str, Any] = {attr: _series_back(series.get(key, [])) for key, attr in SERIES}
    usage_values |= {k: u.get(k) for k in USAGE}
    usage_values |= {k: _pairs_back(u.get(k)) for k in USAGE_PAIRS}
    usage = Usage(**usage_values, queries=queries,
                  gpu_faults=tuple(GpuFault(**f) for f in u.get("gpu_faults") or ()),
                  gpu_devices=tuple(GpuDevice(**d) for d in u.get("gpu_devices") or ()),
                  counter_resets=tuple(u.get("counter_resets") or ()),
                  replayed=tuple(Replay(**x) for x in u.get("replayed") or ()))
    values: dict[str, Any] = {"usage": usage}
    for key, attr, codec in REPORT:
        if attr is None or key == "usage":
            continue
        if isinstance(codec, str):  # SECTION
            values[attr] = SECTIONS[key][1](summary)
        else:
            values[attr] = codec[1](summary.get(key))
    values["coverage"], values["audit"] = _coverage_back(summary.get("coverage"))
    values["gpus"] = values["gpus"] or 0
    return JobReport(**values)
