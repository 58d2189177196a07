"""Many files held open at once."""

from __future__ import annotations

from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class ManyOpenFilesDetector:
    name = "many_open_files"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        u = report.usage
        if u.open_files_max is None or u.open_files_max < thresholds.open_files_many:
            return ()
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=f"The job held up to {u.open_files_max:.0f} files open at once.",
                advice=(
                    "Shared file systems slow down with many open files: pack small files "
                    "into one archive or container (tar, zip, HDF5) and read it "
                    "sequentially, and close files as soon as they are done."
                ),
                evidence_text=(
                    f"Up to {u.open_files_max:,.0f} files open at once (a note from "
                    f"{thresholds.open_files_many:,.0f} on)."
                ),
                evidence={"open_files_max": u.open_files_max},
            ),
        )
