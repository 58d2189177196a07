"""Reports and the archive: what is archived of a report, and the one place a report
whose Prometheus data is gone is replaced by its archived copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from webapp.archive.record import ArchivedJob, downsample_all, report_from_record
from webapp.archive.store import Archive
from webapp.model import ARCHIVE_SOURCE, Gap, JobReport
from webapp.renderers.json import to_dict

log = logging.getLogger(__name__)


def archive_record(report: JobReport, submit_time: int | None = None,
                   end_time: int | None = None) -> ArchivedJob:
    """The archived form of a built report: its JSON summary without full-resolution
    series, plus every plotted series downsampled to at most ~300 points."""
    full = to_dict(report)
    series = full.pop("series")
    small, resolution = downsample_all(series)
    submit = submit_time if submit_time is not None else _ts(report.submit_time)
    end = end_time if end_time is not None else _ts(report.end_time)
    return ArchivedJob(report.cluster, report.job_id, submit, end, report.user, report.state,
                       resolution, full, small, time.time())


def _ts(value: datetime | None) -> int:
    return int(value.timestamp()) if value else 0


def archive_note(resolution: float) -> Gap:
    """The visible note on a report rebuilt from the archive."""
    return Gap(ARCHIVE_SOURCE, f"Usage from the archive, at {resolution:.0f}-second "
               "resolution: Prometheus no longer holds this job's series.")


def from_archive(archived: ArchivedJob) -> JobReport:
    """The report an archived job describes, with the archive's note."""
    return report_from_record(archived.summary, archived.series,
                              archive_note(archived.resolution))


def with_archive_fallback(report: JobReport,
                          open_archive: Callable[[], Archive | None]) -> JobReport:
    """``report`` itself while Prometheus holds the job's series; its archived copy (with a
    note saying so) once it does not; ``report`` again when the job was never archived.
    The archive is opened only when needed."""
    if not report.usage.empty or report.unfinished:
        return report
    submit = _ts(report.submit_time) if report.submit_time else None
    try:
        archive = open_archive()
        if archive is None:
            return report
        archived = archive.get(report.cluster, report.job_id, submit)
    except Exception as exc:  # noqa: BLE001 - an archive outage costs the fallback only
        log.warning("archive unavailable for job %s: %s", report.job_id, exc)
        return report
    return from_archive(archived) if archived is not None else report
