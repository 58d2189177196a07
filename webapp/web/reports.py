"""A job's report for the signed-in user: access checked first, then built or reused."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import cast

from cachetools import TLRUCache
from flask import abort, current_app, g

from webapp.model import JobId, JobReport
from webapp.report.service import ReportService
from webapp.web import auth

log = logging.getLogger(__name__)
_service_lock = threading.Lock()
REPORT_TTL = 30.0  # seconds a built report is reused; a page may be this much out of date
# A report with a gap (a source was down) is reused only this long: an outage must not
# outlive itself in the cache, yet a burst of requests does not hammer the failing source.
GAP_TTL = 5.0


class ReportCache:
    """Built reports by job id for REPORT_TTL seconds, so the page, its PDF and a reload
    do not each query the accounting DB, sacct and Prometheus again. Access is still
    checked on every request; failures are never cached, reports with gaps briefly.
    At most ``size`` reports are kept (a TLRUCache: each report's own time to live)."""

    def __init__(self, ttl: float = REPORT_TTL, size: int = 256, gap_ttl: float = GAP_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.gap_ttl = ttl, size, gap_ttl
        self._items: TLRUCache[Hashable, JobReport] = TLRUCache(size, self._expires, timer=clock)
        self._lock = threading.Lock()  # a TLRUCache is not thread-safe

    def _expires(self, _key: Hashable, report: JobReport, now: float) -> float:
        return now + (self.gap_ttl if report.gaps else self.ttl)

    def get(self, job_id: Hashable, build: Callable[[], JobReport]) -> JobReport:
        """The report kept under ``job_id`` (any key: a job id, or with its resolution),
        else ``build()``."""
        with self._lock:
            hit = self._items.get(job_id)
        if hit is not None:
            return hit
        report = build()
        with self._lock:
            self._items[job_id] = report  # one already expired (a TTL of 0) is not kept
        return report


def get_service(cluster: str | None = None) -> ReportService:
    """The report service of ``cluster`` (this deployment's own when None), built on first
    use (so the app starts without a DB); 404 for a cluster the app does not serve."""
    settings = auth.settings()
    if cluster is None or cluster == settings.cluster:
        key = "jobreport.service"
    elif cluster in settings.clusters:
        key = f"jobreport.service.{cluster}"
    else:
        abort(404, description=f"No cluster {cluster} is served here.")
    ext = current_app.extensions
    if ext.get(key) is None:
        with _service_lock:
            if ext.get(key) is None:
                ext[key] = ReportService(settings.for_cluster(cluster or settings.cluster))
    return cast(ReportService, ext[key])


def _deny(canonical: JobId, owner: str | None) -> None:
    log.warning("user %s denied job %s of %s", g.user, canonical, owner)
    abort(403, description=f"Job {canonical} belongs to another user; only its owner, "
                           "its account's coordinators and support staff may see it.")


def may_see(user: str, job_id: JobId | str, cluster: str | None = None) -> bool:
    """Whether ``user`` may see the job: staff, its owner, or a Slurm coordinator of its
    account. One accounting query (JobNotFound: unknown; SourceUnavailable: view down)."""
    if auth.is_staff(user):
        return True
    owner, account = get_service(cluster).holder(job_id)
    return (owner is not None and owner == user) or (
        account is not None and auth.coordinates(user, account))


def authorize(job_id: JobId, cluster: str | None = None) -> None:
    """Refuse (403) a job the user may not see; 404, 503 when the owner is unknown.

    For anybody but staff the owner comes first, from one accounting query, so nobody can
    make the app query Prometheus and sacct for a job they may not see."""
    if not may_see(g.user, job_id, cluster):  # JobNotFound: 404; accounting down: 503
        _deny(job_id, None)


def load_report(job_id: JobId, authorized: bool = False, resolution: str = "plot",
                cluster: str | None = None) -> JobReport:
    """Check the user may see the job (unless ``authorize`` just did), then build its
    report with series at ``resolution`` (400, 404, 403, 503 otherwise). ``cluster``:
    one of several served clusters (ids repeat across them); None for this one's."""
    canonical = job_id
    service = get_service(cluster)
    if not authorized:
        authorize(canonical, cluster)
    key = (cluster or "", canonical, resolution)
    cache: ReportCache = current_app.extensions["jobreport.reports"]
    report = cache.get(
        key, lambda: service.build(canonical, resolution=resolution)
    )
    if not auth.can_view(g.user, report):  # the report's owner agrees with the check above
        _deny(canonical, report.user)
    return report
