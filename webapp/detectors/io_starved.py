"""Low CPU efficiency while the job's tasks waited for storage (cgroup v2 PSI, or on any
cgroup version the threads' delay-accounting I/O wait)."""

from __future__ import annotations

from webapp.detectors.measures import cpu_efficiency_low, stall_evidence, wait_share, waiting_for
from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class IoStarvedDetector:
    name = "io_starved"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if not cpu_efficiency_low(report, thresholds) or waiting_for(report, thresholds) != "io":
            return ()
        eff, share = report.cpu_efficiency or 0.0, wait_share(report, "io") or 0.0
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"CPU efficiency was {format_percent(eff)} because the job waited for "
                    f"storage: some of its tasks were blocked on I/O {format_percent(share)} "
                    "of the time."
                ),
                advice=(
                    "Copy input to node-local scratch (`$TMPDIR`) at the start and results "
                    "back at the end; read and write in large blocks rather than many small "
                    "calls, and do not flush or `fsync` after every record. More cores will "
                    "not help: ask for fewer (`--cpus-per-task`) until the I/O is fixed."
                ),
                evidence=stall_evidence(report),
                evidence_text=(
                    f"{format_percent(eff)} CPU efficiency on {report.cpus} core(s); tasks "
                    f"waited for storage {format_percent(share)} of the run."
                ),
            ),
        )
