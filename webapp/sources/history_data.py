"""A user's past jobs in bulk: one ``sacct`` call for the window and three PromQL queries
per 200 jobs (memory peak and cgroup limit per node, GPUs busy: from the source
JOBREPORT_GPU_METRICS chose, ``gpu_job_queries``), never a query per job.

The memory peak per node is what the job's cgroup held there (anonymous + shared memory,
the figure ``webapp.report.peak`` takes from Prometheus for a single report, here
bounded from above: see PEAK_QUERY); the caller joins it with sacct's estimate by the
same rule.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from webapp.model import SacctJob, SourceUnavailable
from webapp.sources.gpu_job_queries import busy_gpus_per_job, duration
from webapp.sources.gpu_metrics import JOBS, GpuMetrics
from webapp.sources.no_metrics import NoMetrics
from webapp.sources.prometheus import PrometheusSource, matchers
from webapp.sources.prometheus_bulk import id_selector
from webapp.sources.sacct import FIELDS, SacctSource, parse_sacct
from webapp.sources.sacct_records import delimiter_argv, glue_column, split_records

log = logging.getLogger(__name__)

# The single report's columns, plus Submit last (no free text after it: safe to split).
HISTORY_FIELDS = (*FIELDS, "Submit")
CHUNK = 200  # job ids per PromQL regex
# What each job held per node (webapp.report.peak: anonymous + shared memory), bounded
# from above by the largest anonymous sample plus the largest shared one: their sum per
# sample would need a subquery at scrape resolution over the whole window. Shared memory
# counts as 0 where the exporter gave none.
PEAK_QUERY = (
    "max by (jobid, {node}) (max_over_time(jobs_memory_rss_bytes{{{sel}}}[{w}s]))"
    " + (max by (jobid, {node}) (max_over_time(jobs_memory_shmem_bytes{{{sel}}}[{w}s]))"
    " or 0 * max by (jobid, {node}) (max_over_time(jobs_memory_rss_bytes{{{sel}}}[{w}s])))")
# Each job's cgroup memory limit per node: what its request there was, in proportion
# (``report.precedence.node_requests``: ``--mem-per-cpu`` with tasks spread unevenly).
LIMIT_QUERY = "max by (jobid, {node}) (max_over_time(jobs_memory_limit_bytes{{{sel}}}[{w}s]))"
# Per job, the GPUs whose mean utilization reached ``idle`` (0 when it had GPU series
# but none busy; absent when it had none), from the source JOBREPORT_GPU_METRICS chose:
# ``gpu_job_queries.busy_gpus_per_job`` (jobs-exporter's: JOBS_BUSY, as always).


def _local(when: datetime) -> str:
    """sacct reads -S/-E in the local zone (it prints Unix seconds but does not parse them)."""
    return when.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def history_argv(sacct: str, cluster: str | None, user: str | None, name: str | None,
                 since: datetime, until: datetime, delimiter: str) -> list[str]:
    """Allocations and steps of the jobs of ``user`` (every user's when None) named
    ``name`` (any name when None) that ran or waited in [since, until]."""
    argv = [sacct, *delimiter_argv(delimiter), "--format", ",".join(HISTORY_FIELDS),
            "--starttime", _local(since), "--endtime", _local(until)]
    argv += ["--user", user] if user else ["--allusers"]
    if name and "," not in name:  # sacct splits --name at commas; then filter here only
        argv += ["--name", name]
    if cluster:
        argv += ["--clusters", cluster]
    return argv


def parse_submits(text: str, fields: Sequence[str], delimiter: str) -> dict[str, float]:
    """JobID -> Submit (Unix seconds) from the allocation lines of sacct's output in
    ``fields`` (JobID first, Submit last), such as ``history_argv``'s."""
    out: dict[str, float] = {}
    for p in split_records(text, len(fields), delimiter, glue_column(fields)):
        job_id, submit = p[0], p[-1]
        if job_id and "." not in job_id and submit.isdigit():
            out[job_id] = float(submit)
    return out


@dataclass(frozen=True)
class PastJob:
    """A past job as sacct showed it, with Prometheus' figures when it has them."""

    sacct: SacctJob
    submit: float | None
    rss_peak_per_node: dict[str, float] = field(default_factory=dict)
    gpus_busy: int | None = None
    memory_limit_per_node: dict[str, float] = field(default_factory=dict)


class HistorySource:
    """sacct + Prometheus for one user's jobs over a window (runner injectable via sacct)."""

    def __init__(self, sacct: SacctSource, prometheus: PrometheusSource | NoMetrics | None,
                 gpu_idle: float = 0.01) -> None:
        self.sacct, self.p, self.gpu_idle = sacct, prometheus, gpu_idle

    def jobs(self, user: str | None, name: str | None, since: datetime,
             until: datetime) -> list[PastJob]:
        """Raises SourceUnavailable when sacct fails; without Prometheus (or when it
        fails) the jobs keep sacct's figures only."""
        d = self.sacct.delimiter()
        text = self.sacct.run(history_argv(self.sacct.sacct_path, self.sacct.cluster,
                                           user, name, since, until, d))
        submits = parse_submits(text, HISTORY_FIELDS, d)
        found = [j for j in parse_sacct(text, HISTORY_FIELDS, delimiter=d)
                 if "[" not in j.job_id and (name is None or j.job_name == name)]
        try:
            peaks, busy, limits = self._prometheus(found, until)
        except SourceUnavailable as exc:
            log.warning("history without Prometheus' figures: %s", exc.reason)
            peaks, busy, limits = {}, {}, {}
        return [PastJob(j, submits.get(j.job_id), peaks.get(j.raw_id or j.job_id, {}),
                        busy.get(j.raw_id or j.job_id), limits.get(j.raw_id or j.job_id, {}))
                for j in found]

    def _prometheus(self, jobs: Sequence[SacctJob], until: datetime
                    ) -> tuple[dict[str, dict[str, float]], dict[str, int],
                               dict[str, dict[str, float]]]:
        peaks: dict[str, dict[str, float]] = {}
        busy: dict[str, int] = {}
        limits: dict[str, dict[str, float]] = {}
        started = [j for j in jobs if j.start_time]
        if self.p is None or not started:
            return peaks, busy, limits
        node = self.p.node_label or "instance"
        gm: GpuMetrics = getattr(self.p, "gpu_metrics", JOBS)
        step = duration(self.p.scrape_interval)
        first = min(t.timestamp() for j in started if (t := j.start_time))
        w = max(1, math.ceil(until.timestamp() - first))
        for i in range(0, len(started), CHUNK):
            digits = sorted(_digits(started[i:i + CHUNK]))
            if not digits:
                continue
            ids = "|".join(digits)
            # ids are digits (JobIDRaw): nothing to escape
            sel = matchers(f'jobid=~"{ids}"', self.p.cluster_matcher)
            for labels, value in self.p.vector(
                    PEAK_QUERY.format(node=node, sel=sel, w=w), until.timestamp()):
                peaks.setdefault(labels.get("jobid", ""), {})[labels.get(node, "")] = value
            for labels, value in self.p.vector(
                    LIMIT_QUERY.format(node=node, sel=sel, w=w), until.timestamp()):
                limits.setdefault(labels.get("jobid", ""), {})[labels.get(node, "")] = value
            if any(j.gpus for j in started[i:i + CHUNK]):
                # a GPU exporter's series: the same ids on its own job label
                gsel = sel if gm is JOBS else id_selector(
                    digits, self.p.cluster_label, self.p.cluster, gm.job_label)
                for labels, value in self.p.vector(busy_gpus_per_job(
                        gm, gsel, node, f"{w}s", step, self.gpu_idle), until.timestamp()):
                    busy[labels.get("jobid", "")] = int(value)
        return peaks, busy, limits


def _digits(jobs: Sequence[SacctJob]) -> set[str]:
    """The numeric ids among the jobs' own ids: what the exporter labels series with."""
    return {i for j in jobs if (i := j.raw_id or j.job_id).isdigit()}
