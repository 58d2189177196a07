"""The reverse of data-loader bound: the GPUs were busy while many of the cores requested
to feed them sat idle."""

from __future__ import annotations

import math

from webapp.detectors.advice import next_cpus
from webapp.detectors.measures import busy_cores, cpu_efficiency_low, gpu_mean
from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def idle_beside_busy_gpus(report: JobReport, thresholds: Thresholds) -> bool:
    """GPUs at ``gpu_cores_idle_min_gpu_util`` or more, CPU efficiency low and
    ``gpu_cores_idle_min_cores`` or more cores idle on average."""
    util, busy = gpu_mean(report), busy_cores(report)
    return (
        bool(report.gpus)
        and util is not None
        and util >= thresholds.gpu_cores_idle_min_gpu_util
        and busy is not None
        and cpu_efficiency_low(report, thresholds)
        and (report.cpus or 0) - busy >= thresholds.gpu_cores_idle_min_cores
    )


class GpuCoresIdleDetector:
    name = "gpu_cores_idle"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if not idle_beside_busy_gpus(report, thresholds):
            return ()
        util, busy, cpus = gpu_mean(report) or 0.0, busy_cores(report) or 0.0, report.cpus or 0
        # enough for what was used, with a spare core per GPU for the data pipeline
        per_gpu = max(1, math.ceil(next_cpus(busy, 1.1) / report.gpus)) + 1
        idle = cpus - busy
        return (
            Finding(
                name=self.name,
                severity=Severity.INFO,
                message=(
                    f"The GPU(s) were busy {format_percent(util)} of the time and needed "
                    f"little CPU: {idle:.1f} of the {cpus} requested cores sat idle."
                ),
                advice=(
                    f"Ask for `--cpus-per-gpu={per_gpu}` (or `--cpus-per-task`) next time; "
                    "the idle cores could run other jobs, and smaller requests start sooner."
                ),
                evidence={
                    "gpu_utilization_mean": round(util, 4),
                    "cpus": cpus,
                    "busy_cores": round(busy, 3),
                    "gpus": report.gpus,
                    "suggested_cpus_per_gpu": per_gpu,
                },
                evidence_text=(
                    f"GPU busy {format_percent(util)} on average; {busy:.1f} of {cpus} "
                    "cores busy."
                ),
            ),
        )
