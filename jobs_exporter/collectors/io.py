"""Storage I/O of each job from /proc/<pid>/io of its processes, kept monotonic.

A process's counters include its exited threads and the children it reaped. The live
sum alone goes down when a counted process is reaped outside the job (e.g. by
slurmstepd); ``IoTotals`` keeps, between scrapes, the last counters of such processes and
never reports less than before (jobs_exporter/io_totals.py, jobs_exporter/README.md "I/O
counters"). A job with no live process and no earlier reading gets no series: its sum
would be a false 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from prometheus_client.core import CounterMetricFamily, Metric

from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.io_totals import Counted, IoTotals
from jobs_exporter.scrape import ScrapedJob, each

_FIELDS = (
    (
        "jobs_read_bytes",
        "read_bytes",
        "Bytes the job's processes, exited ones included, read from storage.",
    ),
    (
        "jobs_write_bytes",
        "write_bytes",
        "Bytes the job's processes, exited ones included, wrote to storage.",
    ),
    (
        "jobs_read_syscalls",
        "syscr",
        "Read system calls of the job's processes, exited ones included.",
    ),
    (
        "jobs_write_syscalls",
        "syscw",
        "Write system calls of the job's processes, exited ones included.",
    ),
)


class IoCollector:
    name = "io"

    def __init__(self, context: CollectorContext):
        self.context = context
        self.totals = IoTotals()  # per-job state between scrapes

    def snapshot(self) -> dict[str, Any]:
        return self.totals.snapshot()

    def restore(self, data: Mapping[str, Any]) -> None:
        self.totals.restore(data)

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        jobs = list(jobs)
        families = [CounterMetricFamily(n, h, labels=["jobid"]) for n, _, h in _FIELDS]
        for job, procs in each(jobs, lambda j: j.processes):
            # io unreadable (not root): the process is not counted, as if outside the job.
            # (A cast: the type checker does not narrow ``p.io`` inside the list.)
            counted = cast(list[Counted], [p for p in procs if p.io is not None])
            totals = self.totals.update(job.job_id, counted)
            if totals is None:
                # No live process and no earlier reading (all exited, the cgroup not yet
                # removed; or io unreadable): a 0 would be a false counter reset.
                continue
            for family, (_, field, _) in zip(families, _FIELDS, strict=True):
                family.add_metric([job.job_id], getattr(totals, field))
        # Forget jobs that ended (gone now, or no longer discovered).
        self.totals.retain(job.job_id for job in jobs if not job.gone)
        yield from families
