"""The metrics reader of a cluster that has no Prometheus configured.

Another cluster's jobs reuse the same ids: reading them from this deployment's
Prometheus would attach some other job's usage to the report, so there is none.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from webapp.model import JobId, SourceUnavailable, Usage


class NoMetrics:
    """Every question is a gap naming the cluster, never another cluster's series."""

    name = "prometheus"
    scrape_interval = 30.0
    node_label = "instance"
    cluster_matcher = ""  # as PrometheusSource's: a reader of its series may ask
    cluster_label = ""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def _gap(self) -> SourceUnavailable:
        return SourceUnavailable(self.name, f"no Prometheus is configured for cluster "
                                            f"{self.cluster}: usage unknown")

    def usage(self, job_id: JobId | tuple[str, ...], start: datetime, end: datetime,
              nodes: Iterable[str] = (), resolution: str = "plot") -> Usage:
        raise self._gap()

    def vector(self, query: str, time: float | None = None) -> list[tuple[dict[str, str], float]]:
        raise self._gap()
