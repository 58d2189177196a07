"""CPU time per job (user/system), per core (v1 only), allocated CPUs, throttling (v2)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jobs_exporter import cgroupfs
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class CpuCollector:
    name = "cpu"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        seconds = CounterMetricFamily(
            "jobs_cpu_seconds",
            "CPU time used by all processes of the job, by mode, in seconds.",
            labels=["jobid", "mode"],
        )
        per_core = CounterMetricFamily(
            "jobs_cpu_core_seconds",
            "CPU time used by the job on each core, in seconds (cgroup v1 only).",
            labels=["jobid", "core"],
        )
        cpus = GaugeMetricFamily(
            "jobs_cpus", "Number of CPUs in the job's cpuset on this node.", labels=["jobid"]
        )
        throttled = CounterMetricFamily(
            "jobs_cpu_throttled_seconds",
            "Time the job's tasks were throttled by the CPU bandwidth limit, in seconds.",
            labels=["jobid"],
        )
        read = self.context.cpu_usage = {}  # for the energy collector, which runs later
        for job, usage in each(jobs, lambda j: cgroupfs.read_cpu(j.cgroup)):
            read[job.job_id] = usage
            seconds.add_metric([job.job_id, "user"], usage.user_seconds)
            seconds.add_metric([job.job_id, "system"], usage.system_seconds)
            if usage.cpuset is not None:
                cpus.add_metric([job.job_id], len(usage.cpuset))
            if usage.per_core_seconds is not None:
                # The file lists every possible CPU; keep the job's own and any it ever used.
                allowed = usage.cpuset or frozenset()
                for core, value in usage.per_core_seconds.items():
                    if core in allowed or value > 0:
                        per_core.add_metric([job.job_id, str(core)], value)
            if usage.throttled_seconds is not None:
                throttled.add_metric([job.job_id], usage.throttled_seconds)
        yield from (seconds, per_core, cpus, throttled)
