"""Peak memory close to the limit: a slightly larger input would be killed."""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import memory_limit, peak_source_text, step_states
from webapp.detectors.out_of_memory import OOM
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class MemoryNearLimitDetector:
    name = "memory_near_limit"

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]:
        peak, limit = report.memory_peak_bytes, memory_limit(report)
        if report.state == OOM or OOM in step_states(report):
            return ()  # out_of_memory says it all
        if not peak or not limit or peak / limit < t.memory_near_limit:
            return ()
        mem = next_mem(peak, t.memory_margin)
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"Peak memory {format_bytes(peak)} reached {format_percent(peak / limit)} "
                    f"of the {format_bytes(limit)} limit; a slightly larger input would have "
                    "been killed."
                ),
                advice=f"Ask for `--mem={mem}` next time to keep a safety margin.",
                evidence_text=(
                    f"Peak {format_bytes(peak)} ({peak_source_text(report)}) of the "
                    f"{format_bytes(limit)} limit: {format_percent(peak / limit)}."
                ),
                evidence={
                    "memory_peak_bytes": round(peak),
                    "memory_peak_source": str(report.memory_peak.source),
                    "memory_limit_bytes": limit,
                    "suggested_mem": mem,
                },
            ),
        )
