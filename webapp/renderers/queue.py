"""The queue context as every renderer shows it: label/value rows (text, HTML, PDF,
email) and the JSON ``queue`` object. Values are plain and not escaped: each renderer
makes them one line and inert (formatting.visible, through each renderer)."""

from __future__ import annotations

from webapp.formatting import format_duration
from webapp.json_codec import queue_dict
from webapp.model import JobReport, QueueContext

__all__ = ["queue_dict", "queue_rows"]


def _gpus(pairs: tuple[tuple[str, int], ...]) -> str:
    """'2 GPUs', '1 A30 GPU and 3 v100 GPUs': the exporter's 'untyped' is left unsaid."""
    parts = [f"{n} {'' if t == 'untyped' else t + ' '}GPU{'' if n == 1 else 's'}"
             for t, n in pairs]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def queue_rows(report: JobReport) -> list[tuple[str, str]]:
    """(label, value) rows of the "Queue" section; [] when there is no queue context.
    A value that was not recorded is left out, its row with it."""
    q = report.queue
    if q is None:
        return []
    so_far = " so far" if report.start_time is None else ""
    rows = [("Waited", f"{format_duration(q.pending_seconds)} from submit to start{so_far}")]
    if q.seen:
        if q.reasons:
            rows.append(("Pending reasons", ", ".join(
                f"{r.reason} ({format_duration(r.seconds)})" for r in q.reasons)))
        at_submit = _partition(q)
        if at_submit:
            rows.append(("When submitted", at_submit))
        if q.gpus_available_max:
            rows.append(("GPUs free", f"at most {_gpus(q.gpus_available_max)} while it waited"))
    elif q.long_wait:
        rows.append(("Scheduler state", NOT_RECORDED))
    if q.requested_gpu_types:
        rows.append(("GPU type asked", ", ".join(q.requested_gpu_types)))
    if q.usual_time_limit_seconds is not None:
        rows.append(("Usual time limit", f"{format_duration(q.usual_time_limit_seconds)} "
                     f"(median of the partition's {q.usual_time_limit_jobs} jobs, last 30 days)"))
    return rows


NOT_RECORDED = "not recorded while the job waited, so why it waited is not known"


def _partition(q: QueueContext) -> str:
    """'debug: 0 of 2 CPUs idle, 1 GPU free, 21 jobs waiting': the known parts only."""
    parts = []
    if q.cpus_total is not None and q.cpus_idle is not None:
        parts.append(f"{q.cpus_idle} of {q.cpus_total} CPUs idle")
    elif q.cpus_idle is not None:
        parts.append(f"{q.cpus_idle} CPUs idle")
    if q.gpus_available:
        parts.append(f"{_gpus(q.gpus_available)} free")
    if q.queue_length is not None:
        parts.append(f"{q.queue_length} job{'' if q.queue_length == 1 else 's'} waiting")
    if not parts:
        return ""
    return f"{q.partition}: {', '.join(parts)}" if q.partition else ", ".join(parts)


def wait_line(report: JobReport) -> str | None:
    """The key-figures line of a wait that mattered (``QueueContext.long_wait``)."""
    q = report.queue
    if q is None or not q.long_wait:
        return None
    reasons = ", ".join(r.reason for r in q.reasons)
    return (f"Waited {format_duration(q.pending_seconds)} in the queue"
            + (f" ({reasons})" if reasons else ""))
