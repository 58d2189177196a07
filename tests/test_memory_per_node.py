"""Memory judged node by node (docs/findings.md, "Memory per node"): each node's own
request and peak, the job's efficiency its worst node's, the unused memory summed over
nodes; the same figures in the report, the job list and the jobstats summary."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

import pytest

from tests.test_job_list import NOW
from tests.test_numbers import sacct_answer
from webapp.archive.store import Archive
from webapp.archive.week_sums import build_digest
from webapp.model import JobId, NodeMemory, Series, Usage
from webapp.renderers.presentation import summary_rows
from webapp.renderers.wording import headline
from webapp.report.archived import archive_record
from webapp.report.job_rows import row_from_report
from webapp.report.jobstats_summary import build_jobstats_summary
from webapp.report.precedence import join, node_requests, timing
from webapp.report.waste import compute_waste
from webapp.sources.jobstats_comment import figures
from webapp.sources.sacct import FIELDS, parse_sacct, pick_record
from webapp.unused import Held, memory_unused_bytes, unused

MIB, GIB = 2**20, 2**30
EVEN = "stack_sacct_parsable2_het_84.psv"  # -n1 --mem=100M : -n1 --mem=100M
UNEVEN = "stack_sacct_parsable2_het_uneven_713.psv"  # --mem=1200M -w gpu1 : --mem=100M -w gpu2


def record(fixture: str, job: str):
    rows = [(j.raw_id, j) for j in parse_sacct(sacct_answer(fixture), FIELDS, tz=UTC)]
    return pick_record(job, rows, alone=False)


def report_of(fixture: str, job: str, usage: Usage | None = None):
    jid = JobId.parse(job)
    sj = record(fixture, job)
    t = timing(jid, None, sj, NOW)
    return join(jid, "c", None, sj, t, usage or Usage(), (None, None))


def held(node: str, at: float, value: float) -> Series:
    return Series(node, ((at, value / 2), (at + 5, value), (at + 10, value / 2)))


def test_a_het_job_asks_on_each_node_its_components_request():
    assert node_requests(record(EVEN, "84").components, ("cpu1", "cpu3"), 200 * MIB) == {
        "cpu1": 100 * MIB, "cpu3": 100 * MIB}
    r = report_of(UNEVEN, "713")
    assert {n.node: n.requested_bytes for n in r.memory_nodes} == {
        "gpu1": 1200 * MIB, "gpu2": 100 * MIB}
    assert r.memory_requests_uneven and r.memory_requested_bytes == 1300 * MIB
    # a job that is not het: --mem per node, the total split evenly
    assert node_requests((), ("a", "b"), 2 * GIB) == {"a": GIB, "b": GIB}


def test_mem_per_cpu_spread_unevenly_asks_on_each_node_what_its_cgroup_limit_says():
    # -N2 -n3 --mem-per-cpu=300M: 2 CPUs on a (600M), 1 on b (300M); Slurm's limits
    limits = (("a", 600.0 * MIB), ("b", 300.0 * MIB))
    assert node_requests((), ("a", "b"), 900 * MIB, limits) == {"a": 600 * MIB,
                                                                  "b": 300 * MIB}
    # a site's AllowedRAMSpace=110: limits above the request, shares the same
    above = tuple((n, v * 1.1) for n, v in limits)
    assert node_requests((), ("a", "b"), 900 * MIB, above) == pytest.approx(
        {"a": 600 * MIB, "b": 300 * MIB}, abs=1)
    # equal limits, a node without one, or none: evenly, as before
    assert node_requests((), ("a", "b"), 900 * MIB, (("a", 1.0), ("b", 1.0))) == {
        "a": 450 * MIB, "b": 450 * MIB}
    assert node_requests((), ("a", "b"), 900 * MIB, (("a", 600.0 * MIB),)) == {
        "a": 450 * MIB, "b": 450 * MIB}
    # a het job's components still decide (their requests are known)
    assert node_requests(record(UNEVEN, "713").components, ("gpu1", "gpu2"), 1300 * MIB,
                         (("gpu1", 1.0), ("gpu2", 5.0))) == {"gpu1": 1200 * MIB,
                                                            "gpu2": 100 * MIB}


def test_the_big_nodes_peak_is_judged_against_the_big_nodes_request():
    r = report_of(UNEVEN, "713")  # sacct alone: component 0's MaxRSS on gpu1
    judged = r.memory_judged
    assert judged is not None and judged.node == "gpu1"
    assert r.memory_requested_per_node == 1200 * MIB
    assert r.memory_efficiency == pytest.approx(judged.peak_bytes / (1200 * MIB))
    assert 0.5 < r.memory_efficiency <= 1.0  # never the peak over 650 MiB
    assert "of its 1.2 GiB of memory on gpu1" in headline(r)


def test_with_prometheus_every_node_against_its_own():
    at = 1.8e9
    usage = Usage(memory_rss=(held("gpu1", at, 911 * MIB), held("gpu2", at, 99 * MIB)))
    r = report_of(UNEVEN, "713", usage)
    nodes = {n.node: n for n in r.memory_nodes}
    assert nodes["gpu2"].peak_bytes == 99 * MIB and nodes["gpu1"].peak_bytes >= 911 * MIB
    # gpu2 at 99 % of its 100M is the worst node: the job's figure, under 100 %
    assert r.memory_judged.node == "gpu2"
    assert r.memory_efficiency == pytest.approx(0.99)
    assert r.memory_requested_per_node == 100 * MIB
    memory = dict(summary_rows(r))["Memory"]
    assert "99 MiB of 100 MiB on gpu2" in memory, memory
    # unused, node by node: (1200M - gpu1's peak) + (100M - 99M), not busiest x 2 = 0
    left = memory_unused_bytes(Held(1.0, 2, memory_requested_bytes=1300 * MIB,
                                    memory_peak_bytes=r.memory_peak_bytes, nodes=2,
                                    memory_by_node=r.memory_by_node))
    assert left == 1200 * MIB - nodes["gpu1"].peak_bytes + MIB
    waste = compute_waste(replace(r, elapsed_seconds=3600.0, cpus=2))
    memory = next(i for i in waste.items if i.resource == "memory")
    assert memory.unused == pytest.approx(left / GIB)


def test_unused_without_per_node_figures_is_the_busiest_peak_times_nodes():
    base = Held(3600.0, 2, memory_requested_bytes=4 * GIB, memory_peak_bytes=GIB, nodes=2)
    assert unused(base)["memory"].unused == pytest.approx(2.0)
    per_node = replace(base, memory_by_node=((2 * GIB, GIB), (2 * GIB, None)))
    assert unused(per_node)["memory"].unused == pytest.approx(2.0)  # unknown: busiest's
    per_node = replace(base, memory_by_node=((3 * GIB, GIB), (GIB, GIB // 2)))
    assert unused(per_node)["memory"].unused == pytest.approx(2.5)


def test_the_list_row_and_the_jobstats_summary_read_the_same_figures():
    at = 1.8e9
    usage = Usage(memory_rss=(held("gpu1", at, 911 * MIB), held("gpu2", at, 2 * MIB)))
    r = replace(report_of(UNEVEN, "713", usage), elapsed_seconds=60.0, cpus=2,
                cpu_seconds=30.0)
    row = row_from_report(r)
    assert row.memory_efficiency == r.memory_efficiency <= 1.0
    assert row.memory_requested_per_node == 1200 * MIB
    assert row.memory_gib_hours_unused == pytest.approx(
        (1300 * MIB - r.memory_peak_bytes - 2 * MIB) / GIB * 60 / 3600)
    summary = build_jobstats_summary(r, short_below=10)
    assert {n: d["total_memory"] for n, d in summary["nodes"].items()} == {
        "gpu1": 1200 * MIB, "gpu2": 100 * MIB}
    assert summary["nodes"]["gpu1"]["used_memory"] == r.memory_peak_bytes
    assert figures(summary).memory_efficiency <= 1.0


def test_an_even_job_is_judged_as_seff_judges_it():
    """Equal requests: the busiest node's peak over the request per node, as before."""
    nodes = (NodeMemory("a", None, None, None, None, None, GIB, GIB // 2),
             NodeMemory("b", None, None, None, None, None, GIB, GIB // 4))
    r = replace(report_of(EVEN, "84"), memory_nodes=nodes)
    assert not r.memory_requests_uneven
    assert r.memory_judged.node == "a" and r.memory_efficiency == 0.5


def test_the_digest_reads_each_nodes_figures_from_the_archived_report(tmp_path):
    """The weekly digest, through the archive and back: the het job's unused memory node by
    node (the page's figure), not the busiest node's peak x 2 (which would read 0)."""
    at = 1.8e9
    usage = Usage(memory_rss=(held("gpu1", at, 911 * MIB), held("gpu2", at, 2 * MIB)))
    r = replace(report_of(UNEVEN, "713", usage), elapsed_seconds=3600.0, cpus=2,
                cpu_seconds=30.0)
    (page,) = [i.unused for i in compute_waste(r).items if i.resource == "memory"]
    assert page == pytest.approx((1300 * MIB - r.memory_peak_bytes - 2 * MIB) / GIB)
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        archive.put(archive_record(r, submit_time=1, end_time=100))
        jobs = list(archive.jobs(r.cluster))
    assert build_digest(r.cluster, r.user, 0, 200, jobs).memory_gib_hours == pytest.approx(page)


def test_the_staff_tables_and_the_archived_list_read_each_nodes_figures(tmp_path):
    """The staff row the sync writes from the report (``report_staff_job``): its memory
    used and efficiency node by node, so the staff report's per-user totals (the database's
    sums), the in-memory tables and the archived job list's row all read the page's
    figures, not the busiest node's peak x 2 (which reads 0 unused and 140 %)."""
    from webapp.archive.staff_rows import StaffRows, Window
    from webapp.lists.job_page import row_of
    from webapp.staff.archived import report_staff_job, staff_row
    from webapp.staff.build import memory_totals

    at = 1.8e9
    usage = Usage(memory_rss=(held("gpu1", at, 911 * MIB), held("gpu2", at, 2 * MIB)))
    r = replace(report_of(UNEVEN, "713", usage), elapsed_seconds=3600.0, cpus=2,
                cpu_seconds=30.0)
    (page,) = [i.unused for i in compute_waste(r).items if i.resource == "memory"]
    # 1.2 GiB asked on gpu1, 911 MiB held; 100 MiB on gpu2, 2 MiB held: 387 MiB left
    assert page > 0.3 and page == pytest.approx((1300 * MIB - r.memory_peak_bytes - 2 * MIB) / GIB)
    job = report_staff_job(r, 1, 100)
    assert memory_totals([job])[r.user] == (pytest.approx(page), pytest.approx(1300 / 1024))
    row = staff_row(r.cluster, job)
    assert row["memory_used"] == r.memory_peak_bytes + 2 * MIB
    assert row["memory_efficiency"] == pytest.approx(r.memory_efficiency) and \
        r.memory_efficiency <= 1.0
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        rows = StaffRows(archive.db)
        rows.put([row])
        (totals,) = rows.user_totals(Window(r.cluster, 0, 200))
        assert totals["memory_unused"] == pytest.approx(page)
        (listed,), _ = rows.owner_page([r.cluster], "user", r.user, 0, 200, "mem_waste")
    line = row_of(listed)
    assert line.memory_gib_hours_unused == pytest.approx(page)
    assert line.memory_efficiency == pytest.approx(r.memory_efficiency)


def test_the_history_judges_each_node_against_its_share_of_the_request():
    """``jobreport history`` and its page: a -N2 --mem-per-cpu job whose tasks sat 2 on
    gpu3, 1 on gpu4 (cgroup limits 600M, 300M) holding 500 MiB on gpu3: 83 % of its own
    600M, not 111 % of the even split's 450M; without the limits, as before."""
    from webapp.report.history import history_job
    from webapp.sources.history_data import PastJob

    sj = replace(record(UNEVEN, "713+0"), node_list="gpu[3-4]", steps=(),
                 memory_requested_bytes=900 * MIB)
    peaks = {"gpu3": 500.0 * MIB, "gpu4": 50.0 * MIB}
    limits = {"gpu3": 600.0 * MIB, "gpu4": 300.0 * MIB}
    judged = history_job(PastJob(sj, None, peaks, None, limits))
    assert {n.node: n.requested_bytes for n in judged.memory_nodes} == {
        "gpu3": 600 * MIB, "gpu4": 300 * MIB}
    assert judged.memory_efficiency == pytest.approx(500 / 600)
    even = history_job(PastJob(sj, None, peaks))
    assert even.memory_efficiency == pytest.approx(500 / 450)
