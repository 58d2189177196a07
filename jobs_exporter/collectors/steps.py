"""Per-step CPU time and memory, labelled ``step``, for jobs with several srun steps.

Cardinality: only jobs with more than one user step get these series (a single-step job
would repeat its job series), and only their srun steps (not batch or extern): a job
running S steps adds 3 x S series (user and system CPU, RSS) while they run. The job-level
series keep no ``step`` label, so sums over a job never count a step twice. A step's
cgroup goes when the step ends; its last sample stays in Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jobs_exporter import cgroupfs
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class StepsCollector:
    name = "steps"

    def __init__(self, context: CollectorContext):
        self.context = context

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        seconds = CounterMetricFamily(
            "jobs_step_cpu_seconds",
            "CPU time used by one srun step of a multi-step job, by mode, in seconds.",
            labels=["jobid", "step", "mode"],
        )
        rss = GaugeMetricFamily(
            "jobs_step_memory_rss_bytes",
            "Anonymous memory of one srun step of a multi-step job, in bytes.",
            labels=["jobid", "step"],
        )
        for job, steps in each(jobs, lambda j: cgroupfs.read_steps(j.cgroup)):
            for step in steps:
                seconds.add_metric([job.job_id, step.step, "user"], step.user_seconds)
                seconds.add_metric([job.job_id, step.step, "system"], step.system_seconds)
                if step.rss is not None:
                    rss.add_metric([job.job_id, step.step], step.rss)
        yield from (seconds, rss)
