"""A time limit far past the partition's usual one, on a job that waited long."""

from __future__ import annotations

from webapp.detectors.advice import next_time
from webapp.formatting import format_duration
from webapp.model import Finding, JobReport, Severity
from webapp.states import COMPLETED
from webapp.thresholds import Thresholds


class TimeLimitPastUsualDetector:
    name = "time_limit_past_usual"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        q, limit = report.queue, report.time_limit_seconds
        if q is None or not limit or not q.usual_time_limit_seconds:
            return ()
        if q.usual_time_limit_jobs < thresholds.time_limit_usual_min_jobs:
            return ()  # too few jobs for "usual" to mean anything
        if q.pending_seconds is None or q.pending_seconds < thresholds.queue_wait_min_seconds:
            return ()
        ratio = limit / q.usual_time_limit_seconds
        if ratio < thresholds.time_limit_usual_factor:
            return ()
        usual = format_duration(q.usual_time_limit_seconds)
        ran = report.elapsed_seconds if report.state == COMPLETED else None
        ask = f"`--time={next_time(ran, thresholds.time_margin)}` (it ran {format_duration(ran)})" \
            if ran else f"a limit nearer the partition's usual {usual}"
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=(
                    f"The job waited {format_duration(q.pending_seconds)} with a time limit of "
                    f"{format_duration(limit)}, {ratio:.0f}x the usual {usual} of partition "
                    f"{q.partition} (median of its {q.usual_time_limit_jobs} jobs, last 30 "
                    "days)."
                ),
                advice=(
                    f"Ask for {ask}: a long limit needs a long free slot, while a short one "
                    "lets the scheduler backfill the job into gaps between others."
                ),
                evidence_text=(
                    f"Waited {format_duration(q.pending_seconds)}; limit "
                    f"{format_duration(limit)}, {ratio:.1f}x the median "
                    f"{usual} of {q.usual_time_limit_jobs} jobs in partition {q.partition}."
                ),
                evidence={
                    "pending_seconds": q.pending_seconds,
                    "time_limit_seconds": limit,
                    "usual_time_limit_seconds": q.usual_time_limit_seconds,
                    "usual_time_limit_jobs": q.usual_time_limit_jobs,
                    "ratio": round(ratio, 2),
                },
            ),
        )
