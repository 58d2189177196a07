"""Heavy file I/O that did not go to scratch."""

from __future__ import annotations

from webapp.formatting import format_bytes
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class IoNotOnScratchDetector:
    name = "io_not_on_scratch"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        u = report.usage
        written, read = u.write_bytes or 0.0, u.read_bytes or 0.0
        # scratch_in_use None means "not measured": say nothing rather than guess.
        if u.scratch_in_use is not False or max(written, read) < thresholds.io_heavy_bytes:
            return ()
        rate = ""
        if report.elapsed_seconds:
            rate = f" ({format_bytes((written + read) / report.elapsed_seconds)}/s on average)"
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"The job wrote {format_bytes(written)} and read {format_bytes(read)}{rate}, "
                    "none of it on a scratch file system."
                ),
                advice=(
                    "Work in scratch: copy inputs to $SCRATCH (or node-local $TMPDIR) at the "
                    "start, write temporary and large files there, and copy only the results "
                    "back to home/project at the end."
                ),
                evidence_text=(
                    f"{format_bytes(written)} written and {format_bytes(read)} read; no "
                    "process had a file open on scratch."
                ),
                evidence={"write_bytes": written, "read_bytes": read},
            ),
        )
