"""History and right-sizing: the percentile, margins and rounding of the #SBATCH block,
what it would have saved, the sacct command line and the 80-column rendering."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from webapp.cli.history import render_history
from webapp.model import History, HistoryJob, MemoryPeak, PeakSource
from webapp.renderers.text import sizing_block
from webapp.report.history import MIN_JOBS, suggest
from webapp.sources.history_data import history_argv, parse_submits
from webapp.thresholds import Thresholds

MIB = 2**20
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def job(i: int, peak_mib: float | None, elapsed: float = 100.0, state: str = "COMPLETED",
        cpus: int = 4, cpu_seconds: float | None = None, mem_mib: int = 4096,
        limit: float = 3600.0, gpus: int = 0, gpus_busy: int | None = None,
        tasks: int = 1) -> HistoryJob:
    return HistoryJob(
        job_id=str(100 + i), name="train", state=state, submit_time=T0,
        start_time=T0 + timedelta(seconds=30), end_time=T0 + timedelta(seconds=30 + elapsed),
        elapsed_seconds=elapsed, time_limit_seconds=limit, cpus=cpus, tasks=tasks, nodes=1,
        memory_requested_per_node=mem_mib * MIB, gpus=gpus, gpus_busy=gpus_busy,
        cpu_seconds=elapsed if cpu_seconds is None else cpu_seconds,
        memory_peak=None if peak_mib is None else MemoryPeak(int(peak_mib * MIB),
                                                             PeakSource.PROMETHEUS, "n1"),
    )


def p95(values):
    """The 95th percentile, linear interpolation (numpy's default), computed afresh."""
    v = sorted(values)
    pos = (len(v) - 1) * 0.95
    lo = math.floor(pos)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)


def test_mem_is_the_95th_percentile_of_peaks_plus_20_percent_rounded_up():
    jobs = [job(i, 50 * (i + 1)) for i in range(10)]  # 50 .. 500 MiB
    s = suggest(jobs, Thresholds())
    want = p95([50 * (i + 1) for i in range(10)]) * 1.2  # 477.5 * 1.2 = 573 MiB
    assert dict(s.options)["--mem"] == f"{math.ceil(want / 100)}00M" == "600M"
    assert s.based_on == 10


def test_mem_in_whole_gib_above_a_gib_and_oom_grows_from_the_limit():
    jobs = [job(i, 3000 + 100 * i) for i in range(5)]
    assert dict(suggest(jobs, Thresholds()).options)["--mem"] == \
        f"{math.ceil(p95([3000 + 100 * i for i in range(5)]) * 1.2 / 1024)}G"  # 5G
    oom = [*jobs, job(9, None, state="OUT_OF_MEMORY", mem_mib=8192)]
    assert dict(suggest(oom, Thresholds()).options)["--mem"] == "12G"  # 8 GiB x 1.5


def test_time_is_the_95th_percentile_of_completed_elapsed_plus_30_percent():
    elapsed = [600, 700, 800, 900, 1000, 2400]
    jobs = [job(i, 100, elapsed=e) for i, e in enumerate(elapsed)]
    # p95 = 1000 + 0.75 x 1400 = 2050 s; x 1.3 = 2665 s; up to 5 minutes: 2700 s
    assert p95(elapsed) * 1.3 == pytest.approx(2665)
    assert dict(suggest(jobs, Thresholds()).options)["--time"] == "00:45:00"
    timeout = [*jobs, job(7, 100, elapsed=3600, state="TIMEOUT", limit=3600)]
    assert dict(suggest(timeout, Thresholds()).options)["--time"] == "01:30:00"  # 1 h x 1.5


def test_cores_and_gpus_are_what_was_used():
    # 4 cores asked, about 1.5 busy: ask for 2. 2 GPUs asked, 1 busy: ask for 1.
    jobs = [job(i, 100, cpus=4, cpu_seconds=150.0, gpus=2, gpus_busy=1) for i in range(4)]
    options = dict(suggest(jobs, Thresholds()).options)
    assert options["--cpus-per-task"] == "2" and options["--gpus"] == "1"
    # Per task: 2 tasks keeping 4 cores busy are 2 cores per task.
    tasks = [job(i, 100, cpus=4, cpu_seconds=400.0, tasks=2) for i in range(3)]
    assert dict(suggest(tasks, Thresholds()).options)["--cpus-per-task"] == "2"
    idle = [job(i, 100, gpus=1, gpus_busy=0) for i in range(3)]
    assert "--gpus" not in dict(suggest(idle, Thresholds()).options)


def test_saved_sums_what_was_asked_beyond_the_block():
    # 4 GiB asked, 600M suggested, 10 jobs of 1 h: (4096 - 600) MiB x 10 h.
    jobs = [job(i, 50 * (i + 1), elapsed=3600.0, cpus=1, limit=7200.0) for i in range(10)]
    s = suggest(jobs, Thresholds())
    gib_h = (4096 - 600) * MIB / 2**30 * 10
    assert s.saved[0] == f"{gib_h:,.2f} GiB-hours of memory" == "34.14 GiB-hours of memory"
    # --time: 3600 x 1.3 -> 01:30:00; 30 min less limit per job, 10 jobs: 5 h
    assert dict(s.options)["--time"] == "01:30:00"
    assert s.saved[-1].startswith("5h 00m of time limit")


def test_no_block_under_the_minimum_or_for_jobs_still_running():
    assert suggest([job(i, 100) for i in range(MIN_JOBS - 1)], Thresholds()) is None
    running = [job(i, 100, state="RUNNING") for i in range(5)]
    assert suggest(running, Thresholds()) is None


def test_history_argv_and_submits():
    since, until = T0, T0 + timedelta(days=30)
    argv = history_argv("sacct", "demo", "alice", "train", since, until, "~d~")
    assert argv[:2] == ["sacct", "--parsable2"] and "--delimiter=~d~" in argv
    assert argv[argv.index("--user") + 1] == "alice"
    assert argv[argv.index("--name") + 1] == "train"
    assert argv[-2:] == ["--clusters", "demo"]
    # A name with a comma would be split by sacct: it is filtered afterwards instead.
    assert "--name" not in history_argv("sacct", None, None, "a,b", since, until, "|")
    assert "--allusers" in history_argv("sacct", None, None, None, since, until, "|")
    text = "42|42|a|b|1795434160\n42.batch|42|x|y|1795434160\n43|43|c|d|Unknown\n"
    fields = ("JobID", "JobIDRaw", "JobName", "User", "Submit")
    assert parse_submits(text, fields, "|") == {"42": 1795434160.0}
    # a name with the delimiter and a line break in it costs neither its job nor the next
    text = "42|42|a|b\nc|u|1795434160\n43|43|d|u|1795434161\n"
    assert parse_submits(text, fields, "|") == {"42": 1795434160.0, "43": 1795434161.0}


def test_rendering_fits_80_columns_and_shows_the_block():
    jobs = tuple(job(i, 50 * (i + 1)) for i in range(10))
    h = History("alice", "a-rather-long-job-name-indeed", T0, jobs, suggest(jobs, Thresholds(),
                "jobs named 'a-rather-long-job-name-indeed' of alice since 2026-11-01"))
    lines = render_history(h)
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "  #SBATCH --mem=600M" in lines and "  #SBATCH --time=00:05:00" in lines
    assert sizing_block(h.sizing)[1].startswith("Next submission (from 10 jobs named")


def test_memory_hours_are_gib_hours_everywhere():
    # The block's saving and the waste figures (webapp.unused, which keeps its own copy
    # of the constant: the layers contract keeps it and formatting independent).
    from webapp import formatting, unused

    assert formatting.GIB == unused.GIB == 2**30
