"""One sizing policy (``webapp.detectors.advice.next_request``): a user's past jobs of one
name and an array's tasks, the same runs either way, get the same ``--mem``/``--time``;
no run the advice comes from would have been killed by it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobreport_common.units import GIB, MIB
from webapp.detectors.advice import PastRun, next_request
from webapp.formatting import slurm_mem_bytes, slurm_time_seconds
from webapp.model import HistoryJob, MemoryPeak, PeakSource, SacctJob
from webapp.report.arrays import summarize_array
from webapp.report.history import suggest
from webapp.thresholds import Thresholds

T0 = datetime(2026, 11, 1, tzinfo=UTC)
# (state, peak bytes, elapsed seconds, --mem per node, time limit)
Run = tuple[str, float, float, int, float]


def as_history(runs: list[Run]) -> list[HistoryJob]:
    return [HistoryJob(
        job_id=str(100 + i), name="train", state=state, submit_time=T0,
        start_time=T0, end_time=T0 + timedelta(seconds=elapsed), elapsed_seconds=elapsed,
        time_limit_seconds=limit, cpus=1, tasks=1, nodes=1, memory_requested_per_node=mem,
        gpus=0, gpus_busy=None, cpu_seconds=elapsed,
        memory_peak=MemoryPeak(int(peak), PeakSource.PROMETHEUS, "n1"),
    ) for i, (state, peak, elapsed, mem, limit) in enumerate(runs)]


def as_array(runs: list[Run]) -> tuple[list[SacctJob], dict[str, MemoryPeak]]:
    tasks = [SacctJob(
        job_id=f"7_{i}", job_name="train", user="alice", account="a", partition="p",
        state=state, exit_code="0:0", elapsed_seconds=elapsed, time_limit_seconds=limit,
        cpus=1, memory_requested_bytes=mem, gpus=0, start_time=T0,
        end_time=T0 + timedelta(seconds=elapsed), node_list="n1", work_dir=None, steps=(),
    ) for i, (state, _, elapsed, mem, limit) in enumerate(runs)]
    return tasks, {f"7_{i}": MemoryPeak(int(run[1]), PeakSource.PROMETHEUS, "n1")
                   for i, run in enumerate(runs)}


def both(runs: list[Run], thresholds: Thresholds | None = None) -> tuple[tuple, tuple]:
    """(--mem, --time) from the runs as a history and as an array's tasks."""
    thresholds = thresholds or Thresholds()
    options = dict(suggest(as_history(runs), thresholds).options)
    tasks, peaks = as_array(runs)
    summary = summarize_array(tasks, thresholds, peaks)
    return ((options.get("--mem"), options.get("--time")),
            (summary.suggested_mem, summary.suggested_time))


def ok(peak_mib: float, elapsed: float) -> Run:
    return ("COMPLETED", peak_mib * MIB, elapsed, 64 * GIB, 86400.0)


SAMPLES = {
    "alike": [ok(900 + 10 * i, 600 + 30 * i) for i in range(12)],
    "one exceptional run": [ok(1024, 600)] * 19 + [ok(10 * 1024, 6000)],
    "many, spread": [ok(1024 * (i + 1), 600 * (i + 1)) for i in range(20)],
    "an OOM kill": [ok(3000, 900)] * 4 + [("OUT_OF_MEMORY", 4 * GIB, 300, 4 * GIB, 86400.0)],
    "a TIMEOUT": [ok(500, 3000)] * 4 + [("TIMEOUT", 500 * MIB, 7200, 64 * GIB, 7200.0)],
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_history_and_array_give_the_same_advice(name):
    from_history, from_array = both(SAMPLES[name])
    assert from_history == from_array
    assert from_history == next_request([PastRun(*run) for run in SAMPLES[name]], Thresholds())


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_no_run_would_have_been_killed_by_the_advice(name):
    for mem, time in both(SAMPLES[name]):
        assert all(slurm_mem_bytes(mem) >= peak and slurm_time_seconds(time) >= elapsed
                   for state, peak, elapsed, _, _ in SAMPLES[name] if state == "COMPLETED")


def test_one_exceptional_run_is_covered_without_the_margin_on_top():
    # 19 runs of 1 GiB / 10 min and one of 10 GiB / 100 min: the 95th percentile (1.45 GiB,
    # 19 min) x the margin would kill the big run; the big run x the margin asks every
    # later run for 12G. The advice is the big run itself, rounded up.
    assert both(SAMPLES["one exceptional run"]) == (("10G", "02:00:00"),) * 2


def test_margin_on_the_percentile_of_many_runs():
    # 1..20 GiB: p95 = 19.05 GiB x 1.2 = 22.86 -> 23G (not the largest x 1.2 = 24G);
    # 10..200 min: p95 = 190.5 min x 1.3 = 247.65 -> 04:30:00.
    assert both(SAMPLES["many, spread"]) == (("23G", "04:30:00"),) * 2


def test_kills_grow_from_the_limit_that_ran_out():
    assert both(SAMPLES["an OOM kill"])[0][0] == "6G"  # 4 GiB x 1.5
    # 7200 s x 1.5 = 3 h, above the completed runs' 50 min x 1.3
    assert both(SAMPLES["a TIMEOUT"])[0][1] == "03:00:00"


def test_margins_come_from_thresholds():
    thresholds = Thresholds(memory_margin=2.0, time_margin=2.0)
    # p95 1004.5 MiB x 2 = 1.96 GiB -> 2G; 913.5 s x 2 = 30.5 min -> 35 min
    assert both(SAMPLES["alike"], thresholds) == (("2G", "00:35:00"),) * 2
