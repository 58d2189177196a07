"""The staff report from settings: the window's jobs (sacct, Prometheus) and the alert
record, for the command line, the web page and the staff email alike."""

from __future__ import annotations

import time

from webapp.archive.alerts import AlertLog
from webapp.report.staff import StaffReport
from webapp.report.staff_build import build_staff_report
from webapp.report.staff_config import StaffConfig
from webapp.settings import Settings
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_http import make_session
from webapp.sources.staff_data import StaffDataSource

DAY = 86400.0


def prometheus_from(settings: Settings) -> PrometheusSource:
    return PrometheusSource(
        settings.prometheus_url, timeout=max(settings.prometheus_timeout, 30.0),
        scrape_interval=settings.scrape_interval, node_label=settings.prometheus_node_label,
        session=make_session(user=settings.prometheus_user,
                             password_file=settings.prometheus_password_file,
                             token_file=settings.prometheus_token_file,
                             ca_bundle=settings.prometheus_ca_bundle,
                             client_cert=settings.prometheus_client_cert,
                             client_key=settings.prometheus_client_key))


def staff_report(settings: Settings, *, days: float | None = None,
                 until: float | None = None) -> StaffReport:
    """Raises SourceUnavailable (sacct, Prometheus) and ValueError (a bad settings block)."""
    cfg = StaffConfig.parse(settings.staff_report)
    until = time.time() if until is None else until
    since = until - (cfg.days if days is None else days) * DAY
    source = StaffDataSource(settings.sacct, settings.cluster, prometheus_from(settings),
                             timeout=max(settings.sacct_timeout, 120.0))
    jobs = source.jobs(since, until)
    log = AlertLog(settings.outbox)
    try:
        alerts = log.per_user(until - cfg.notice_days * DAY)
    finally:
        log.close()
    return build_staff_report(settings.cluster, jobs, since, until, cfg, alerts)
