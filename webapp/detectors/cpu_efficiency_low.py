"""CPU efficiency (seff's TotalCPU / (elapsed x CPUs)) below the threshold."""

from __future__ import annotations

from webapp.detectors.advice import next_cpus
from webapp.detectors.gpu_cores_idle import idle_beside_busy_gpus
from webapp.detectors.gpu_input_bound import input_bound
from webapp.detectors.measures import (
    busy_cores,
    can_tell_waiting,
    has_pressure,
    long_enough,
    responsible_step,
    wait_explains_idle_cores,
    waiting_for,
)
from webapp.detectors.serial_on_many_cores import looks_serial
from webapp.formatting import format_duration, format_percent
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def _cores(busy: float) -> str:
    return f"{busy:.1f}" if busy >= 0.05 else "almost none"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class LowCpuEfficiencyDetector:
    name = "cpu_efficiency_low"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        eff = report.cpu_efficiency
        busy = busy_cores(report)
        if eff is None or busy is None or not report.cpus or report.unfinished:
            return ()
        if (not long_enough(report, thresholds.min_runtime_seconds)
                or eff >= thresholds.cpu_efficiency_low):
            return ()
        if looks_serial(report, thresholds) or input_bound(report, thresholds):
            return ()  # serial_on_many_cores / gpu_input_bound say it more precisely
        waited = waiting_for(report, thresholds)
        # Some waiting for a CPU, but mostly idle cores: this finding's case, not starved.
        waited_a_little = waited == "cpu" and not wait_explains_idle_cores(report)
        if (waited and not waited_a_little) or idle_beside_busy_gpus(report, thresholds):
            return ()  # cpu_starved, io_starved, memory_thrashing, gpu_cores_idle: the cause
        if report.cpus > 1:
            cores = next_cpus(busy, 1.1)
            # No smaller request to suggest when the busy cores round up to the allocation.
            ask = (f"ask for `--cpus-per-task={cores}` (or fewer tasks) next time, or "
                   if cores < report.cpus else "")
            advice = (
                f"On average {_cores(busy)} of {report.cpus} cores were busy: {ask}check "
                "that the program's thread/process count follows $SLURM_CPUS_PER_TASK."
            )
        else:
            advice = (
                "The single core was often idle: find what the program waited for (file I/O, "
                "the network, a `sleep`, user input). Stage input data to local scratch and "
                "avoid interactive waits in batch jobs."
            )
        # Idle, or waiting? Pressure stall data (cgroup v2) or the threads' waits can tell.
        cause = (
            " Pressure stayed low: idle, not starved."
            if has_pressure(report) and not waited
            else " Its threads seldom waited for a CPU: idle, not starved."
            if can_tell_waiting(report) and not waited_a_little
            else " Its threads waited for a CPU at times, for far fewer core-seconds than "
            "its cores left unused: mostly idle, not starved."
            if can_tell_waiting(report)
            else " Idle or starved (waiting for CPU, storage or memory) cannot be told "
            "without pressure data (cgroup v1)."
        )
        # GPU jobs get cores for feeding the GPU; low CPU use there is less of a waste.
        severity = Severity.INFO if report.gpus else Severity.WARNING
        message = (
            f"CPU efficiency was {format_percent(eff)}: the {report.cpus} allocated "
            f"core(s) did {format_percent(eff)} of the work they could have done." + cause
        )
        evidence: dict[str, float | int | str] = {
            "cpu_efficiency": round(eff, 4),
            "cpus": report.cpus,
            "busy_cores": round(busy, 3),
            "cpu_seconds": round(report.cpu_seconds or 0.0, 3),
            "elapsed_seconds": report.elapsed_seconds or 0.0,
            "pressure_data": "yes" if has_pressure(report) else "no",
        }
        evidence_text = (
            f"{format_duration(report.cpu_seconds)} of CPU time in "
            f"{format_duration(report.elapsed_seconds)} on {_plural(report.cpus, 'core')}: "
            + (f"{busy:.1f} cores busy on average." if busy >= 0.05 else "almost no core busy.")
        )
        step = responsible_step(report.step_lines)
        if step is not None and step.cpus and step.elapsed_seconds:
            used = (step.cpu_seconds or 0.0) / step.elapsed_seconds
            what = "component" if step.kind == "component" else "step"
            message += (f" Most of the idle time is {what} {step.step_id}'s: it used "
                        f"{used:.1f} of {step.cpus} cores.")
            fewer = next_cpus(used, 1.1)
            # An srun size to suggest only when it is smaller than what the step had.
            resize = (f"give that srun fewer CPUs (e.g. `srun --cpus-per-task={fewer}`), or "
                      if fewer < step.cpus else "")
            advice = (f"{what.capitalize()} {step.step_id} used {used:.1f} of its {step.cpus} "
                      f"cores: {resize}make the program use the cores it has. " + advice)
            evidence_text += (f" {what.capitalize()} {step.step_id}: {used:.1f} of {step.cpus} "
                              "cores busy.")
            evidence.update({"step": step.step_id, "step_cpus": step.cpus,
                             "step_busy_cores": round(used, 3)})
        return (Finding(name=self.name, severity=severity, message=message, advice=advice,
                        evidence=evidence, evidence_text=evidence_text),)
