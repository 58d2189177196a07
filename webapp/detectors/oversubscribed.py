"""More runnable threads (or busy cores) than allocated cores."""

from __future__ import annotations

import math

from webapp.detectors.measures import busy_cores, long_enough
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class OversubscribedDetector:
    name = "oversubscribed"

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]:
        cpus = report.cpus
        used = busy_cores(report)
        if not cpus or used is None or not long_enough(report, t.min_runtime_seconds):
            return ()
        threads = report.usage.threads_max
        if used > cpus * t.oversubscription_ratio:
            # Only possible without core binding (ConstrainCores=no): it took others' cores.
            cores = math.ceil(used)
            message = f"The job kept {used:.1f} cores busy but was allocated {cpus}."
            advice = f"Ask for `--cpus-per-task={cores}` so the job owns the cores it uses."
            sentence = f"{used:.1f} cores busy on average with {cpus} allocated."
        elif (
            threads
            and threads - t.oversubscription_wrapper_threads > cpus * t.oversubscription_ratio
            and (used / cpus >= t.oversubscription_busy)
        ):
            message = (
                f"Up to {threads:.0f} threads competed for {cpus} busy core(s); they slow each "
                "other down by switching."
            )
            advice = (
                "Match threads to cores: `export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK` (also "
                "MKL_NUM_THREADS / OPENBLAS_NUM_THREADS, or the program's own -j/--threads), "
                f"or ask for up to `--cpus-per-task={math.ceil(threads)}` if it scales."
            )
            cores = f"{cpus} allocated core" + ("s" if cpus != 1 else "")
            sentence = (f"Up to {threads:.0f} threads on {cores}, "
                        f"{used:.1f} of them busy on average.")
        else:
            return ()
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=message,
                advice=advice,
                evidence_text=sentence,
                evidence={
                    "cpus": cpus,
                    "busy_cores": round(used, 3),
                    "threads_max": threads if threads is not None else "n/a",
                },
            ),
        )
