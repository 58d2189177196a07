"""A user's "my jobs" (and the staff pages of a user's or an account's jobs) as the
database pages it: the archived jobs of the window, one page sorted and cut by the
archive (``job_page.archive_page``), and, on the first page, the jobs the archive cannot
hold yet: those still running and those ended since the sync's last archived job (its
watermark). Those come from the accounting view as the unpaged
list reads them (``ReportService.job_list``), over that short span only, and are left
out once archived, so no job is listed twice and none is missing between two syncs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.lists.job_list import ListQuery, select, top_waste, totals
from webapp.lists.job_page import PER_PAGE, archive_page, archive_waste
from webapp.model import SourceUnavailable
from webapp.report.job_rows import JobRow
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
    recent: list[JobRow]  # page 1 only: running, or ended since its cluster's sync
    synced_until: datetime  # the archive holds the jobs that ended up to here (the
    # oldest of the clusters' watermarks)
    gaps: list[str]


def _rows_complete(archive: Archive, cluster: str, owner: str, name: str, since: int,
                   until: int) -> bool:
    """Every archived job of the window has its row (jobs archived before the sync wrote
    rows would be missing from the pages): the user's own, or the whole window's for an
    account (the archive's records do not name the account)."""
    return archive.rows_complete(cluster, since, until, user=name if owner == "user" else None)


def _one_archive(services: Sequence[ReportService]) -> Archive | None:
    """The archive every service's cluster is synced into, if they share one."""
    if not services or any(s.archive is None for s in services):
        return None
    if len({s.settings.archive_url for s in services}) != 1:
        return None
    return services[0].archive


def paged(services: Sequence[ReportService], name: str, q: ListQuery, now: datetime,
          per_page: int = PER_PAGE, owner: str = "user", recent_on_every_page: bool = False,
          home: str | None = None) -> MyJobs | None:
    """The page ``q.page`` of the jobs of ``owner`` ("user" or "account") ``name`` on the
    services' clusters (one, or several synced into one archive); None when the database
    cannot serve this list (no archive, or not one for all, a cluster not synced yet,
    archived jobs without their row, or a name, findings or sort the archive does not
    index): the caller lists the jobs the unpaged way. ``recent``, the jobs not archived
    yet, on page 1, or on every page when asked (the staff pages rank them too). The
    accounting view of ``home`` failing raises SourceUnavailable (it decides who sees
    what; every cluster's when ``home`` is None), another cluster's is a gap."""
    archive = _one_archive(services)
    if archive is None:
        return None
    clusters = [s.settings.cluster for s in services]
    marks = [m for c in clusters if (m := archive.watermark(c, STREAM)) is not None]
    if len(marks) < len(clusters):
        return None  # a cluster the sync has not written yet
    since, until = int(q.since(now).timestamp()), int(now.timestamp())
    if not all(_rows_complete(archive, c, owner, name, since, until) for c in clusters):
        return None
    found = archive_page(archive, clusters, name, q, now, q.page, per_page, owner)
    if found is None:
        return None
    rows, total = found
    pages = max(1, math.ceil(total / per_page))
    recent: list[JobRow] = []
    gaps: list[str] = []
    if q.page == 1 or recent_on_every_page:
        for service, mark in zip(services, marks, strict=True):
            cluster = service.settings.cluster
            synced = datetime.fromtimestamp(mark, UTC)
            try:
                listed, missing = service.job_list(max(q.since(now), synced - OVERLAP), now,
                                                   **{owner: name})
            except SourceUnavailable as exc:
                if home is None or cluster == home:
                    raise
                listed, missing = [], [exc.reason]
            gaps += [f"cluster {cluster}: {gap}" if len(services) > 1 else gap
                     for gap in missing]
            done = StaffRows(archive.db).archived(cluster, [r.job_id for r in listed])
            recent += [r for r in listed if r.job_id not in done]
        recent = select(recent, q)
    return MyJobs(rows, total, q.page, (q.page - 1) * per_page + 1, pages, recent,
                  datetime.fromtimestamp(min(marks), UTC), gaps)


def waste(services: Sequence[ReportService], name: str, q: ListQuery, now: datetime,
          owner: str, recent: list[JobRow],
          limit: int) -> tuple[dict[str, list[JobRow]], dict[str, float]]:
    """The staff page's top ``limit`` jobs of each kind of waste and each kind's sum over
    the window: the archive's ranking and sums (``job_page.archive_waste``) with the jobs
    not archived yet (``recent``, already filtered) ranked and summed in, by the list's own
    ``top_waste`` and ``totals``: the same tables as ranking every job here."""
    archive = _one_archive(services)
    if archive is None:
        raise ValueError("the staff page's waste needs the archive that paged it")
    top, sums = archive_waste(archive, [s.settings.cluster for s in services], name, q, now,
                              owner, limit)
    live = totals(recent)
    return ({key: top_waste([*rows, *recent], key, limit) for key, rows in top.items()},
            {key: sums[key] + live[key] for key in sums})
