"""Where the staff report reads its window: the archive when it holds the window (synced
to its end, archived from its start, every job with its row), else sacct; the report
says which."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from tests.helpers import scale_archive
from tests.helpers.reports import sample_report
from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.report.archived import archive_record
from webapp.settings import Settings
from webapp.staff.archived import staff_row
from webapp.staff.render import heading, render_json, when
from webapp.staff.service import (
    ARCHIVE_SLACK,
    DAY,
    archive_holds,
    staff_report,
)

CLUSTER = scale_archive.CLUSTER
UNTIL = int(time.time()) // 60 * 60
SINCE = UNTIL - 7 * DAY


def _fill(path: str, rows_for_all: bool = True) -> list[dict]:
    """A week of generated jobs: each archived (its record) and, unless told, its row."""
    rows = [staff_row(CLUSTER, j)
            for j in scale_archive.staff_jobs(400, 4, until=UNTIL, heavy=0)]  # every 25 min
    record = archive_record(sample_report("1"))
    with Archive(path) as a, a.db.transaction():
        for r in rows:
            a.put(dataclasses.replace(record, cluster=CLUSTER, job_id=r["job_id"],
                                      submit_time=r["submit_time"], end_time=r["end_time"]))
        StaffRows(a.db).put(rows if rows_for_all else rows[:-1])
    return rows


def test_the_archive_holds_a_window_it_synced_from_its_start_to_its_end(tmp_path):
    path = str(tmp_path / "archive.sqlite")
    jobs = _fill(path)
    with Archive(path) as a:
        assert archive_holds(a, CLUSTER, SINCE, UNTIL) is None  # never synced
        a.advance(CLUSTER, "archive", UNTIL - 120)
        assert archive_holds(a, CLUSTER, SINCE, UNTIL) == UNTIL - 120
        # A window reaching back before the oldest archived job: sacct's.
        assert archive_holds(a, CLUSTER, SINCE - 2 * ARCHIVE_SLACK, UNTIL) is None
        assert len(jobs) == a.ended_count(CLUSTER, int(SINCE), UNTIL)


def test_a_sync_an_hour_behind_or_rows_missing_leave_the_window_to_sacct(tmp_path):
    late, unrecorded = str(tmp_path / "late.sqlite"), str(tmp_path / "unrecorded.sqlite")
    _fill(late)
    _fill(unrecorded, rows_for_all=False)
    with Archive(late) as a:
        a.advance(CLUSTER, "archive", int(UNTIL - 2 * ARCHIVE_SLACK))
        assert archive_holds(a, CLUSTER, SINCE, UNTIL) is None
        # An older window it does hold to its end.
        assert archive_holds(a, CLUSTER, SINCE, UNTIL - 2 * ARCHIVE_SLACK) is not None
    with Archive(unrecorded) as a:
        a.advance(CLUSTER, "archive", UNTIL)
        assert archive_holds(a, CLUSTER, SINCE, UNTIL) is None  # `staff-report --record`


def test_the_default_report_reads_the_archive_that_holds_it_and_says_so(tmp_path):
    path = str(tmp_path / "archive.sqlite")
    jobs = _fill(path)
    with Archive(path) as a:
        a.advance(CLUSTER, "archive", UNTIL - 60)
    settings = Settings(cluster=CLUSTER, archive_url=path, outbox=str(tmp_path / "outbox"),
                        sacct="/nonexistent/sacct")  # sacct is never asked
    report = staff_report(settings, days=7, until=UNTIL)
    assert report.source == "archive" and report.archived_until == UNTIL - 60
    assert report.jobs == len(jobs)
    assert heading(report).endswith(f"(from the archive, jobs archived up to {when(UNTIL - 60)})")
    doc = json.loads(render_json(report))
    assert (doc["source"], doc["archived_until"]) == ("archive", UNTIL - 60)
    with pytest.raises(Exception, match="sacct"):  # told to read sacct: it does
        staff_report(settings, days=7, until=UNTIL, from_archive=False)
