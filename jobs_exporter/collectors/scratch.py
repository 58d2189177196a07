"""Whether a job uses a scratch directory: any process with its cwd or an open file there."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from jobs_exporter import procfs
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each


class ScratchCollector:
    name = "scratch"

    def __init__(self, context: CollectorContext):
        self.context = context
        self.prefixes = procfs.normalize_prefixes(context.settings.scratch)

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        if not self.prefixes:
            return  # no scratch configured: nothing to say
        in_use = GaugeMetricFamily(
            "jobs_scratch_in_use",
            "1 when a process of the job has its working directory or an open file on scratch.",
            labels=["jobid"],
        )
        for job, used in each(jobs, self._uses_scratch):
            in_use.add_metric([job.job_id], 1 if used else 0)
        yield in_use

    def _uses_scratch(self, job: ScrapedJob) -> bool:
        used = procfs.uses_scratch(self.context.settings.proc_root, job.pids, self.prefixes)
        job.check_alive()  # not in use because the job ended is no answer
        return used
