"""Pressure stall time per job and resource (cgroup v2 PSI); nothing on v1."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from jobs_exporter import cgroupfs
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class PressureCollector:
    name = "pressure"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        waiting = CounterMetricFamily(
            "jobs_pressure_waiting_seconds",
            "Time some of the job's tasks waited for a resource (PSI some), in seconds.",
            labels=["jobid", "resource"],
        )
        for job, pressure in each(jobs, lambda j: cgroupfs.read_pressure(j.cgroup)):
            for resource, value in (pressure or {}).items():
                waiting.add_metric([job.job_id, resource], value)
        yield waiting
