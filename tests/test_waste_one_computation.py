"""One waste computation (``webapp.unused``): a two-node job's unused memory is the same
figure on its report page, in the job list, in the weekly digest and in the staff report.

The job is real: hb-jobinfo's 8168940 (fixtures/sacct, see SOURCES.md), 2 nodes,
``--mem`` 10G per node (20G for the job), step 0's 4 tasks holding up to 2,102,304 KiB
each, 2 per node, for 6 min 52 s.
"""

from __future__ import annotations

import pytest

from tests.test_detectors import HB, report_for, sacct_job
from webapp.archive.store import Archive
from webapp.archive.week_sums import build_digest
from webapp.report.archived import archive_record
from webapp.report.job_rows import from_sacct, row_from_report
from webapp.report.waste import compute_waste
from webapp.staff.build import memory_unused
from webapp.staff.data import staff_job
from webapp.thresholds import StaffConfig
from webapp.unused import GIB, Held, unused

JOB = "8168940"
KIB = 1024
# The documented formula, by hand: (request per node - busiest node's peak) x nodes x hours.
PEAK = 2102304 * KIB * 2  # MaxRSS x 2 tasks on the node
WANT = (10 * GIB - PEAK) * 2 / GIB * (6 * 60 + 52) / 3600


@pytest.fixture(scope="module")
def report():
    r = report_for(HB, JOB)
    assert len(r.nodes) == 2 and r.memory_requested_bytes == 20 * GIB
    return r


def page(report) -> float:
    (item,) = [i for i in compute_waste(report).items if i.resource == "memory"]
    assert item.unit == "GiB-hours"
    return item.unused


def job_list(report) -> tuple[float, float]:
    """The list's row from the report itself, and the row sacct alone gives."""
    row = row_from_report(report)
    return row.memory_gib_hours_unused, from_sacct(row, sacct_job(HB, JOB), None,
                                                  None).memory_gib_hours_unused


def digest(report, tmp_path) -> float:
    """Through the archive and back, as the weekly digest reads it."""
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        archive.put(archive_record(report, submit_time=1, end_time=100))
        jobs = list(archive.jobs(report.cluster))
    d = build_digest(report.cluster, report.user, 0, 200, jobs)
    return d.memory_gib_hours


def staff(report) -> float:
    table = memory_unused([staff_job(sacct_job(HB, JOB), JOB, None)], StaffConfig())
    (row,) = table.rows
    return row.values["gib_hours_unused"]


def test_a_two_node_jobs_unused_memory_is_one_figure_everywhere(report, tmp_path):
    want = page(report)
    assert want == pytest.approx(WANT)
    assert job_list(report) == (want, want)
    assert digest(report, tmp_path) == want
    assert staff(report) == want


def test_the_formula():
    held = Held(3600.0, 4, 1800.0, 2, 0.5, 8 * GIB, 3 * GIB, 2)
    got = unused(held)
    assert (got["cpu"].requested, got["cpu"].unused) == (4.0, 3.5)
    assert (got["gpu"].requested, got["gpu"].unused) == (2.0, 1.5)
    # 8 GiB for 2 nodes, 3 GiB on the busiest: 2 GiB-hours left
    assert (got["memory"].requested, got["memory"].unused) == (8.0, 2.0)
    # A peak above the request, CPU time above the allocation: no negative waste.
    over = unused(Held(3600.0, 1, 7200.0, 0, None, GIB, 2 * GIB, 1))
    assert over["cpu"].unused == 0.0 and over["memory"].unused == 0.0 and "gpu" not in over
    unknown = unused(Held(3600.0, 1, None, 1, None, GIB, None, 1))
    assert unknown["cpu"].unused is None and unknown["gpu"].unused is None
    assert unknown["memory"].unused is None
    assert unused(Held(None, 4)) == {} and unused(Held(3600.0, None)) == {}
