"""A user's "my jobs" as the database pages it: the archived jobs of the window, one page
sorted and cut by the archive (``job_page.archive_page``), and, on the first page, the
jobs the archive cannot hold yet: those still running and those ended since the sync's
last archived job (its watermark). Those come from the accounting view as the unpaged
list reads them (``ReportService.job_list``), over that short span only, and are left
out once archived, so no job is listed twice and none is missing between two syncs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from webapp.archive.staff_rows import StaffRows
from webapp.report.job_list import JobRow, ListQuery, select
from webapp.report.job_page import PER_PAGE, archive_page
from webapp.report.service import ReportService

STREAM = "archive"  # the sync stream whose watermark says what is archived
# A job archived in the same second as the watermark is in the archive: one second
# earlier keeps a job that ended at that second but was not yet processed.
OVERLAP = timedelta(seconds=1)


@dataclass(frozen=True)
class MyJobs:
    """One page: the archived rows, and on page 1 the rows not archived yet."""

    rows: list[JobRow]  # the archived page, in the asked order
    total: int  # archived jobs of the window (the state filter applied)
    page: int
    first: int  # the number of the page's first row among ``total``, from 1
    pages: int  # at least 1
    recent: list[JobRow]  # page 1 only: running, or ended since ``synced_until``
    synced_until: datetime  # the archive holds the jobs that ended up to here
    gaps: list[str]


def paged(service: ReportService, user: str, q: ListQuery, now: datetime,
          per_page: int = PER_PAGE) -> MyJobs | None:
    """The page ``q.page`` of ``user``'s jobs on the service's cluster; None when the
    database cannot serve this list (no archive, no sync yet, archived jobs without their
    row, or a name, findings or sort the archive does not index): the caller lists the
    jobs the unpaged way."""
    archive = service.archive
    if archive is None:
        return None
    cluster = service.settings.cluster
    mark = archive.watermark(cluster, STREAM)
    if mark is None:
        return None
    # Jobs archived before the sync wrote staff rows would be missing from the page.
    since, until = int(q.since(now).timestamp()), int(now.timestamp())
    if StaffRows(archive.db).user_count(cluster, user, since, until) < \
            archive.user_count(cluster, user, since, until):
        return None
    found = archive_page(archive, cluster, user, q, now, q.page, per_page)
    if found is None:
        return None
    rows, total = found
    pages = max(1, math.ceil(total / per_page))
    synced = datetime.fromtimestamp(mark, UTC)
    recent: list[JobRow] = []
    gaps: list[str] = []
    if q.page == 1:
        # Raises SourceUnavailable as the unpaged list does: the view decides who sees what.
        listed, gaps = service.job_list(max(q.since(now), synced - OVERLAP), now, user=user)
        done = StaffRows(archive.db).archived(cluster, [r.job_id for r in listed])
        recent = select([r for r in listed if r.job_id not in done], q)
    return MyJobs(rows, total, q.page, (q.page - 1) * per_page + 1, pages, recent, synced,
                  gaps)
