"""Processes, threads and open files of each job, from /proc of the job's PIDs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class ProcessesCollector:
    name = "processes"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        processes = GaugeMetricFamily(
            "jobs_processes", "Number of processes in the job's cgroups.", labels=["jobid"]
        )
        threads = GaugeMetricFamily(
            "jobs_threads", "Number of threads of the job's processes.", labels=["jobid"]
        )
        open_files = GaugeMetricFamily(
            "jobs_open_files",
            "Number of file descriptors the job's processes hold open.",
            labels=["jobid"],
        )
        ratio = GaugeMetricFamily(
            "jobs_open_files_limit_ratio",
            "Highest ratio of open files to the soft open-files limit over the job's processes.",
            labels=["jobid"],
        )
        for job, procs in each(jobs, lambda j: j.processes):
            labels = [job.job_id]
            processes.add_metric(labels, len(procs))
            threads.add_metric(labels, sum(p.threads for p in procs))
            fds = [p.open_files for p in procs if p.open_files is not None]
            if len(fds) == len(procs):  # unreadable fd dirs (not root): no partial sum
                open_files.add_metric(labels, sum(fds))
            ratios = [
                p.open_files / p.open_files_limit
                for p in procs
                if p.open_files is not None and p.open_files_limit  # unlimited or 0: skip
            ]
            if ratios:
                ratio.add_metric(labels, max(ratios))
        yield from (processes, threads, open_files, ratio)
