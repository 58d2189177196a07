"""Killed for exceeding the memory limit."""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import memory_limit, step_states
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.states import OUT_OF_MEMORY
from webapp.thresholds import Thresholds


class OutOfMemoryDetector:
    name = "out_of_memory"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        peak, limit = report.memory_peak_bytes, memory_limit(report)
        oom = report.state == OUT_OF_MEMORY or OUT_OF_MEMORY in step_states(report)
        if not oom:
            return ()
        # The peak of a killed job is the limit, not its need: grow the limit itself.
        base = max(peak or 0, limit or 0)
        advice = (
            f"Ask for `--mem={next_mem(base, thresholds.oom_growth)}` next time "
            f"({format_percent(thresholds.oom_growth - 1)} more than the limit it hit), or reduce "
            "what the program holds in memory at once."
            if base
            else "Ask for more memory with --mem next time."
        )
        steps = [s.step_id for s in report.steps if s.state == OUT_OF_MEMORY]
        where = f" (step {', '.join(steps)})" if steps else ""
        return (
            Finding(
                name=self.name,
                severity=Severity.CRITICAL,
                message=(
                    f"The job ran out of memory{where} and the kernel killed it at its "
                    f"{format_bytes(limit)} limit."
                ),
                advice=advice,
                evidence_text=(
                    f"Killed at the {format_bytes(limit)} limit; the largest peak measured "
                    f"before that was {format_bytes(peak)}."
                    if peak
                    else f"Killed at the {format_bytes(limit)} limit before any memory "
                    "sample was taken."
                ),
                evidence={
                    "memory_peak_bytes": round(peak) if peak is not None else "n/a",
                    "memory_limit_bytes": limit if limit is not None else "n/a",
                },
            ),
        )
