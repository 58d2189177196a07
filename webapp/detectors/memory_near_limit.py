"""Peak memory close to the limit: a slightly larger input would be killed.

The peak is what the kernel cannot reclaim, anonymous plus shared memory (files in
/dev/shm or another tmpfs); a page cache near the limit is no risk, the kernel drops it
before it kills anything (``webapp.report.peak``).
"""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import (
    memory_limit,
    peak_node_memory,
    peak_source_text,
    step_states,
)
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.states import OUT_OF_MEMORY
from webapp.thresholds import Thresholds


class MemoryNearLimitDetector:
    name = "memory_near_limit"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        peak, limit = report.memory_peak_bytes, memory_limit(report)
        if report.state == OUT_OF_MEMORY or OUT_OF_MEMORY in step_states(report):
            return ()  # out_of_memory says it all
        measured = report.memory_peak  # None only when peak is
        if measured is None or not peak or not limit or peak / limit < thresholds.memory_near_limit:
            return ()
        mem = next_mem(peak, thresholds.memory_margin)
        node = peak_node_memory(report)
        shmem = node.shmem_bytes if node and measured.source == "prometheus" else None
        shared = (f" Up to {format_bytes(shmem)} of it were files in /dev/shm or another "
                  "tmpfs, which count as memory." if shmem and shmem >= 0.1 * peak else "")
        evidence: dict[str, float | int | str] = {
            "memory_peak_bytes": round(peak),
            "memory_peak_source": str(measured.source),
            "memory_limit_bytes": limit,
            "suggested_mem": mem,
        }
        if shmem is not None:
            evidence["memory_shmem_bytes"] = shmem
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"Peak memory {format_bytes(peak)} reached {format_percent(peak / limit)} "
                    f"of the {format_bytes(limit)} limit; a slightly larger input would have "
                    f"been killed.{shared}"
                ),
                advice=f"Ask for `--mem={mem}` next time to keep a safety margin.",
                evidence_text=(
                    f"Peak {format_bytes(peak)} ({peak_source_text(report)}) of the "
                    f"{format_bytes(limit)} limit: {format_percent(peak / limit)}."
                ),
                evidence=evidence,
            ),
        )
