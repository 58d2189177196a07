"""The staff report from settings: the window's jobs (sacct, Prometheus) and the alert
record, for the command line, the web page and the staff email alike."""

from __future__ import annotations

import dataclasses
import time

from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sources.from_settings import prometheus_from
from webapp.sources.prometheus import cluster_matcher
from webapp.staff.archived import build_staff_report_sql, staff_row
from webapp.staff.build import build_staff_report
from webapp.staff.data import StaffDataSource
from webapp.staff.hardware import hardware_table
from webapp.staff.tables import StaffReport
from webapp.watch_records import AlertLog

DAY = 86400.0
# The archive answers a window it holds: its sync this close to the window's end (the
# timer runs every minute; a late hour is left to sacct) and its oldest job this close to
# the window's start (an archive younger than the window does not hold it all).
ARCHIVE_SLACK = 3600.0


def _source(settings: Settings) -> StaffDataSource:
    # A window of every user's jobs: slower answers than one report's are normal.
    return StaffDataSource(settings.sacct, settings.cluster,
                           prometheus_from(settings, min_timeout=30.0),
                           timeout=max(settings.sacct_timeout, 120.0))


def record_window(settings: Settings, since: float, until: float,
                  source: StaffDataSource | None = None) -> int:
    """Store the staff figures of the jobs that ended in [since, until] in the archive
    (one sacct call and the bulk queries, as for a report); how many jobs. Jobs already
    stored are kept (``jobreport sync`` writes each job's row as it archives it: this
    fills in jobs archived before it did)."""
    jobs = (source or _source(settings)).jobs(since, until)
    archive = Archive(settings.archive_url)
    try:
        with archive.db.transaction():
            StaffRows(archive.db).put(staff_row(settings.cluster, j) for j in jobs)
    finally:
        archive.close()
    return len(jobs)


def archive_holds(archive: Archive, cluster: str, since: float, until: float) -> float | None:
    """The sync's watermark when the archive holds the window [since, until]: archived up
    to its end (within ``ARCHIVE_SLACK``, or to now), from its start, every archived job
    of it with its row; else None."""
    mark, first = archive.watermark(cluster, "archive"), archive.first_end(cluster)
    if mark is None or first is None or first > since + ARCHIVE_SLACK:
        return None
    if mark < min(until, time.time()) - ARCHIVE_SLACK:
        return None
    if not archive.rows_complete(cluster, int(since), int(until)):
        return None
    return float(mark)


def staff_report(settings: Settings, *, days: float | None = None,
                 until: float | None = None, from_archive: bool | None = None) -> StaffReport:
    """Raises SourceUnavailable (sacct, Prometheus).
    ``from_archive``: the jobs recorded in the archive (``record_window``), summed and
    ranked by the database: a week of a large site without reading it into memory; False:
    sacct's window read into memory; None (the default): the archive when it holds the
    window (``archive_holds``), else sacct."""
    cfg = settings.staff_report
    until = time.time() if until is None else until
    since = until - (cfg.days if days is None else days) * DAY
    log = AlertLog(settings.outbox)
    try:
        alerts = log.per_user(until - cfg.notice_days * DAY)
    finally:
        log.close()
    if from_archive is not False and settings.archive_url:
        archive = Archive(settings.archive_url)
        try:
            mark = archive_holds(archive, settings.cluster, since, until)
            if from_archive or mark is not None:
                report = build_staff_report_sql(StaffRows(archive.db), settings.cluster,
                                                since, until, cfg, settings.thresholds,
                                                alerts)
                return with_hardware(dataclasses.replace(
                    report, source="archive", archived_until=(
                        mark if mark is not None else archive.watermark(settings.cluster,
                                                                        "archive"))),
                    settings, since, until)
        finally:
            archive.close()
    jobs = _source(settings).jobs(since, until)
    return with_hardware(build_staff_report(settings.cluster, jobs, since, until, cfg,
                                            settings.thresholds, alerts),
                         settings, since, until)


def with_hardware(report: StaffReport, settings: Settings, since: float,
                  until: float) -> StaffReport:
    """The report with its GPU and node faults table (Prometheus and the node events)."""
    prometheus = prometheus_from(settings, min_timeout=30.0)
    accounting = AccountingSource(settings.db_url, settings.cluster) if settings.db_url else None
    table = hardware_table(prometheus, accounting, settings.prometheus_node_label or "instance",
                           since, until,
                           cluster_matcher(prometheus.cluster_label, prometheus.cluster))
    return dataclasses.replace(report, tables=(*report.tables, table))
