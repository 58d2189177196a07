"""Jobs so short that scheduling costs more than the work."""

from __future__ import annotations

from webapp.formatting import format_duration
from webapp.model import Finding, JobReport, Severity
from webapp.states import COMPLETED
from webapp.thresholds import Thresholds

_TARGET = 1800.0  # a packed job of about half an hour
_MAX_PACK = 100  # beyond this, the advice is "a loop", whatever the count


class ShortJobDetector:
    name = "short_job"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        elapsed = report.elapsed_seconds
        if report.state != COMPLETED or elapsed is None or elapsed >= thresholds.short_job_seconds:
            return ()
        per_job = min(max(int(_TARGET // max(elapsed, 1.0)), 2), _MAX_PACK)
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=(
                    f"The job ran only {format_duration(elapsed)}; starting, accounting and "
                    "cleaning up a job costs about as much as that."
                ),
                advice=(
                    f"If you submit many of these, pack about {per_job} runs into one job "
                    "(a loop in the script, or an array whose tasks each process several "
                    f"inputs, e.g. `--array=0-999:{per_job}`) so each job runs ~30 minutes."
                ),
                evidence_text=(
                    f"Ran {format_duration(elapsed)}; jobs under "
                    f"{format_duration(thresholds.short_job_seconds)} count as short."
                ),
                evidence={"elapsed_seconds": elapsed, "runs_per_job": per_job},
            ),
        )
