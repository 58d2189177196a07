"""Memory requested far beyond what the job used (seff's MaxRSS / requested)."""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import long_enough
from webapp.detectors.thresholds import Thresholds
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity


class MemoryOverRequestDetector:
    name = "memory_over_requested"

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]:
        peak, requested = report.memory_peak_bytes, report.memory_requested_bytes
        if not peak or not requested or report.running:
            return ()  # a peak of 0 means "not measured" far more often than "no memory"
        if not long_enough(report, t.min_runtime_seconds):
            return ()
        nodes = max(1, len(report.nodes))
        # MaxRSS is per task; compare it with one node's share of a multi-node request.
        per_node = requested / nodes
        ratio = peak / per_node
        wasted = (per_node - peak * t.memory_margin) * nodes
        if ratio >= t.memory_efficiency_low or wasted < t.memory_waste_min_bytes:
            return ()
        mem = next_mem(peak, t.memory_margin)
        where = " per node" if nodes > 1 else ""
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING if ratio < 0.25 else Severity.INFO,
                message=(
                    f"The job used at most {format_bytes(peak)} of the "
                    f"{format_bytes(per_node)} it asked for{where} ({format_percent(ratio)})."
                ),
                advice=(
                    f"Ask for `--mem={mem}`{where} next time (peak plus "
                    f"{format_percent(t.memory_margin - 1)}); a smaller request starts sooner "
                    "and leaves memory for other jobs."
                ),
                evidence={
                    "memory_peak_bytes": peak,
                    "memory_requested_bytes": requested,
                    "memory_efficiency": round(ratio, 4),
                    "suggested_mem": mem,
                },
            ),
        )
