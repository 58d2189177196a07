"""A process close to its open-files limit (RLIMIT_NOFILE)."""

from __future__ import annotations

from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class OpenFilesNearLimitDetector:
    name = "open_files_near_limit"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        ratio = report.usage.open_files_limit_ratio_max
        if ratio is None or ratio < thresholds.open_files_ratio_high:
            return ()
        return (
            Finding(
                name=self.name,
                severity=Severity.CRITICAL if ratio >= 1.0 else Severity.WARNING,
                message=(
                    f"A process used {format_percent(ratio)} of the open files it may hold; "
                    "at 100 % opening one more file fails with 'Too many open files'."
                ),
                advice=(
                    "Close files you no longer need; if the program really needs them, raise "
                    "the soft limit in the job script with `ulimit -n $(ulimit -Hn)`."
                ),
                evidence_text=(
                    f"The busiest process held {format_percent(ratio)} of its open-files limit."
                ),
                evidence={"open_files_limit_ratio": round(ratio, 4)},
            ),
        )
