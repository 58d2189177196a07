"""More runnable threads (or busy cores) than allocated cores."""

from __future__ import annotations

import math

from webapp.detectors.measures import (
    busy_cores,
    long_enough,
    own_threads_outnumber_cores,
    thread_wait_share,
)
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class OversubscribedDetector:
    name = "oversubscribed"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        cpus = report.cpus
        used = busy_cores(report)
        if not cpus or used is None or not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        threads = report.usage.threads_max
        busy_tasks = report.usage.busy_tasks_max
        # Cores of one node: busy threads are counted per node.
        node_cpus = cpus / max(1, len(report.nodes))
        share = thread_wait_share(report, "cpu")
        if busy_tasks is not None and share is not None and not (
            used > cpus * thresholds.oversubscription_ratio
        ):
            # Measured: the job's own busy threads outnumbered its cores and waited for them
            # (a busy node slows a job down too, but then its threads do not outnumber it).
            if (not own_threads_outnumber_cores(report, thresholds)
                    or share < thresholds.pressure_high):
                return ()
            message = (
                f"Up to {busy_tasks:.0f} of the job's threads were busy at once on "
                f"{node_cpus:g} core(s) per node: they waited for a core "
                f"{share:.0%} of their time, slowing each other down."
            )
            advice = (
                "Match threads to cores: `export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK` (also "
                "MKL_NUM_THREADS / OPENBLAS_NUM_THREADS, or the program's own -j/--threads), "
                f"or ask for up to `--cpus-per-task={math.ceil(busy_tasks)}` if it scales."
            )
            sentence = (f"Up to {busy_tasks:.0f} busy threads on {node_cpus:g} core(s) per "
                        f"node; {share:.0%} of their time spent waiting for a core.")
        elif used > cpus * thresholds.oversubscription_ratio:
            # Only possible without core binding (ConstrainCores=no): it took others' cores.
            cores = math.ceil(used)
            message = f"The job kept {used:.1f} cores busy but was allocated {cpus}."
            advice = f"Ask for `--cpus-per-task={cores}` so the job owns the cores it uses."
            sentence = f"{used:.1f} cores busy on average with {cpus} allocated."
        elif (
            threads
            and threads - thresholds.oversubscription_wrapper_threads
            > cpus * thresholds.oversubscription_ratio
            and (used / cpus >= thresholds.oversubscription_busy)
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
            allocated = f"{cpus} allocated core" + ("s" if cpus != 1 else "")
            sentence = (f"Up to {threads:.0f} threads on {allocated}, "
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
                    "busy_tasks_max": busy_tasks if busy_tasks is not None else "n/a",
                    "cpu_wait_share": round(share, 4) if share is not None else "n/a",
                },
            ),
        )
