"""Memory of each job from its cgroup: anonymous memory, page cache and the shared memory
in it, usage, peak, limit, v2 events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jobs_exporter import cgroupfs
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class MemoryCollector:
    name = "memory"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        def gauge(name: str, help_text: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, help_text, labels=["jobid"])

        rss = gauge(
            "jobs_memory_rss_bytes",
            "Anonymous memory of the job (heap, stacks; v1 total_rss, v2 anon), in bytes.",
        )
        cache = gauge(
            "jobs_memory_cache_bytes",
            "Page cache charged to the job, including its shared memory, in bytes.",
        )
        # Files in /dev/shm or another tmpfs and shared anonymous mappings: page cache the
        # kernel cannot drop (only swap, which compute nodes seldom have), so it counts
        # against the limit as anonymous memory does; sacct's MaxRSS leaves it out.
        shmem = gauge(
            "jobs_memory_shmem_bytes",
            "Shared memory charged to the job (tmpfs and /dev/shm files, shared anonymous "
            "mappings; v1 total_shmem, v2 shmem), part of the page cache, in bytes.",
        )
        mapped = gauge(
            "jobs_memory_mapped_file_bytes",
            "Page cache mapped into the job's processes (v1 total_mapped_file, v2 "
            "file_mapped), in bytes.",
        )
        usage = gauge(
            "jobs_memory_usage_bytes", "Memory charged to the job including page cache, in bytes."
        )
        max_usage = gauge(
            "jobs_memory_max_usage_bytes",
            "Peak memory charged to the job including page cache, in bytes.",
        )
        limit = gauge("jobs_memory_limit_bytes", "Memory limit of the job's cgroup, in bytes.")
        events = CounterMetricFamily(
            "jobs_memory_events",
            "Memory events of the job's cgroup (oom, oom_kill, max, high; cgroup v2 only).",
            labels=["jobid", "event"],
        )
        read = self.context.memory_usage = {}  # for the energy collector, which runs later
        for job, mem in each(jobs, lambda j: cgroupfs.read_memory(j.cgroup)):
            read[job.job_id] = mem
            labels = [job.job_id]
            rss.add_metric(labels, mem.rss)
            cache.add_metric(labels, mem.cache)
            if mem.shmem is not None:  # a kernel without the line: no series, not 0
                shmem.add_metric(labels, mem.shmem)
            if mem.mapped_file is not None:
                mapped.add_metric(labels, mem.mapped_file)
            usage.add_metric(labels, mem.usage)
            if mem.max_usage is not None:
                max_usage.add_metric(labels, mem.max_usage)
            if mem.limit is not None:  # unlimited: no series rather than a fake number
                limit.add_metric(labels, mem.limit)
            for event, count in (mem.events or {}).items():
                events.add_metric([job.job_id, event], count)
        yield from (rss, cache, shmem, mapped, usage, max_usage, limit, events)
