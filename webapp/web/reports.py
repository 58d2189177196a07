"""A job's report for the signed-in user: access checked first, then built or reused."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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
    checked on every request; failures are never cached, reports with gaps briefly."""

    def __init__(self, ttl: float = REPORT_TTL, size: int = 256, gap_ttl: float = GAP_TTL) -> None:
        self.ttl, self.size, self.gap_ttl = ttl, size, gap_ttl
        self._items: dict[JobId, tuple[float, JobReport]] = {}
        self._lock = threading.Lock()

    def get(self, job_id: JobId, build: Callable[[JobId], JobReport]) -> JobReport:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(job_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        report = build(job_id)
        with self._lock:
            if len(self._items) >= self.size:
                self._items = {k: v for k, v in self._items.items() if v[0] > now}
                while len(self._items) >= self.size:
                    self._items.pop(next(iter(self._items)))
            ttl = self.gap_ttl if report.gaps else self.ttl
            self._items[job_id] = (now + ttl, report)
        return report


def get_service() -> ReportService:
    """The app's report service, built on first use (so the app starts without a DB)."""
    ext = current_app.extensions
    if ext.get("jobreport.service") is None:
        with _service_lock:
            if ext.get("jobreport.service") is None:
                ext["jobreport.service"] = ReportService(auth.settings())
    return ext["jobreport.service"]


def _deny(canonical: JobId, owner: str | None) -> None:
    log.warning("user %s denied job %s of %s", g.user, canonical, owner)
    abort(403, description=f"Job {canonical} belongs to another user; only its owner "
                           "and support staff may see it.")


def authorize(job_id: JobId) -> None:
    """Refuse (403) a job the user may not see; 404, 503 when the owner is unknown.

    For anybody but staff the owner comes first, from one accounting query, so nobody can
    make the app query Prometheus and sacct for a job they may not see."""
    if not auth.is_staff(g.user):
        owner = get_service().owner(job_id)  # JobNotFound: 404; accounting down: 503
        if owner is None or owner != g.user:
            _deny(job_id, owner)


def load_report(job_id: JobId, authorized: bool = False) -> JobReport:
    """Check the user may see the job (unless ``authorize`` just did), then build its
    report (400, 404, 403, 503 otherwise)."""
    canonical = job_id
    service = get_service()
    if not authorized:
        authorize(canonical)
    report = current_app.extensions["jobreport.reports"].get(canonical, service.build)
    if not auth.can_view(g.user, report):  # the report's owner agrees with the check above
        _deny(canonical, report.user)
    return report
