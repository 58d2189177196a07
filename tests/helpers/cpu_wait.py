"""The captured contended jobs (fixtures/exporter/v1-cpu-wait) read as the exporter reads them."""

from __future__ import annotations

from jobs_exporter import cgroupfs
from jobs_exporter.cpu_wait import Waits, WaitTotals
from jobs_exporter.proc_reader import ProcReader
from jobs_exporter.procfs import TaskTimes
from tests.helpers.exporter_scrape import FIXTURES

CAPTURES = FIXTURES / "v1-cpu-wait"


def capture(name: str) -> tuple[list[float], dict[str, list[TaskTimes]]]:
    """([job start, first capture, second capture] in Unix seconds; job id -> every thread's
    times) of one capture directory (``over``, ``over-b``, ``two``, ``two-b``)."""
    times = [float(x) for x in (CAPTURES / f"{name.split('-')[0]}.times").read_text().split()]
    tree = CAPTURES / name
    reader = ProcReader(str(tree / "proc"), cache=False)
    out = {}
    for job in cgroupfs.discover_jobs(str(tree / "cgroup"), str(tree / "proc"), "vm"):
        samples = [reader.read(pid) for pid in job.pids]
        out[job.job_id] = [t for s in samples if s is not None for t in (s.tasks or ())]
    return times, out


def two_scrapes(name: str, job: str) -> tuple[list[float], Waits, Waits]:
    """The wait figures of two scrapes of one job, at the times the captures were taken."""
    times, first = capture(name)
    _, second = capture(f"{name}-b")
    totals = WaitTotals()
    w1 = totals.update(job, first[job], times[1])
    return times, w1, totals.update(job, second[job], times[2])


def cpu_seconds(name: str, job: str) -> float:
    """The job's CPU time (cpuacct.usage) at the capture."""
    path = CAPTURES / name / f"cgroup/cpuacct/slurm_vm/uid_1001/job_{job}/cpuacct.usage"
    return int(path.read_text()) / 1e9
