"""The queue context as every renderer shows it: label/value rows (text, HTML, PDF,
email) and the JSON ``queue`` object. Values are plain and not escaped: each renderer
makes them one line and inert (formatting.visible, through each renderer)."""

from __future__ import annotations

from webapp.formatting import format_duration
from webapp.model import JobReport, QueueContext
from webapp.schema import queue_dict

__all__ = ["queue_dict", "queue_rows"]


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
