"""A time limit far longer than the job needed."""

from __future__ import annotations

from webapp.detectors.advice import next_time, round_up_time
from webapp.formatting import format_duration, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.states import COMPLETED
from webapp.thresholds import Thresholds


class TimeOverRequestedDetector:
    name = "time_over_requested"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        elapsed, limit = report.elapsed_seconds, report.time_limit_seconds
        if report.state != COMPLETED or not elapsed or not limit:
            return ()
        ratio = elapsed / limit
        suggested = round_up_time(elapsed * thresholds.time_margin)
        if (ratio >= thresholds.time_used_low
                or limit - suggested < thresholds.time_waste_min_seconds):
            return ()
        time = next_time(elapsed, thresholds.time_margin)
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=(
                    f"The job ran {format_duration(elapsed)} of its {format_duration(limit)} "
                    f"limit ({format_percent(ratio)})."
                ),
                advice=(
                    f"Ask for `--time={time}` next time: the scheduler can fit shorter jobs "
                    "into gaps (backfill), so they start sooner."
                ),
                evidence_text=(
                    f"Ran {format_duration(elapsed)} of a {format_duration(limit)} limit: "
                    f"{format_percent(ratio)}."
                ),
                evidence={
                    "elapsed_seconds": elapsed,
                    "time_limit_seconds": limit,
                    "time_used": round(ratio, 4),
                    "suggested_time": time,
                },
            ),
        )
