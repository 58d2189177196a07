"""The collectors that run, the throttled sources they read, and SlurmCollector: one
scrape = each source's current snapshot, then each collector timed on its snapshot; a
failing collector is logged and reported as success=0, never fails the scrape.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import Metric

from jobreport_common.constants import ClusterConstants
from slurm_exporter.collectors.gpus import GpusCollector
from slurm_exporter.collectors.jobs import JobsCollector
from slurm_exporter.collectors.nodes import NodesCollector
from slurm_exporter.collectors.scheduler import SchedulerCollector
from slurm_exporter.collectors.shares import SharesCollector
from slurm_exporter.collectors.targets import TargetsCollector
from slurm_exporter.commands import COMMAND_ENV, COMMANDS
from slurm_exporter.families import counter, gauge
from slurm_exporter.runner import run_command
from slurm_exporter.sdiag import parse_sdiag
from slurm_exporter.settings import Settings
from slurm_exporter.sinfo import parse_sinfo
from slurm_exporter.squeue import parse_squeue
from slurm_exporter.sshare import parse_sshare
from slurm_exporter.throttle import ERROR_KINDS, ThrottledSource

log = logging.getLogger(__name__)

PARSERS: Mapping[str, Callable[[str], Any]] = {
    "sinfo": parse_sinfo,
    "squeue": parse_squeue,
    "sshare": parse_sshare,
    "sdiag": parse_sdiag,
}
COLLECTORS = (
    NodesCollector,
    GpusCollector,
    JobsCollector,
    SharesCollector,
    SchedulerCollector,
    TargetsCollector,
)


def build_sources(settings: Settings,
                  monotonic: Callable[[], float] = time.monotonic
                  ) -> dict[str, ThrottledSource[Any]]:
    """One throttled source per enabled command, running it with the exporter's env;
    ``monotonic``: the clock its poll limits are counted on."""
    env = {**os.environ, **COMMAND_ENV}
    sources = {}
    for name in settings.sources:
        argv = list(COMMANDS[name])
        if settings.bin_dir:
            argv[0] = os.path.join(settings.bin_dir, argv[0])

        def fetch(argv: list[str] = argv, parse: Callable[[str], Any] = PARSERS[name]) -> Any:
            return parse(run_command(argv, settings.timeout, env))

        sources[name] = ThrottledSource(name, fetch, settings.poll_limit, monotonic=monotonic)
    return sources


class SlurmCollector:
    """A prometheus_client collector producing every ``slurm_*`` family of one scrape."""

    def __init__(
        self,
        cluster: str,
        sources: Mapping[str, ThrottledSource[Any]],
        constants: ClusterConstants | None = None,
        collectors: tuple[type, ...] = COLLECTORS,
    ):
        self.cluster = cluster
        self.sources = dict(sources)
        self.constants = constants
        self.collectors = [cls() for cls in collectors]

    def describe(self) -> list[Metric]:
        return []  # families vary with the cluster; never run commands at registration

    def collect(self) -> Iterator[Metric]:
        snapshots = {name: source.get() for name, source in self.sources.items()}
        duration = gauge("slurm_exporter_collector_duration_seconds",
                         "Time the collector took in the last scrape, in seconds.",
                         ["collector"])
        success = gauge("slurm_exporter_collector_success",
                        "1 when the collector succeeded in the last scrape, 0 when it failed.",
                        ["collector"])
        for collector in self.collectors:
            data = self.constants if collector.source is None else snapshots.get(
                collector.source)
            if data is None:  # source disabled, failing too long, or no constants
                continue
            start = time.perf_counter()
            try:
                families = list(collector.collect(self.cluster, data))
                ok = 1
            except Exception:
                log.exception("collector %s failed", collector.name)
                families, ok = [], 0
            yield from families
            duration.add_metric([self.cluster, collector.name], time.perf_counter() - start)
            success.add_metric([self.cluster, collector.name], ok)
        yield duration
        yield success
        yield from self._health()

    def _health(self) -> Iterator[Metric]:
        labels = ["source"]
        up = gauge("slurm_up", "1 when the source's last command succeeded; 0 while it "
                   "fails (its last snapshot is served for up to 3 poll limits).", labels)
        took = gauge("slurm_scrape_duration_seconds", "Time the source's last command and "
                     "its parsing took, in seconds.", labels)
        age = gauge("slurm_scrape_snapshot_age_seconds", "Age of the snapshot served for the "
                    "source, in seconds (absent once dropped).", labels)
        last = gauge("slurm_scrape_last_success_timestamp_seconds", "Unix time of the "
                     "source's last successful command.", labels)
        runs = counter("slurm_scrape_runs", "Commands run for the source (at most one per "
                       "poll limit, whatever the number of scrapes).", labels)
        errors = counter("slurm_scrape_errors", "Failed commands of the source, by kind: "
                         "timeout (killed), exit (non-zero status), parse.", ["source", "kind"])
        for name, source in self.sources.items():
            h = source.health
            c = [self.cluster, name]
            up.add_metric(c, 1 if h.up else 0)
            took.add_metric(c, h.duration_seconds)
            if h.snapshot_age_seconds is not None:
                age.add_metric(c, h.snapshot_age_seconds)
            if h.last_success_unix is not None:
                last.add_metric(c, h.last_success_unix)
            runs.add_metric(c, h.runs)
            for kind in ERROR_KINDS:
                errors.add_metric([*c, kind], h.errors[kind])
        yield from (up, took, age, last, runs, errors)
