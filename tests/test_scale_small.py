"""The scale generator and the archive's SQL paths at small scale, so neither rots: the
staff report aggregated by the database equals the in-memory one on the same jobs (the
SQL repeat of ``webapp.unused`` included), and a user's job list is paged and sorted by
the database as Python would."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

import pytest

from tests.helpers import scale_archive
from webapp.archive.staff_rows import StaffRows
from webapp.archive.store import Archive
from webapp.detectors.gpu_models import card_profiles
from webapp.lists import job_page
from webapp.lists.job_list import SORT_KEYS, ListQuery, select
from webapp.lists.job_page import archive_page, row_of
from webapp.staff.archived import build_staff_report_sql, staff_row
from webapp.staff.build import build_staff_report, memory_totals
from webapp.staff.tables import held
from webapp.thresholds import StaffConfig, Thresholds
from webapp.unused import unused

UNTIL = 1_800_000_000
UTC_UNTIL = UNTIL
CFG = StaffConfig(rows=15, large_memory_partitions=("debug",))
T = Thresholds(min_runtime_hours=0.05, large_memory_need_gib=1.0, smaller_gpu_util=0.5,
               cpu_efficiency_low=0.9)


def _jobs() -> list:
    jobs = list(scale_archive.staff_jobs(3000, 40, until=UNTIL, heavy=300))
    # Multi-node variants of real shapes, for the fragmentation and idle-node tables.
    extra = []
    for i, j in enumerate(jobs[-60:]):
        nodes = tuple(f"m{i}-{k}" for k in range(2 + i % 3))
        extra.append(dataclasses.replace(
            j, job_id=f"9{i:05d}", raw_id=f"9{i:05d}", nodes=nodes, gpus=2 + i % 2,
            node_cpu_seconds={n: (0.0 if k == 0 else j.elapsed * 2) for k, n in
                              enumerate(nodes)}))
    return jobs + extra


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    jobs = _jobs()
    archive = Archive(str(tmp_path_factory.mktemp("scale") / "archive.sqlite"))
    with archive.db.transaction():
        StaffRows(archive.db).put(staff_row("bench", j) for j in jobs)
    yield jobs, archive
    archive.close()


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9,
                                                                abs_tol=1e-9)
    return a == b


def test_generator_replays_the_real_shapes():
    shapes = scale_archive.shapes()
    jobs = list(scale_archive.staff_jobs(1000, 50, until=UNTIL, heavy=100))
    assert len(shapes) == 23  # 17 of the staff window, 6 of the sync shapes
    assert len(jobs) == 1000 and len({j.job_id for j in jobs}) == 1000
    assert sum(j.user == "user0000" for j in jobs) == 100
    assert len({j.user for j in jobs}) == 50
    assert all(UNTIL - 7 * 86400 <= j.end <= UNTIL for j in jobs)
    assert any(j.gpus and j.gpu_utilization is not None for j in jobs)  # the captured GPU job
    # Ratios stay as captured: CPU efficiency of a copy is its shape's.
    compared = 0
    for j in jobs[:23]:
        s = shapes[int(j.job_id) - 5_000_000]
        if s.cpu_seconds and j.cpu_seconds:
            assert math.isclose(j.cpu_seconds / j.elapsed, s.cpu_seconds / s.elapsed)
            compared += 1
    assert compared > 10


def test_staff_report_in_sql_equals_the_one_in_memory(filled):
    jobs, archive = filled
    since = UNTIL - 3 * 86400  # a window inside the generated week
    in_window = [j for j in jobs if since <= int(j.end) <= UNTIL]
    py = build_staff_report("bench", in_window, since, UNTIL, CFG, T, {})
    sql = build_staff_report_sql(StaffRows(archive.db), "bench", since, UNTIL, CFG, T, {})
    assert sql.jobs == py.jobs == len(in_window) > 1000
    for a, b in zip(py.tables, sql.tables, strict=True):
        assert a.key == b.key and a.columns == b.columns
        assert len(a.rows) == len(b.rows), a.key
        # the captured shapes' GPUs are 16 GiB T4s, which MIG does not split
        splittable = any(card_profiles(j.gpu_memory_total or 0) for j in in_window)
        assert a.rows or a.key == "repeat_offenders" or (
            a.key == "mig_fit" and not splittable), f"{a.key}: an empty table proves nothing"
        for ra, rb in zip(a.rows, b.rows, strict=True):
            assert ra.values.keys() == rb.values.keys()
            assert all(_same(ra.values[k], rb.values[k]) for k in ra.values), (a.key, ra, rb)


def test_sql_memory_waste_is_the_one_formula(filled):
    jobs, archive = filled
    totals = {t["user"]: t for t in StaffRows(archive.db).user_totals(
        scale_archive_window())}
    by_formula = memory_totals(jobs)
    assert by_formula and set(by_formula) <= set(totals)
    for user, (unused_gbh, asked) in by_formula.items():
        assert math.isclose(totals[user]["memory_unused"], unused_gbh, rel_tol=1e-9)
        assert math.isclose(totals[user]["memory_requested"], asked, rel_tol=1e-9)
    # And that helper is unused() itself, row by row, on one job with a known peak.
    j = next(j for j in jobs if j.memory_requested and j.max_rss)
    one = unused(held(j))["memory"]
    assert memory_totals([j])[j.user] == (one.unused, one.requested)


def test_each_jobs_waste_in_sql_is_webapp_unused(filled):
    """``staff_rows.FIGURES``, the one SQL repeat of ``webapp.unused``, row by row: CPU,
    GPU and memory held and not used, or unknown where unused() knows none."""
    from webapp.archive.staff_rows import JOBS

    jobs, archive = filled
    got = {r[0]: r[1:] for r in archive.db.query(
        f"SELECT job_id, cpu_waste, gpu_waste, mem_waste FROM {JOBS}")}  # noqa: S608
    checked = 0
    for j in jobs:
        busy = None if j.gpu_utilization is None else j.gpus * j.gpu_utilization
        left = unused(dataclasses.replace(held(j), gpus_busy=busy))
        want = [left["cpu"].unused if "cpu" in left else None,
                0.0 if not j.gpus else left["gpu"].unused if "gpu" in left else None,
                left["memory"].unused if "memory" in left else None]
        assert all(_same(a, b) or a is b is None for a, b in zip(got[j.job_id], want,
                                                                 strict=True)), (j, want)
        checked += all(w is not None for w in want) and j.gpus > 0
    assert checked > 10  # jobs with all three known, GPUs included


def test_the_staff_report_scans_the_window_once_and_its_gpu_and_node_rows_by_index(filled):
    """One grouped scan gives every per-user table and the energy per account; the tables
    of GPU jobs and of multi-node jobs read those rows by their partial indexes
    (revision 7), not the whole window."""
    jobs, archive = filled
    ran = []
    query = archive.db.query

    def logged(sql, params=()):
        ran.append((sql, params))
        return query(sql, params)

    archive.db.query = logged
    try:
        build_staff_report_sql(StaffRows(archive.db), "bench", 0, UNTIL, CFG, T, {})
    finally:
        archive.db.query = query
    assert sum("GROUP BY" in sql for sql, _ in ran) == 1
    plans = {sql: " ".join(r[-1] for r in query(f"EXPLAIN QUERY PLAN {sql}", params))
             for sql, params in ran}
    by_index = {name: [sql for sql, plan in plans.items() if f"INDEX {name} " in plan]
                for name in ("archive_staff_gpu", "archive_staff_multinode")}
    assert len(by_index["archive_staff_gpu"]) == 2, plans  # smaller GPU, MIG fit
    assert len(by_index["archive_staff_multinode"]) == 2, plans  # fragmentation, idle nodes


def scale_archive_window():
    from webapp.archive.staff_rows import Window

    return Window("bench", 0, 2**40)


@pytest.mark.parametrize(("sort", "order"), [
    ("submit", "desc"), ("elapsed", "asc"), ("cpu_eff", "asc"), ("cpu_waste", "desc"),
    ("mem_waste", "desc"), ("gpu_waste", "desc"), ("gpu_util", "desc"), ("state", "asc"),
])
def test_user_page_is_sorted_and_cut_by_the_database_as_the_list_sorts(filled, sort, order):
    jobs, archive = filled
    q = ListQuery(days=7, sort=sort, order=order)
    now = datetime.fromtimestamp(UTC_UNTIL, UTC)
    mine = [row_of(staff_row("bench", j)) for j in jobs if j.user == "user0000"]
    every, total = archive_page(archive, ["bench"], "user0000", q, now, per_page=1000)
    assert total == len(every) == len(mine) >= 300
    listed = select(mine, q)
    known = sum(SORT_KEYS[sort](r) is not None for r in listed)
    assert known > 0
    # The known values in the list's order; the unknown ones last (the list keeps them in
    # the order it read them, the database by job id).
    assert [r.job_id for r in every[:known]] == [r.job_id for r in listed[:known]]
    assert {r.job_id for r in every[known:]} == {r.job_id for r in listed[known:]}
    page, _ = archive_page(archive, ["bench"], "user0000", q, now, page=3, per_page=25)
    assert [r.job_id for r in page] == [r.job_id for r in every[50:75]]


def test_user_page_filters_by_state_and_leaves_other_sorts_to_the_list(filled):
    _, archive = filled
    now = datetime.fromtimestamp(UTC_UNTIL, UTC)
    done, total = archive_page(archive, ["bench"], "user0000", ListQuery(state="COMPLETED"), now)
    assert 0 < total and all(r.state == "COMPLETED" for r in done)
    assert archive_page(archive, ["bench"], "user0000", ListQuery(sort="name"), now) is None
    with pytest.raises(KeyError):
        StaffRows(archive.db).owner_page(["bench"], "user", "user0000", 0, 1, "user_name; DROP")
    with pytest.raises(KeyError):
        StaffRows(archive.db).owner_page(["bench"], "user_name; DROP", "x", 0, 1)


def test_a_job_on_many_nodes_renders_bands_and_the_busiest_and_idlest():
    from bench import bench_many_nodes
    from webapp.renderers import charts, text
    from webapp.renderers.sections import coverage_rows

    report = bench_many_nodes.many_nodes(40)
    assert len(report.usage.cpu_cores) == 40 and len(report.usage.cpu_per_core) == 40 * 32
    out = text.render(report, details=True)
    assert "(20 nodes between the 10 busiest and 10 idlest left out)" in out
    assert "(60 GPUs between the 10 busiest and 10 idlest left out)" in out
    rows = coverage_rows(report)
    assert len(rows) == 2 * (16 + 1)
    assert rows[16][0] == "24 more nodes" and rows[-1][0] == "64 more GPUs"
    assert rows[0][0] == "node n0002"  # the least covered first (n0002 covers 99.8 %)
    fig, _ = charts.PLOTS["cpu"].build(report)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert "max of 40 nodes" in labels and "median of 40 nodes" in labels
    assert not any(label.startswith("n00") for label in labels)


def test_a_page_takes_name_and_findings_from_the_archived_report(filled, tmp_path):
    from tests.helpers.reports import sample_report
    from webapp.report.archived import archive_record

    jobs, _ = filled
    job = next(j for j in reversed(jobs) if j.user == "user0000")
    with Archive(str(tmp_path / "a.sqlite")) as archive:
        with archive.db.transaction():
            StaffRows(archive.db).put([staff_row("bench", job)])
        now = datetime.fromtimestamp(UTC_UNTIL, UTC)
        (row,), _ = archive_page(archive, ["bench"], "user0000", ListQuery(), now)
        assert row.name == "" and row.missing == (job_page.NOT_ARCHIVED,)
        report = sample_report(job_id=job.job_id, name="train-model")
        archive.put(dataclasses.replace(archive_record(report, submit_time=int(job.submit)),
                                        cluster="bench"))
        (row,), _ = archive_page(archive, ["bench"], "user0000", ListQuery(), now)
        assert row.name == "train-model" and row.findings == len(report.findings) > 0
        assert row.missing == () and row.source == "archive"
