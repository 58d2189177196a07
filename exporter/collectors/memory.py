"""Memory of each job from its cgroup: RSS, page cache, usage, peak, limit, v2 events."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import cgroupfs
from exporter.collectors.context import CollectorContext
from exporter.scrape import ScrapedJob, each


class MemoryCollector:
    name = "memory"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        def gauge(name: str, help_text: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, help_text, labels=["jobid"])

        rss = gauge(
            "jobs_memory_rss_bytes",
            "Anonymous memory of the job (v1 total_rss, what sacct calls MaxRSS; v2 anon).",
        )
        cache = gauge("jobs_memory_cache_bytes", "Page cache charged to the job, in bytes.")
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
            usage.add_metric(labels, mem.usage)
            if mem.max_usage is not None:
                max_usage.add_metric(labels, mem.max_usage)
            if mem.limit is not None:  # unlimited: no series rather than a fake number
                limit.add_metric(labels, mem.limit)
            for event, count in (mem.events or {}).items():
                events.add_metric([job.job_id, event], count)
        yield from (rss, cache, usage, max_usage, limit, events)
