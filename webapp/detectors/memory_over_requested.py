"""Memory requested far beyond what the job used: the report's peak per node / the limit."""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import long_enough, memory_limit, peak_source_text
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class MemoryOverRequestedDetector:
    name = "memory_over_requested"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        # A peak of 0 means "not sampled" (jobs shorter than the gather interval) far more
        # often than "no memory"; a running job's peak may still grow.
        peak, limit = report.memory_peak_bytes, memory_limit(report)
        measured = report.memory_peak  # None only when peak is
        if measured is None or not peak or not limit or report.unfinished:
            return ()
        if not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        nodes = max(1, len(report.nodes))
        ratio = peak / limit
        wasted = (limit - peak * thresholds.memory_margin) * nodes
        if ratio >= thresholds.memory_efficiency_low or wasted < thresholds.memory_waste_min_bytes:
            return ()
        mem = next_mem(peak, thresholds.memory_margin)
        where = " per node" if nodes > 1 else ""
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING if ratio < 0.25 else Severity.INFO,
                message=(
                    f"The job used at most {format_bytes(peak)} of the {format_bytes(limit)} "
                    f"it asked for{where} ({format_percent(ratio)})."
                ),
                advice=(
                    f"Ask for `--mem={mem}`{where} next time (the peak plus "
                    f"{format_percent(thresholds.memory_margin - 1)}); a smaller request starts "
                    "sooner and leaves memory for other jobs."
                ),
                evidence_text=(
                    f"Peak {format_bytes(peak)} ({peak_source_text(report)}) of the "
                    f"{format_bytes(limit)} requested{where}: {format_percent(ratio)}; "
                    f"{format_bytes(wasted)}{' over all nodes' if nodes > 1 else ''} stayed "
                    "unused beyond a "
                    f"{format_percent(thresholds.memory_margin - 1)} margin."
                ),
                evidence={
                    "memory_peak_bytes": round(peak),
                    "memory_peak_source": str(measured.source),
                    "memory_limit_bytes": limit,
                    "memory_efficiency": round(ratio, 4),
                    "wasted_bytes": round(wasted),
                    "suggested_mem": mem,
                },
            ),
        )
