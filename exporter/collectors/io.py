"""Storage I/O of each job, summed over /proc/<pid>/io of its live processes.

Per-process counters leave with their process, so a job's sum can go down when a
child exits; Prometheus' rate() treats that as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from exporter.collectors.context import CollectorContext
from exporter.scrape import ScrapedJob

_FIELDS = (
    (
        "jobs_read_bytes",
        "read_bytes",
        "Bytes the job's live processes caused to be read from storage.",
    ),
    (
        "jobs_write_bytes",
        "write_bytes",
        "Bytes the job's live processes caused to be written to storage.",
    ),
    ("jobs_read_syscalls", "syscr", "Read system calls made by the job's live processes."),
    ("jobs_write_syscalls", "syscw", "Write system calls made by the job's live processes."),
)


class IoCollector:
    name = "io"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        families = [CounterMetricFamily(n, h, labels=["jobid"]) for n, _, h in _FIELDS]
        for job in jobs:
            counters = [p.io for p in job.processes]
            if counters and all(c is None for c in counters):
                continue  # io unreadable (not root): no series rather than zeros
            for family, (_, field, _) in zip(families, _FIELDS, strict=True):
                total = sum(getattr(c, field) for c in counters if c is not None)
                family.add_metric([job.job_id], total)
        yield from families
