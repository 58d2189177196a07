"""The queue context as every renderer shows it: label/value rows (text, HTML, PDF,
email) and the JSON ``queue`` object. Values are plain and not escaped: each renderer
makes them one line and inert (formatting.visible, through each renderer)."""

from __future__ import annotations

from typing import Any

from webapp.formatting import format_duration
from webapp.model import JobReport, QueueContext


def _types(pairs: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{t} {n}" for t, n in pairs) or "none"


def queue_rows(report: JobReport) -> list[tuple[str, str]]:
    """(label, value) rows of the "Queue" section; [] when there is no queue context."""
    q = report.queue
    if q is None:
        return []
    so_far = " so far" if report.start_time is None else ""
    rows = [("Waited", f"{format_duration(q.pending_seconds)} from submit to start{so_far}")]
    if q.seen:
        reasons = ", ".join(f"{r.reason} ({format_duration(r.seconds)})" for r in q.reasons)
        rows.append(("Pending reasons", reasons or "none seen (the wait was shorter than a poll "
                                                   "of the cluster exporter)"))
        rows.append(("At submit", _partition(q)))
        if q.gpus_available_max:
            rows.append(("GPUs free (wait)", f"at most {_types(q.gpus_available_max)}"))
    if q.requested_gpu_types:
        rows.append(("GPU type asked", ", ".join(q.requested_gpu_types)))
    if q.usual_time_limit_seconds is not None:
        rows.append(("Usual time limit", f"{format_duration(q.usual_time_limit_seconds)} "
                     f"(median of the partition's {q.usual_time_limit_jobs} jobs, last 30 days)"))
    return rows


def _partition(q: QueueContext) -> str:
    cpus = "CPUs unknown" if q.cpus_total is None else f"{q.cpus_idle} of {q.cpus_total} CPUs idle"
    pending = "queue unknown" if q.queue_length is None else f"{q.queue_length} jobs pending"
    gpus = f"; GPUs available: {_types(q.gpus_available)}" if q.gpus_available else ""
    return f"{q.partition or 'unknown'}: {cpus}{gpus}; {pending}"


def queue_dict(q: QueueContext | None) -> dict[str, Any] | None:
    """The JSON ``queue`` object (null without a queue context)."""
    if q is None:
        return None
    return {
        "partition": q.partition,
        "pending_seconds": q.pending_seconds,
        "seen": q.seen,
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
