"""Time each job's threads waited for a CPU and for storage, and how many were busy.

From per-thread ``schedstat`` (and, with delay accounting on, ``stat``), read by
ProcReader; kept monotonic across exited threads by ``WaitTotals`` (jobs_exporter/cpu_wait.py).
Unlike PSI these exist on cgroup v1 too and count task-seconds: four threads waiting
one second each add four.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.cpu_wait import BUSY_SHARE, WaitTotals
from jobs_exporter.scrape import ScrapedJob, each


class WaitCollector:
    name = "waits"

    def __init__(self, context: CollectorContext):
        self.context = context
        self.totals = WaitTotals()  # per-job state between scrapes

    def snapshot(self) -> dict[str, Any]:
        return self.totals.snapshot()

    def restore(self, data: Mapping[str, Any]) -> None:
        self.totals.restore(data)

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        jobs = list(jobs)
        cpu_wait = CounterMetricFamily(
            "jobs_cpu_wait_seconds",
            "Time the job's threads were runnable but waited for a CPU (schedstat run "
            "delay), summed over threads, in seconds.",
            labels=["jobid"],
        )
        io_wait = CounterMetricFamily(
            "jobs_io_wait_seconds",
            "Time the job's threads waited for block I/O (delay accounting), summed over "
            "threads, in seconds; absent while kernel.task_delayacct is off.",
            labels=["jobid"],
        )
        busy = GaugeMetricFamily(
            "jobs_busy_tasks",
            f"Threads of the job on a CPU or waiting for one at least {BUSY_SHARE:.0%} of "
            "the time since the previous scrape.",
            labels=["jobid"],
        )
        now = time.monotonic()
        for job, procs in each(jobs, lambda j: j.processes):
            samples = [p.tasks for p in procs if p.tasks is not None]
            if not samples:
                continue  # no schedstat (or no live process): nothing measured, no zero
            waits = self.totals.update(job.job_id, (t for ts in samples for t in ts), now)
            cpu_wait.add_metric([job.job_id], waits.cpu_wait_seconds)
            if waits.io_wait_seconds is not None:
                io_wait.add_metric([job.job_id], waits.io_wait_seconds)
            if waits.busy_tasks is not None:
                busy.add_metric([job.job_id], waits.busy_tasks)
        self.totals.retain(job.job_id for job in jobs if not job.gone)
        yield from (cpu_wait, io_wait, busy)
