"""The staff report's tables on jobs built in code and on a captured sacct window."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from webapp.settings import Settings, SettingsError
from webapp.staff.build import build_staff_report
from webapp.staff.data import StaffJob, parse_window
from webapp.staff.render import render_json, render_text
from webapp.thresholds import StaffConfig, Thresholds
from webapp.watch_records import AlertRecord

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/sacct/local-staff-window.psv"
GIB = 1024**3
H = 3600.0
CFG = StaffConfig()
T = Thresholds(min_core_hours=0, min_gpu_hours=0)


def job(job_id: str, user: str = "alice", **kw) -> StaffJob:
    base = dict(raw_id=job_id, user=user, account="research", partition="debug",
                state="COMPLETED", submit=0.0, start=100.0, end=100.0 + H, elapsed=H,
                time_limit=4 * H, cpus=4, nodes=("n1",), memory_requested=8 * GIB, gpus=0,
                cpu_seconds=4 * H, max_rss=8 * GIB)
    return StaffJob(job_id, **{**base, **kw})


def table(report, key):
    return next(t for t in report.tables if t.key == key)


def test_captured_window_parses_ended_jobs_with_submit_and_raw_ids():
    jobs = parse_window(FIXTURE.read_text(), 1795442930, 1795443066)
    by_id = {j.job_id: j for j in jobs}
    busy, idle = by_id["687"], by_id["688"]
    assert (busy.user, busy.cpus, busy.elapsed) == ("alice", 1, 30.0)
    assert busy.cpu_seconds == pytest.approx(29.858)  # TotalCPU 00:29.858
    assert idle.cpu_seconds == pytest.approx(0.004)  # TotalCPU 00:00.004
    assert (idle.submit, idle.start) == (1795442959, 1795443036)
    assert all(1795442930 <= j.end <= 1795443066 for j in jobs)
    assert "672" not in by_id and "676" in by_id  # 672 ended at ...925, before the window


def test_low_efficiency_users_are_ranked_among_all_by_hours():
    jobs = [job("1", "heavy", cpus=8, cpu_seconds=0.8 * H),  # 8 core-h, 10 %
            job("2", "busy", cpus=4, cpu_seconds=4 * H),  # efficient: not listed
            job("3", "light", cpus=1, cpu_seconds=0.1 * H)]  # 1 core-h, 10 %
    t = table(build_staff_report("demo", jobs, 0, 2 * H, CFG, T, {}), "low_efficiency_users")
    assert [(r.values["user"], r.values["rank_core_hours"]) for r in t.rows] == [
        ("heavy", 1), ("light", 3)]
    assert t.rows[0].values["cpu_efficiency"] == pytest.approx(0.1)


def test_gpu_tables_smaller_gpu_and_fragmentation():
    jobs = [job("10", gpus=1, gpu_utilization=0.05, gpu_memory_used=2 * GIB,
                gpu_memory_total=80 * GIB),
            job("11", gpus=1, gpu_utilization=0.9, gpu_memory_used=2 * GIB,
                gpu_memory_total=80 * GIB),
            job("12", gpus=4, nodes=("a", "b", "c", "d"), gpu_utilization=0.9)]
    r = build_staff_report("demo", jobs, 0, 2 * H, CFG, T, {})
    assert [row.job for row in table(r, "smaller_gpu").rows] == ["10"]
    assert [row.job for row in table(r, "gpu_fragmentation").rows] == ["12"]


def test_the_weeks_gpu_jobs_by_the_mig_slice_they_would_have_fitted():
    h100 = 79.6 * GIB  # what an H100 80GB reports
    jobs = [job("20", gpus=1, gpu_utilization=0.12, gpu_memory_used=6 * GIB,
                gpu_memory_total=h100),  # 7.5 GiB needed, a seventh's use: 1g.10gb
            job("21", gpus=1, gpu_utilization=0.12, gpu_memory_used=6 * GIB,
                gpu_memory_total=h100, elapsed=2 * H),
            job("22", gpus=2, gpu_utilization=0.4, gpu_memory_used=20 * GIB,
                gpu_memory_total=h100),  # 25 GiB and 40 %: 3g.40gb
            job("23", gpus=1, gpu_utilization=0.9, gpu_memory_used=2 * GIB,
                gpu_memory_total=h100),  # busy: only a whole card
            job("24", gpus=1, gpu_utilization=0.0, gpu_memory_used=0,
                gpu_memory_total=16 * GIB)]  # a T4: MIG does not split it, not counted
    t = table(build_staff_report("demo", jobs, 0, 2 * H, CFG, T, {}), "mig_fit")
    assert [(r.values["profile"], r.values["jobs"], r.values["gpu_hours"]) for r in t.rows] == [
        ("1g.10gb", 2, 3.0), ("3g.40gb", 1, 2.0), ("whole card", 1, 1.0)]
    assert t.rows[0].values["share"] == 0.5


def test_idle_nodes_memory_and_time_unused_queue_and_offenders():
    jobs = [job("20", nodes=("a", "b"), node_cpu_seconds={"a": 2 * H, "b": 1.0}),
            job("21", "bob", memory_requested=10 * GIB, max_rss=2 * GIB, submit=-500.0,
                pending_reasons=(("Priority", 400.0), ("Resources", 100.0)))]
    alerts = {"bob": [AlertRecord("bob", str(i), "gpu_idle", float(i)) for i in range(3)]}
    r = build_staff_report("demo", jobs, 0, 2 * H, CFG, T, alerts)
    (idle,) = table(r, "idle_nodes").rows
    assert idle.values["idle_nodes"] == "b" and idle.values["node_hours_idle"] == 1.0
    (mem,) = table(r, "memory_unused").rows
    assert (mem.values["user"], mem.values["gib_hours_unused"]) == ("bob", 8.0)
    assert [row.values["core_hours_unused"] for row in table(r, "time_unused").rows] == [12, 12]
    assert table(r, "longest_queued").rows[0].cells == (
        "21", "bob", "debug", "10m 00s", "Priority (6m 40s), Resources (1m 40s)")
    (offender,) = table(r, "repeat_offenders").rows
    assert offender.cells[1] == "3rd notice in 30 days"


def test_large_memory_partition_and_partition_filter():
    cfg = replace(CFG, large_memory_partitions=("bigmem",))
    jobs = [job("30", partition="bigmem", max_rss=10 * GIB),
            job("31", partition="bigmem", max_rss=300 * GIB)]
    assert [row.job for row in table(build_staff_report("demo", jobs, 0, H, cfg, T, {}),
                                     "large_memory").rows] == ["30"]
    only = build_staff_report("demo", jobs, 0, H, replace(cfg, partitions=("gpu",)), T, {})
    assert only.jobs == 0


def test_settings_block_parses_numbers_and_partition_lists():
    s = Settings.from_env({"JOBREPORT_STAFF_REPORT": "days=14,large_memory_partitions=bigmem|fat",
                           "JOBREPORT_THRESHOLDS": "cpu_efficiency_low=0.4"})
    cfg = s.staff_report
    assert (cfg.days, cfg.large_memory_partitions) == (14.0, ("bigmem", "fat"))
    assert s.thresholds.cpu_efficiency_low == 0.4
    with pytest.raises(SettingsError, match="JOBREPORT_STAFF_REPORT: unknown name 'dayz'"):
        Settings.from_env({"JOBREPORT_STAFF_REPORT": "dayz=3"})
    # A threshold is set in the one threshold variable, which says so.
    with pytest.raises(SettingsError, match="JOBREPORT_STAFF_REPORT: cpu_efficiency_low is a "
                                            "threshold: set it in JOBREPORT_THRESHOLDS"):
        Settings.from_env({"JOBREPORT_STAFF_REPORT": "cpu_efficiency_low=0.4"})


def test_text_and_json_render_every_table():
    r = build_staff_report("demo", [job("40", "<b>x</b>", cpu_seconds=0.0)], 0, H, CFG, T, {})
    text, doc = render_text(r), render_json(r)
    for t in r.tables:
        assert t.title in text and f'"{t.key}"' in doc
    assert "<b>x</b>" in text  # text is plain; the HTML page escapes it


def test_energy_per_account_and_user_adds_the_jobs_kwh():
    kwh = 3.6e6
    jobs = [job("50", "alice", account="physics", energy_joules=1.5 * kwh),
            job("51", "bob", account="physics", energy_joules=0.25 * kwh),
            job("52", "alice", account="chem", energy_joules=0.75 * kwh),
            job("53", "carol", account="chem")]  # a node without an energy source
    report = build_staff_report("demo", jobs, 0, 2 * H, CFG, T, {})
    accounts = {r.values["account"]: r.values for r in table(report, "energy_accounts").rows}
    expected = {}
    for j in jobs:
        if j.energy_joules is not None:
            expected[j.account] = expected.get(j.account, 0.0) + j.energy_joules / kwh
    assert {a: v["kwh"] for a, v in accounts.items()} == pytest.approx(expected)
    assert accounts["physics"]["jobs"] == 2 and accounts["chem"]["jobs"] == 1
    assert accounts["physics"]["share"] == pytest.approx(1.75 / 2.5)
    users = [(r.values["user"], r.values["kwh"]) for r in table(report, "energy_users").rows]
    assert users == [("alice", pytest.approx(2.25)), ("bob", pytest.approx(0.25))]
    assert "Energy by account" in render_text(report)
