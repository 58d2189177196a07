"""One scrape's view of the node: the jobs found, each with its processes read once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import TypeVar

from exporter import cgroupfs, procfs

log = logging.getLogger(__name__)
T = TypeVar("T")


class ScrapedJob:
    """A discovered job plus its /proc samples, read lazily and at most once per scrape."""

    def __init__(self, cgroup: cgroupfs.Job, procs: procfs.ProcReader):
        self.cgroup = cgroup
        self._procs = procs

    @property
    def job_id(self) -> str:
        return self.cgroup.job_id

    @property
    def pids(self) -> tuple[int, ...]:
        return self.cgroup.pids

    @cached_property
    def processes(self) -> list[procfs.ProcessSample]:
        """Samples of the job's live processes; exited ones are left out."""
        samples = (self._procs.read(pid) for pid in self.cgroup.pids)
        return [s for s in samples if s is not None]


def each(
    jobs: Iterable[ScrapedJob], read: Callable[[ScrapedJob], T]
) -> Iterator[tuple[ScrapedJob, T]]:
    """(job, read(job)) for every job whose cgroup still exists; ended jobs are skipped."""
    for job in jobs:
        try:
            value = read(job)
        except cgroupfs.GONE:
            log.debug("job %s ended during the scrape", job.job_id)
            continue
        yield job, value
