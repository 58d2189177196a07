"""Array summaries on real array captures (fixtures/sacct, see SOURCES.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC
from pathlib import Path

import pytest

from webapp.detectors import Thresholds
from webapp.report.arrays import percentile, summarize_array
from webapp.sources.sacct import FIELDS, SacctSource, parse_sacct

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
K = 1024


def local_array():
    return parse_sacct((FIX / "local-array-28.psv").read_text(), tz=UTC)


def test_percentile_matches_numpy_linear():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 95) == pytest.approx(48.0)
    assert percentile([7], 95) == 7 and percentile([], 50) is None


def test_local_array_of_four_tasks():
    # 28_1..28_4 held 8, 32, 72, 128 MiB for 12-21 s each on the local stack.
    summary = summarize_array(local_array())
    assert [t.job_id for t in summary.tasks] == ["28_1", "28_2", "28_3", "28_4"]
    peaks = [15184, 39764, 80724, 138064]
    assert [t.memory_peak_bytes for t in summary.tasks] == [p * K for p in peaks]
    assert summary.memory_peak_p50 == pytest.approx((39764 + 80724) / 2 * K)
    assert summary.memory_peak_p95 == pytest.approx(percentile([p * K for p in peaks], 95))
    assert summary.elapsed_p50 == 16.5 and summary.elapsed_p95 == pytest.approx(20.55)
    # seff's CPU efficiency per task: TotalCPU / (elapsed x CPUs)
    assert summary.tasks[0].cpu_efficiency == pytest.approx(0.119 / 12)
    # 28_4 (135 MiB) is 2.3 x the median (59 MiB) but only 76 MiB above it: too little
    # to matter, so no outlier.
    assert summary.outliers == ()
    assert summary.suggested_mem == "200M"  # 135 MiB x 1.2 -> 100M steps
    assert summary.suggested_time == "00:05:00"  # 21 s x 1.3, at least 5 minutes


def test_pending_range_is_left_out():
    jobs = parse_sacct((FIX / "local-pending-array-14.psv").read_text(), tz=UTC)
    summary = summarize_array([j for j in jobs if j.job_id.startswith("14_")])
    assert summary.tasks == () and summary.suggested_mem is None
    assert summary.elapsed_p50 is None and summary.outliers == ()


def test_failed_and_timed_out_tasks_are_outliers_and_grow_the_time():
    # Two real tasks of different arrays of one user (hb-jobinfo): TIMEOUT and FAILED.
    jobs = parse_sacct(
        (FIX / "DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv").read_text(), tz=UTC
    )
    tasks = [j for j in jobs if j.job_id in ("7216821_144", "7216823_40")]
    summary = summarize_array(tasks)
    assert set(summary.outliers) == {"7216821_144", "7216823_40"}
    # TIMEOUT at 2-23:59:00: ask for 1.5 x that, rounded to the hour
    assert summary.suggested_time == "4-12:00:00"
    assert summary.suggested_mem == "2G"  # max peak 1.59 GiB x 1.2 = 1.91 GiB


def test_oom_task_grows_memory_from_the_limit():
    tasks = list(local_array())
    oom = replace(tasks[3], state="OUT_OF_MEMORY")
    summary = summarize_array([*tasks[:3], oom])
    assert summary.suggested_mem == "500M"  # 300M limit x 1.5 = 450M -> 500M
    assert "28_4" in summary.outliers


def test_margins_come_from_thresholds():
    thresholds = Thresholds(memory_margin=2.0)
    assert summarize_array(local_array(), thresholds).suggested_mem == "300M"  # 135 MiB x 2


def test_source_array_on_the_captured_sacct_answer():
    # Exactly what SacctSource's own command printed on the stack (epoch times, no header).
    # Captured before FIELDS ended with MaxRSSNode and QOS: those columns are added, empty.
    captured = (FIX / "local-array-28-sacctsource-argv.psv").read_text().splitlines()
    assert FIELDS[-2:] == ("MaxRSSNode", "QOS")
    out = "".join(line + "||\n" for line in captured)
    calls = []

    def runner(argv):
        calls.append(argv)
        return out

    tasks = SacctSource(delimiter="|", runner=runner, cluster="demo").array("28")
    assert [t.job_id for t in tasks] == ["28_1", "28_2", "28_3", "28_4"]
    assert calls[0][calls[0].index("--format") + 1] == ",".join(FIELDS)
    assert tasks[0].start_time.isoformat() == "2026-11-22T20:58:54+00:00"
    replay = SacctSource(delimiter="|", runner=runner)
    assert replay.job("28").job_id == "28_4"  # job 28 is task 4's own id
    assert replay.array("28_2") == tasks
