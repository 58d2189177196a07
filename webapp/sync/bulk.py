"""A batch of ended jobs' sources fetched together: one accounting query, one ``sacct -j
a,b,c``, and per time window one PromQL query per metric (usage and queue context) for
all the batch's jobs. The report service built here answers each job's report from
those, and asks the live sources only for what the batch did not cover.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from webapp.model import AccountingJob, JobId, SacctJob, SourceUnavailable
from webapp.report.node_events import AFTER_END
from webapp.report.precedence import timing
from webapp.report.service import ReportService
from webapp.sources.cluster import ClusterSource
from webapp.sources.cluster_bulk import BulkQueue, PrefetchedCluster, Wait
from webapp.sources.ended import EndedJob
from webapp.sources.prefetched import PrefetchedAccounting, PrefetchedSacct
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_bulk import BulkMetrics, JobWindow, PrefetchedMetrics
from webapp.sources.protocols import BulkAccountingReader, BulkSacctReader

log = logging.getLogger(__name__)
BATCH = 1000  # jobs fetched together; the sync's default --limit (200) is one batch

T = TypeVar("T")


def _bulk(what: str, fetch: Callable[[], dict[str, T]]) -> dict[str, T]:
    try:
        return fetch()
    except SourceUnavailable as exc:
        # Each job then asks for itself; an outage shows up there, as a gap or a stop.
        log.warning("bulk %s failed (%s); asking job by job", what, exc.reason)
        return {}


def windows(ids: Sequence[str], acct: Mapping[str, AccountingJob],
            sacct: Mapping[str, SacctJob]) -> list[JobWindow]:
    """Each job's run time and nodes, by the report's own precedence (``timing``)."""
    out = []
    now = datetime.now(UTC)
    for jid in ids:
        a, s = acct.get(jid), sacct.get(jid)
        if a is None and s is None:
            continue
        t = timing(JobId.parse(jid), a, s, now)
        if not t.start or not t.end:
            continue
        out.append(JobWindow(jid, t.start.timestamp(),
                             max(t.end.timestamp(), t.start.timestamp() + 1), t.nodes))
    return out


def prefetch(service: ReportService, jobs: Sequence[EndedJob]) -> ReportService:
    """A report service answering ``jobs`` from bulk-fetched sources."""
    ids = list(dict.fromkeys(j.job_id for j in jobs))
    acct: dict[str, AccountingJob] = {}
    sj: dict[str, SacctJob] = {}
    accounting, sacct = service.accounting, service.sacct
    if isinstance(accounting, BulkAccountingReader):
        # Each job's own record, by the sync's key: an id may name an older job too.
        submitted = {j.job_id: j.submit_time for j in jobs if j.submit_time}
        acct = _bulk("accounting", lambda: accounting.jobs(ids, submitted=submitted))
    if isinstance(sacct, BulkSacctReader):
        sj = _bulk("sacct", lambda: sacct.jobs(ids))
    metrics: Any = service.prometheus
    if isinstance(metrics, PrometheusSource):
        job_windows = windows(ids, acct, sj)
        bulk = BulkMetrics(metrics)
        metrics = PrefetchedMetrics(metrics, _bulk("usage", lambda: bulk.fetch(job_windows)),
                                    bulk.coverages)
    cluster: Any = service.cluster
    if isinstance(cluster, ClusterSource):
        source = cluster
        waits = [Wait(jid, a.partition, a.submit_time.timestamp(), a.start_time.timestamp())
                 for jid, a in acct.items() if a.submit_time and a.start_time]
        cluster = PrefetchedCluster(cluster, _bulk(
            "queue", lambda: BulkQueue(source.prometheus, service.settings.cluster).fetch(waits)))
    # every job's run and the minutes after it (report.node_events.AFTER_END): one query
    runs = [(datetime.fromtimestamp(w.start, UTC), datetime.fromtimestamp(w.end, UTC))
            for w in windows(ids, acct, sj)]
    events_window = (min(a for a, _ in runs), max(b for _, b in runs) + AFTER_END) if runs \
        else None
    return ReportService(service.settings,
                         accounting=PrefetchedAccounting(service.accounting, acct,
                                                         events_window),
                         sacct=PrefetchedSacct(service.sacct, sj),
                         prometheus=metrics, cluster=cluster, archive=service.archive)
