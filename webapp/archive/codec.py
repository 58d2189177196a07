"""Archive records <-> reports: series downsampled to a few hundred points, and a
``JobReport`` rebuilt from a stored summary (the JSON renderer's fields) and series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from webapp.archive import sections
from webapp.model import (
    ArraySummary,
    ArrayTask,
    CpuSource,
    Finding,
    Gap,
    JobReport,
    MemoryPeak,
    PeakSource,
    Series,
    Severity,
    SizingSuggestion,
    Step,
    TimeLimitKind,
    Usage,
)

MAX_POINTS = 300
# summary["series"] key -> Usage field (the JSON renderer's names)
SERIES_FIELDS: dict[str, str] = {
    "cpu_cores": "cpu_cores",
    "cpu_per_core": "cpu_per_core",
    "memory_rss_bytes": "memory_rss",
    "gpu_utilization": "gpu_utilization",
    "gpu_memory_used_bytes": "gpu_memory_used",
    "io_read_bytes_per_second": "io_read_rate",
    "io_write_bytes_per_second": "io_write_rate",
}


def bucket_seconds(start: float, end: float, step: float, max_points: int = MAX_POINTS) -> float:
    """Width of the buckets that keep a series of ``step`` spacing under ``max_points``:
    a whole number of steps, so the stated resolution is the one plotted."""
    if step <= 0 or end <= start:
        return float(step)
    return float(step * max(1, math.ceil((end - start) / (max_points * step))))


def downsample(points: list[list[float]] | tuple, width: float) -> list[list[float]]:
    """Mean of each ``width``-second bucket, stamped at the bucket's first sample.

    Means keep a series' average (what efficiency findings read); peaks are kept in the
    summary's own fields (memory_peak_bytes), not in the plotted points.
    """
    out: list[list[float]] = []
    bucket: list[float] = []
    t0 = None
    for t, v in points:
        if t0 is None or t - t0 >= width:
            if bucket:
                out.append([t0, sum(bucket) / len(bucket)])
            t0, bucket = t, []
        bucket.append(v)
    if bucket:
        out.append([t0, sum(bucket) / len(bucket)])
    return out


def series_step(series: Mapping[str, list[dict[str, Any]]]) -> float:
    """The smallest spacing between two samples of any series (the source's step)."""
    gaps = [
        b[0] - a[0]
        for items in series.values()
        for s in items
        for a, b in zip(s["points"], s["points"][1:], strict=False)
        if b[0] > a[0]
    ]
    return min(gaps) if gaps else 0.0


def downsample_all(
    series: Mapping[str, list[dict[str, Any]]], max_points: int = MAX_POINTS
) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """Every series at one resolution (seconds) keeping each under ``max_points``."""
    times = [p[0] for items in series.values() for s in items for p in s["points"]]
    if not times:
        return {k: list(v) for k, v in series.items()}, 0.0
    width = bucket_seconds(min(times), max(times), series_step(series), max_points)
    out = {
        key: [{"label": s["label"], "points": downsample(s["points"], width)} for s in items]
        for key, items in series.items()
    }
    return out, width


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _series(items: list[dict[str, Any]]) -> tuple[Series, ...]:
    return tuple(Series(s["label"], tuple((float(t), float(v)) for t, v in s["points"]))
                 for s in items)


def _enum(kind: Any, value: str | None) -> Any:
    try:
        return kind(value) if value else None
    except ValueError:
        return None


def _peak(summary: Mapping[str, Any]) -> MemoryPeak | None:
    """The archived peak; summaries written before ``memory_peak`` only kept the bytes."""
    p = summary.get("memory_peak")
    if p:
        return MemoryPeak(p["bytes"], PeakSource(p["source"]), p.get("node"), p.get("step_id"),
                          p.get("per_task_bytes"), p.get("tasks"))
    old = summary.get("memory_peak_bytes")
    return MemoryPeak(old, PeakSource.SACCT) if old is not None else None


def report_from_record(summary: Mapping[str, Any], series: Mapping[str, Any],
                       note: Gap | None = None) -> JobReport:
    """The report an archived summary and its series describe; ``note`` is added to gaps."""
    u = summary.get("usage") or {}
    usage = Usage(
        **{field: _series(series.get(key, [])) for key, field in SERIES_FIELDS.items()},
        **{k: u.get(k) for k in (
            "memory_limit_bytes", "memory_max_usage_bytes", "gpu_memory_total_bytes",
            "read_bytes", "write_bytes", "read_syscalls", "write_syscalls", "processes_max",
            "threads_max", "open_files_max", "open_files_limit_ratio_max", "scratch_in_use",
            "cpu_pressure_seconds", "io_pressure_seconds", "memory_pressure_seconds",
            "memory_high_events", "energy_joules", "energy_gpu_joules",
            "energy_other_joules")},
        energy_by_node=tuple((str(n), float(j)) for n, j in u.get("energy_by_node") or ()),
        gpu_energy=tuple((str(n), float(j)) for n, j in u.get("gpu_energy") or ()),
    )
    steps = tuple(
        Step(step_id=s["step_id"], name=s["name"], state=s["state"], exit_code=s["exit_code"],
             elapsed_seconds=s["elapsed_seconds"], total_cpu_seconds=s["cpu_seconds"],
             max_rss_bytes=s["max_rss_bytes"], cpus=s["cpus"], tasks=s.get("tasks"),
             max_rss_node=s.get("max_rss_node"))
        for s in summary.get("steps") or ()
    )
    findings = tuple(
        Finding(f["name"], Severity(f["severity"]), f["message"], f["advice"],
                dict(f.get("evidence") or {}), f.get("evidence_text"))
        for f in summary.get("findings") or ()
    )
    gaps = [Gap(g["source"], g["reason"]) for g in summary.get("gaps") or ()
            if g["source"] != "prometheus"]  # the live gap said "no metrics": not so here
    if note:
        gaps.insert(0, note)
    a = summary.get("array")
    array = None
    if a:
        array = ArraySummary(
            # the summary keeps the count, not each task: placeholders keep len() right
            tasks=tuple(ArrayTask(t["job_id"], t["state"], t["elapsed_seconds"],
                                  t["cpu_efficiency"], t["memory_peak_bytes"])
                        for t in a["task_list"]) if "task_list" in a else
            tuple(ArrayTask(f"task {i + 1}", "", None, None, None)
                  for i in range(int(a["tasks"]))),
            elapsed_p50=a["elapsed_seconds_p50"], elapsed_p95=a["elapsed_seconds_p95"],
            memory_peak_p50=a["memory_peak_bytes_p50"], memory_peak_p95=a["memory_peak_bytes_p95"],
            cpu_efficiency_p50=a["cpu_efficiency_p50"], cpu_efficiency_p95=a["cpu_efficiency_p95"],
            outliers=tuple(a["outliers"]), suggested_mem=a["suggested_mem"],
            suggested_time=a["suggested_time"],
        )
    coverage, audit = sections.coverage(summary)
    return JobReport(
        job_id=summary["job_id"], cluster=summary["cluster"], user=summary.get("user"),
        uid=summary.get("uid"), account=summary.get("account"),
        job_name=summary.get("job_name"), partition=summary.get("partition"),
        nodes=tuple(summary.get("nodes") or ()), work_dir=summary.get("work_dir"),
        cpus=summary.get("cpus"), memory_requested_bytes=summary.get("memory_requested_bytes"),
        gpus=summary.get("gpus") or 0, time_limit_seconds=summary.get("time_limit_seconds"),
        state=summary.get("state"), exit_code=summary.get("exit_code"),
        submit_time=_time(summary.get("submit_time")), start_time=_time(summary.get("start_time")),
        end_time=_time(summary.get("end_time")), elapsed_seconds=summary.get("elapsed_seconds"),
        cpu_seconds=summary.get("cpu_seconds"),
        time_limit_kind=_enum(TimeLimitKind, summary.get("time_limit_kind")),
        figures_from=summary.get("figures_from"),
        cpu_source=_enum(CpuSource, summary.get("cpu_seconds_source")),
        memory_peak=_peak(summary), usage=usage, steps=steps,
        array=array, gaps=tuple(gaps), findings=findings, sizing=_sizing(summary.get("sizing")),
        billing=summary.get("billing"), step_lines=sections.step_lines(summary),
        waste=sections.waste(summary), coverage=coverage, audit=audit,
    )


def _sizing(z: Mapping[str, Any] | None) -> SizingSuggestion | None:
    """The archived ``#SBATCH`` block (summaries from before it have none)."""
    if not z:
        return None
    return SizingSuggestion(tuple((o, v) for o, v in z["options"]), int(z["based_on"]),
                            tuple(z.get("saved") or ()), z.get("basis") or "")
