"""One scrape's view of the node: the jobs found, each with its processes read once.

A job can end at any moment of a scrape. A job found ended (its cgroup directory gone) is
marked ``gone``: every later collector skips it and the registry drops the series the
earlier ones produced, so a scrape reports a job completely or not at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import TypeVar

from jobs_exporter import cgroupfs, procfs
from jobs_exporter.proc_reader import ProcReader

log = logging.getLogger(__name__)
T = TypeVar("T")


class ScrapedJob:
    """A discovered job plus its /proc samples (read once per scrape by ``ProcReader.refresh``)."""

    def __init__(self, cgroup: cgroupfs.Job, procs: ProcReader):
        self.cgroup = cgroup
        self._procs = procs
        self.gone = False  # the job's cgroup was found removed during this scrape

    @property
    def job_id(self) -> str:
        return self.cgroup.job_id

    @property
    def pids(self) -> tuple[int, ...]:
        return self.cgroup.pids

    @cached_property
    def processes(self) -> list[procfs.ProcessSample]:
        """Samples of the job's live processes; exited ones are left out.

        Raises FileNotFoundError when one is missing and the job ended meanwhile (see
        ``check_alive``). With none missing there is nothing to tell apart, and a job
        ending after its reads is found by the cgroup readers (its kept files fail):
        not asked, most scrapes save a ``stat`` of each job directory (0.5 ms for 64 v1
        jobs of four controllers).
        """
        samples = self._procs.samples  # filled by ProcReader.refresh for this scrape
        found = [s for s in map(samples.get, self.cgroup.pids) if s is not None]
        if len(found) < len(self.cgroup.pids):
            self.check_alive()
        return found

    def check_alive(self) -> None:
        """Raise FileNotFoundError when the job's cgroup is gone.

        /proc readers call it AFTER reading: if the cgroup is still there, a process missing
        from /proc exited while its job runs on (fewer processes is true); if it is gone,
        the job ended and its processes are missing, not zero.
        """
        if not cgroupfs.exists(self.cgroup):
            raise FileNotFoundError(f"job {self.job_id}: cgroup removed")


def each(
    jobs: Iterable[ScrapedJob], read: Callable[[ScrapedJob], T]
) -> Iterator[tuple[ScrapedJob, T]]:
    """(job, read(job)) for every job still running; a job found ended is marked gone.

    A read raising FileNotFoundError while the job's cgroup still exists (a file missing,
    e.g. a controller not enabled) skips only this reading of the job.
    """
    for job in jobs:
        if job.gone:
            continue
        try:
            value = read(job)
        except cgroupfs.GONE as exc:
            if cgroupfs.exists(job.cgroup):
                log.debug("job %s: %s", job.job_id, exc)
            else:
                log.debug("job %s ended during the scrape", job.job_id)
                job.gone = True
            continue
        yield job, value
