"""The job waited for a GPU type that had none free while another type sat idle."""

from __future__ import annotations

from webapp.formatting import format_duration
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class GpuTypeUnavailableDetector:
    name = "gpu_type_unavailable"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        q = report.queue
        if q is None or not q.seen or not q.requested_gpu_types or not q.gpus_available_max:
            return ()
        if q.pending_seconds is None or q.pending_seconds < thresholds.queue_wait_min_seconds:
            return ()
        most = dict(q.gpus_available_max)  # most GPUs of each type free at once in the wait
        wanted = [g for g in q.requested_gpu_types if most.get(g, 0) == 0]
        others = {g: n for g, n in most.items() if g not in q.requested_gpu_types and n > 0}
        if not wanted or not others:
            return ()
        idle = ", ".join(f"{g} (up to {n})" for g, n in sorted(others.items()))
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"The job waited {format_duration(q.pending_seconds)} for "
                    f"{'/'.join(wanted)} GPUs: none was free in partition {q.partition} "
                    f"during the whole wait, while other GPUs sat idle: {idle}."
                ),
                advice=(
                    "If your code runs on another GPU type, ask for `--gres=gpu:N` without "
                    "a type (or for a type that is free) so the job can start on whichever "
                    "GPU frees up first."
                ),
                evidence_text=(
                    f"Waited {format_duration(q.pending_seconds)}; no {'/'.join(wanted)} GPU "
                    f"was free at any time of the wait; free meanwhile: {idle}."
                ),
                evidence={
                    "pending_seconds": q.pending_seconds,
                    "requested_gpu_types": ",".join(q.requested_gpu_types),
                    **{f"gpus_free_max_{g}": n for g, n in sorted(most.items())},
                },
            ),
        )
