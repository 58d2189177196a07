"""CPU efficiency (seff's TotalCPU / (elapsed x CPUs)) below the threshold."""

from __future__ import annotations

from webapp.detectors.advice import next_cpus
from webapp.detectors.measures import busy_cores, long_enough
from webapp.detectors.serial_on_many_cores import looks_serial
from webapp.detectors.thresholds import Thresholds
from webapp.formatting import format_duration, format_percent
from webapp.model import Finding, JobReport, Severity


def _cores(busy: float) -> str:
    return f"{busy:.1f}" if busy >= 0.05 else "almost none"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class LowCpuEfficiencyDetector:
    name = "cpu_efficiency_low"

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]:
        eff = report.cpu_efficiency
        busy = busy_cores(report)
        if eff is None or busy is None or not report.cpus or report.unfinished:
            return ()
        if not long_enough(report, t.min_runtime_seconds) or eff >= t.cpu_efficiency_low:
            return ()
        if looks_serial(report, t):
            return ()  # SerialOnManyCoresDetector says it more precisely
        if report.cpus > 1:
            cores = next_cpus(busy, 1.1)
            advice = (
                f"On average {_cores(busy)} of {report.cpus} cores were busy: ask for "
                f"`--cpus-per-task={cores}` (or fewer tasks) next time, or check that the "
                "program's thread/process count follows $SLURM_CPUS_PER_TASK."
            )
        else:
            advice = (
                "The single core was often idle: the program probably waited on file I/O, the "
                "network or user input. Stage input data to local scratch and avoid interactive "
                "waits in batch jobs."
            )
        # GPU jobs get cores for feeding the GPU; low CPU use there is less of a waste.
        severity = Severity.INFO if report.gpus else Severity.WARNING
        return (
            Finding(
                name=self.name,
                severity=severity,
                message=(
                    f"CPU efficiency was {format_percent(eff)}: the {report.cpus} allocated "
                    f"core(s) did {format_percent(eff)} of the work they could have done."
                ),
                advice=advice,
                evidence_text=(
                    f"{format_duration(report.cpu_seconds)} of CPU time in "
                    f"{format_duration(report.elapsed_seconds)} on {_plural(report.cpus, 'core')}: "
                    + (f"{busy:.1f} cores busy on average." if busy >= 0.05
                       else "almost no core busy.")
                ),
                evidence={
                    "cpu_efficiency": round(eff, 4),
                    "cpus": report.cpus,
                    "busy_cores": round(busy, 3),
                    "cpu_seconds": round(report.cpu_seconds or 0.0, 3),
                    "elapsed_seconds": report.elapsed_seconds or 0.0,
                },
            ),
        )
