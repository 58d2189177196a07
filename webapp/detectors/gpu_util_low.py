"""GPUs that worked, but mostly waited."""

from __future__ import annotations

import math

from webapp.detectors.gpu_input_bound import input_bound
from webapp.detectors.measures import gpu_series, long_enough
from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class LowGpuUtilDetector:
    name = "gpu_util_low"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        series = gpu_series(report)
        if not report.gpus or not series or not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        # Idle GPUs are IdleGpuDetector's finding; judge the ones that did something.
        means = [m for s in series if (m := s.mean() or 0.0) >= thresholds.gpu_idle]
        if not means:
            return ()
        mean = sum(means) / len(means)
        if mean >= thresholds.gpu_util_low or input_bound(report, thresholds):
            return ()  # gpu_input_bound names the cause and its cure
        # The summed work of all GPUs, if packed onto fewer at ~50 % each.
        needed = max(1, math.ceil(sum(means) / 0.5))
        fewer = (
            f"Together the GPUs did the work of {sum(means):.2f} GPU; `--gres=gpu:{needed}` "
            "would do. "
            if needed < len(means)
            else ""
        )
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"The GPUs were busy only {format_percent(mean)} of the time on average "
                    f"(below {format_percent(thresholds.gpu_util_low)})."
                ),
                advice=(
                    fewer + "A GPU this idle is usually waiting for data: give the input "
                    "pipeline more CPU workers (e.g. DataLoader num_workers), use larger batches, "
                    "or run on a smaller GPU / MIG slice."
                ),
                evidence_text=(
                    (f"{len(means)} GPUs" if len(means) > 1 else "1 GPU")
                    + f" busy {format_percent(mean)} of the time on average; the work adds up "
                    f"to {sum(means):.2f} GPU."
                ),
                evidence={
                    "gpu_utilization_mean": round(mean, 4),
                    "gpus_used": len(means),
                    "gpus_needed": needed,
                },
            ),
        )
