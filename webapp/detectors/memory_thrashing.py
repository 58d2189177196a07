"""Low CPU efficiency while the kernel reclaimed the job's memory (cgroup v2 PSI, or
memory.high events): its working set did not fit, so its pages were evicted and read
back over and over."""

from __future__ import annotations

from webapp.detectors.advice import next_mem
from webapp.detectors.measures import (
    cpu_efficiency_low,
    memory_limit,
    pressure,
    stall_evidence,
    waiting_for,
)
from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class MemoryThrashingDetector:
    name = "memory_thrashing"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if (not cpu_efficiency_low(report, thresholds)
                or waiting_for(report, thresholds) != "memory"):
            return ()
        eff, share = report.cpu_efficiency or 0.0, pressure(report, "memory")
        events = int(report.usage.memory_high_events or 0)
        seen = []
        if share is not None and share >= thresholds.memory_pressure_high:
            seen.append(f"its tasks stalled on memory reclaim {format_percent(share)} of the time")
        if events:
            seen.append(f"it went over memory.high {events} time(s)")
        limit = memory_limit(report)
        ask = (
            f"ask for `--mem={next_mem(limit, thresholds.oom_growth)}`"
            if limit
            else "ask for more `--mem`"
        )
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"CPU efficiency was {format_percent(eff)} because the job's memory was "
                    f"too small for what it kept in use: {' and '.join(seen)}. The kernel "
                    "evicted pages the job still needed and read them back again (thrashing)."
                ),
                advice=(
                    f"Give the working set room: {ask} next time, or process the data in "
                    "smaller pieces (memory-map or stream files instead of reading them "
                    "whole, smaller batches)."
                ),
                evidence=stall_evidence(report),
                evidence_text=(
                    f"{format_percent(eff)} CPU efficiency; "
                    + (f"reclaim stalls {format_percent(share)} of the run"
                       if share is not None else "no pressure data")
                    + (f", {events} memory.high event(s)." if events else ".")
                ),
            ),
        )
