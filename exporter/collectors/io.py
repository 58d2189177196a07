"""Storage I/O of each job, summed over /proc/<pid>/io of its live processes.

A process's counters include its exited threads and the children it reaped, so the sum
holds when a job process reaps a child; it goes down when a counted process exits and
is reaped outside the job (e.g. by slurmstepd), which Prometheus' rate() takes for a
counter reset (exporter/README.md, "I/O counters can go down"). A job without any live
process gets no series: its sum would be a false 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from exporter.collectors.context import CollectorContext
from exporter.scrape import ScrapedJob, each

_FIELDS = (
    (
        "jobs_read_bytes",
        "read_bytes",
        "Bytes the job's live processes and the children they reaped read from storage.",
    ),
    (
        "jobs_write_bytes",
        "write_bytes",
        "Bytes the job's live processes and the children they reaped wrote to storage.",
    ),
    (
        "jobs_read_syscalls",
        "syscr",
        "Read system calls of the job's live processes and the children they reaped.",
    ),
    (
        "jobs_write_syscalls",
        "syscw",
        "Write system calls of the job's live processes and the children they reaped.",
    ),
)


class IoCollector:
    name = "io"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        families = [CounterMetricFamily(n, h, labels=["jobid"]) for n, _, h in _FIELDS]
        for job, procs in each(jobs, lambda j: j.processes):
            counters = [p.io for p in procs]
            if all(c is None for c in counters):
                # No live process (all exited, the cgroup not yet removed): a 0 would be a
                # false counter reset. io unreadable (not root): no series, not zeros.
                continue
            for family, (_, field, _) in zip(families, _FIELDS, strict=True):
                total = sum(getattr(c, field) for c in counters if c is not None)
                family.add_metric([job.job_id], total)
        yield from families
