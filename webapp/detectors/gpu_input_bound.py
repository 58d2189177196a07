"""Data-loader bound: the GPUs waited while one CPU core of the job was saturated, so the
input pipeline (one process decoding and batching data) could not keep them fed."""

from __future__ import annotations

import math

from webapp.detectors.measures import (
    busiest_core,
    busy_cores,
    gpu_mean,
    gpu_memory_peak,
    long_enough,
    one_core_saturated,
    thread_wait_of_run,
)
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def input_bound(report: JobReport, thresholds: Thresholds) -> bool:
    """GPUs below ``gpu_util_low`` that the program opened (they hold memory), while about
    one core of the job did all the CPU work at full speed."""
    util, held = gpu_mean(report), gpu_memory_peak(report)
    return (
        bool(report.gpus)
        and not report.unfinished
        and long_enough(report, thresholds.min_runtime_seconds)
        and util is not None
        and util < thresholds.gpu_util_low
        and held is not None
        and held >= thresholds.gpu_memory_in_use_bytes
        and one_core_saturated(report, thresholds)
    )


class GpuInputBoundDetector:
    name = "gpu_input_bound"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if not input_bound(report, thresholds):
            return ()
        util, held = gpu_mean(report) or 0.0, gpu_memory_peak(report) or 0.0
        busy, top = busy_cores(report) or 0.0, busiest_core(report)
        # one main process and three loader workers per GPU at least; double what it had
        per_gpu = max(4, 2 * math.ceil((report.cpus or 1) / report.gpus))
        core = f"its busiest core ran {format_percent(top)} of the time" if top else (
            f"{busy:.1f} core(s) were busy in all"
        )
        waited = thread_wait_of_run(report, "cpu") or 0.0
        if waited >= 0.05:  # load beside the job: say why its one core reads below full
            core += f", and its threads waited for a core {format_percent(waited)} of the run"
        held_text = format_bytes(held)
        if util < thresholds.gpu_idle:
            # an idle GPU the program opened: the work stayed on the CPU side
            message = (
                f"The GPU(s) did no work although the program held {held_text} on them, "
                f"while one CPU core did all the job's CPU work ({core}): the work stayed on "
                "the CPU, most often a single process loading and preparing data that never "
                "kept the GPU fed, or a computation never moved to the GPU."
            )
            check = " Check that the model and each batch are moved to the GPU (`.to(device)`)."
        else:
            message = (
                f"The GPU(s) were busy only {format_percent(util)} of the time while one "
                f"CPU core did all the job's CPU work ({core}): a single process loading "
                "and preparing data could not keep the GPU fed."
            )
            check = ""
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=message,
                advice=(
                    "Load data in parallel: in PyTorch give the `DataLoader` `num_workers=N` "
                    "with N = `$SLURM_CPUS_PER_TASK` - 1 (and `pin_memory=True`); in "
                    "TensorFlow use `tf.data` with `num_parallel_calls` and `prefetch`. Ask "
                    f"for the cores to run them: `--cpus-per-gpu={per_gpu}`. Pre-process the "
                    "data once into a fast format instead of decoding it every epoch." + check
                ),
                evidence={
                    "gpu_utilization_mean": round(util, 4),
                    "gpu_memory_used_max_bytes": round(held),
                    "busy_cores": round(busy, 3),
                    "busiest_core": round(top, 4) if top is not None else "n/a",
                    "cpus": report.cpus or 0,
                    "gpus": report.gpus,
                },
                evidence_text=(
                    f"GPU busy {format_percent(util)} on average holding "
                    f"{format_bytes(held)}; {busy:.1f} of {report.cpus} core(s) busy"
                    + (f", the busiest {format_percent(top)}." if top is not None else ".")
                ),
            ),
        )
