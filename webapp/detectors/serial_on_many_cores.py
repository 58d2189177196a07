"""A serial program on a multi-core allocation: one core busy, the others idle."""

from __future__ import annotations

from webapp.detectors.gpu_input_bound import input_bound
from webapp.detectors.measures import busy_cores, long_enough, working_nodes
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def looks_serial(report: JobReport, thresholds: Thresholds) -> bool:
    """True when the job kept about one core busy out of two or more, with one thread.

    Judged on the total, not per core: the kernel migrates a serial process between the
    job's cores, so per-core series show several half-busy cores summing to one. The total
    alone also fits two busy threads slowed to one core's worth by load beside the job, so
    where the exporter counted busy threads they decide: a second one at any time rules
    serial out, and one alone is serial even when load beside the job left it less than a
    whole core (it waited for a CPU: the total then reads below one core).

    The busy threads are counted per node (the exporter's figure is the most on any one
    node), so on several nodes the job is serial only when its nodes beyond one did
    nothing: one busy rank per node is a parallel job, however slowed each rank was.
    """
    if not report.cpus or report.cpus < 2:
        return False
    if len(report.nodes) > 1 and working_nodes(report, thresholds) != 1:
        return False  # several nodes at work, or one without samples: not judged serial
    busy_tasks = report.usage.busy_tasks_max
    used = busy_cores(report)
    if used is None or used > thresholds.serial_cores_max:
        return False
    if busy_tasks is not None:
        return busy_tasks == 1 and used >= 0.25
    return used >= 0.75


class SerialOnManyCoresDetector:
    name = "serial_on_many_cores"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if report.unfinished or not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        cpus = report.cpus  # never None here: looks_serial needs two or more
        if (cpus is None or not looks_serial(report, thresholds)
                or input_bound(report, thresholds)):
            return ()  # on a GPU job the one busy core is its data loader: gpu_input_bound
        used = busy_cores(report)
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"The job had {report.cpus} cores but kept about one busy: the program ran "
                    "serially and the other cores sat idle."
                ),
                advice=(
                    "Ask for `--cpus-per-task=1` (and `--ntasks=1`) next time, or make the "
                    "program parallel: set OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK for threaded "
                    "code, launch MPI code with srun, or run independent pieces as a job array."
                ),
                evidence_text=f"{used or 0.0:.2f} of {report.cpus} cores busy on average.",
                evidence={
                    "cpus": cpus,
                    "busy_cores": round(used, 3) if used is not None else "n/a",
                },
            ),
        )
