"""Low CPU efficiency while the job's tasks waited for a CPU (cgroup v2 PSI, or on any
cgroup version the threads' scheduler run delay): starved, not idle."""

from __future__ import annotations

from webapp.detectors.measures import (
    cpu_efficiency_low,
    own_threads_outnumber_cores,
    stall_evidence,
    wait_explains_idle_cores,
    wait_share,
    waiting_for,
)
from webapp.detectors.serial_on_many_cores import looks_serial
from webapp.formatting import format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


class CpuStarvedDetector:
    name = "cpu_starved"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if not cpu_efficiency_low(report, thresholds) or waiting_for(report, thresholds) != "cpu":
            return ()
        if own_threads_outnumber_cores(report, thresholds):
            return ()  # its threads waited for each other: oversubscribed says so
        if looks_serial(report, thresholds):
            return ()  # one busy thread on several cores: serial says what to change
        if not wait_explains_idle_cores(report):
            return ()  # it waited, but mostly its cores sat idle: the CPU finding says so
        eff, share = report.cpu_efficiency or 0.0, wait_share(report, "cpu") or 0.0
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"CPU efficiency was {format_percent(eff)}, yet some of the job's tasks "
                    f"waited for a CPU {format_percent(share)} of the time: they were ready "
                    "to run but had no core. The job was starved of CPU, not idle."
                ),
                advice=(
                    "Its tasks competed for fewer cores than it was given, or were throttled. "
                    "Check how they are bound (`srun --cpu-bind=verbose,cores`) and that "
                    "nothing pins every thread to one core (`taskset`, `OMP_PROC_BIND`, "
                    "`OMP_PLACES`); start as many threads as `$SLURM_CPUS_PER_TASK`. If the "
                    "node shares cores between jobs, ask support about core binding or use "
                    "`--exclusive`."
                ),
                evidence=stall_evidence(report),
                evidence_text=(
                    f"{format_percent(eff)} CPU efficiency on {report.cpus} core(s); tasks "
                    f"waited for a CPU {format_percent(share)} of the run."
                ),
            ),
        )
