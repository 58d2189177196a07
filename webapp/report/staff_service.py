"""The staff report from settings: the window's jobs (sacct, Prometheus) and the alert
record, for the command line, the web page and the staff email alike."""

from __future__ import annotations

import time

from webapp.archive.alerts import AlertLog
from webapp.report.staff import StaffReport
from webapp.report.staff_build import build_staff_report
from webapp.settings import Settings
from webapp.sources.from_settings import prometheus_from
from webapp.sources.staff_data import StaffDataSource

DAY = 86400.0


def staff_report(settings: Settings, *, days: float | None = None,
                 until: float | None = None) -> StaffReport:
    """Raises SourceUnavailable (sacct, Prometheus)."""
    cfg = settings.staff_report
    until = time.time() if until is None else until
    since = until - (cfg.days if days is None else days) * DAY
    # A window of every user's jobs: slower answers than one report's are normal.
    source = StaffDataSource(settings.sacct, settings.cluster,
                             prometheus_from(settings, min_timeout=30.0),
                             timeout=max(settings.sacct_timeout, 120.0))
    jobs = source.jobs(since, until)
    log = AlertLog(settings.outbox)
    try:
        alerts = log.per_user(until - cfg.notice_days * DAY)
    finally:
        log.close()
    return build_staff_report(settings.cluster, jobs, since, until, cfg, settings.thresholds,
                              alerts)
