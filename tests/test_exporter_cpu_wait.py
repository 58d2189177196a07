"""CPU wait, I/O wait and busy threads: parsers, the per-thread reader, the monotonic totals,
on real captures of contended jobs (fixtures/exporter/v1-cpu-wait) and on live threads."""

from __future__ import annotations

import os
import threading
import time

import pytest

from jobs_exporter.cpu_wait import WaitTotals
from jobs_exporter.proc_reader import ProcReader
from jobs_exporter.procfs import TaskTimes, parse_blkio_ticks, parse_schedstat
from tests.helpers.cpu_wait import CAPTURES, capture
from tests.helpers.exporter_scrape import make_settings, scrape, value
from tests.helpers.wait import wait_for


def test_parse_schedstat_and_blkio_ticks_on_literal_lines():
    assert parse_schedstat("38321469 26169228 179\n") == (38321469, 26169228)
    assert parse_schedstat(b"1 2 3") == (1, 2)
    # comm with spaces and a ")" inside: fields counted after the last ")"
    fields = " ".join(str(n) for n in range(3, 53))  # field n holds n
    assert parse_blkio_ticks(f"77 (a b) c) {fields}") == 42
    assert parse_blkio_ticks(f"77 (x) {fields}".encode()) == 42


@pytest.mark.parametrize(("name", "job", "busy"), [
    # 1 core: four busy loops of the job, two busy processes outside Slurm on the node
    ("over", "151", 4),
    # 2 cores: two busy loops, slowed by the same outside load
    ("two", "152", 2),
])
def test_busy_threads_and_wait_on_captured_contended_jobs(name, job, busy):
    times, first = capture(name)
    _, second = capture(f"{name}-b")
    totals = WaitTotals()
    w1 = totals.update(job, first[job], now=times[1])
    assert w1.busy_tasks is None  # no interval yet
    assert w1.cpu_wait_seconds == pytest.approx(sum(t.wait_ns for t in first[job]) / 1e9)
    assert w1.io_wait_seconds is None  # delay accounting was off (proc/sys/kernel)
    w2 = totals.update(job, second[job], now=times[2])
    assert w2.busy_tasks == busy  # the batch shell and the `timeout` wrappers sleep
    grew = sum(t.wait_ns for t in second[job]) - sum(t.wait_ns for t in first[job])
    assert w2.cpu_wait_seconds - w1.cpu_wait_seconds == pytest.approx(grew / 1e9)
    interval = times[2] - times[1]
    # the busy loops waited for most of the interval: each their share of the cores
    assert grew / 1e9 > 0.5 * busy * interval


@pytest.mark.parametrize(("name", "job", "busy"), [("over", "151", 4), ("two", "152", 2)])
def test_a_second_scraper_moments_later_reads_the_same_busy_threads(name, job, busy):
    # Two Prometheus servers may scrape one exporter at the same instant (a stack test's
    # own beside the stack's did): the second's interval is milliseconds, over which a
    # waiting thread's counters have not moved. Each gets the last interval's figure.
    times, first = capture(name)
    _, second = capture(f"{name}-b")
    totals = WaitTotals()
    totals.update(job, first[job], now=times[1])
    assert totals.update(job, first[job], now=times[1] + 0.005).busy_tasks is None
    w2 = totals.update(job, second[job], now=times[2])
    again = totals.update(job, second[job], now=times[2] + 0.005)
    assert (w2.busy_tasks, again.busy_tasks) == (busy, busy)
    assert again.cpu_wait_seconds == w2.cpu_wait_seconds  # nothing counted twice


def test_an_exited_thread_never_takes_the_total_down_and_a_reused_tid_is_new():
    totals = WaitTotals()
    a, b = TaskTimes(10, 100, 5_000_000_000, None), TaskTimes(11, 100, 1_000_000_000, None)
    assert totals.update("1", [a, b], now=0.0).cpu_wait_seconds == pytest.approx(6.0)
    # thread 11 exited: 6 s stays; thread 10 waited 1 s more
    a2 = a._replace(wait_ns=6_000_000_000)
    assert totals.update("1", [a2], now=1.0).cpu_wait_seconds == pytest.approx(7.0)
    # tid 10 reused by a new thread with less time: all of its 0.5 s is new
    a3 = TaskTimes(10, 50, 500_000_000, None)
    assert totals.update("1", [a3], now=2.0).cpu_wait_seconds == pytest.approx(7.5)
    totals.retain([])
    assert totals.update("1", [a3], now=3.0).cpu_wait_seconds == pytest.approx(0.5)


def test_busy_share_boundary_and_io_wait_in_ticks():
    hz = os.sysconf("SC_CLK_TCK")
    totals = WaitTotals()
    t0 = [TaskTimes(1, 0, 0, 0), TaskTimes(2, 0, 0, 0)]
    totals.update("1", t0, now=0.0)
    # over 10 s: thread 1 ran 2 s and waited 3 s (exactly half: busy), thread 2 ran 4.9 s
    t1 = [TaskTimes(1, 2 * 10**9, 3 * 10**9, 2 * hz), TaskTimes(2, 4_900_000_000, 0, 0)]
    w = totals.update("1", t1, now=10.0)
    assert w.busy_tasks == 1
    assert w.io_wait_seconds == pytest.approx(2.0)


def test_cpu_wait_series_on_a_captured_tree():
    text = scrape(make_settings(CAPTURES / "over", node_name="vm"))
    _, tasks = capture("over")
    expected = sum(t.wait_ns for t in tasks["151"]) / 1e9
    assert value(text, "jobs_cpu_wait_seconds_total", jobid="151") == pytest.approx(expected)
    assert value(text, "jobs_io_wait_seconds_total", jobid="151") is None  # accounting off
    assert value(text, "jobs_busy_tasks", jobid="151") is None  # first scrape
    assert value(text, "jobs_scrape_collector_success", collector="waits") == 1


def test_live_threads_are_read_one_by_one():
    """/proc/<pid>/schedstat is the main thread's alone; the reader sums every thread."""
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            pass

    reader = ProcReader("/proc")
    workers = [threading.Thread(target=spin) for _ in range(2)]
    for w in workers:
        w.start()

    def ran(tid: int) -> int:
        return parse_schedstat(open(f"/proc/{os.getpid()}/task/{tid}/schedstat").read())[0]

    # Until each worker has run 0.06 s (0.6 s of wall time alone; longer on a loaded
    # machine, where a fixed sleep left one worker short)
    try:
        wait_for(lambda: all(ran(w.native_id) > 0.06e9 for w in workers) or None, 30,
                 "both workers running", every=0.1)
        sample = reader.read(os.getpid())
    finally:
        done.set()
        for w in workers:
            w.join()
    assert sample is not None and sample.tasks is not None
    by_tid = {t.tid: t for t in sample.tasks}
    ids = {w.native_id for w in workers}
    assert ids <= set(by_tid)
    main_run = parse_schedstat(open(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat").read())
    # each worker ran far more than the main thread, whose figure /proc/<pid>/schedstat is
    assert all(by_tid[i].run_ns > 0.05e9 for i in ids)
    assert sum(t.run_ns for t in sample.tasks) > main_run[0] + 0.1e9
    reader.close()


def test_single_threaded_process_reads_its_kept_schedstat():
    reader = ProcReader("/proc")
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    try:
        first = reader.read(pid)
        again = reader.read(pid)  # through the kept-open fd
        assert first.tasks is not None and [t.tid for t in again.tasks] == [pid]
        assert again.tasks[0].run_ns >= first.tasks[0].run_ns
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert reader.read(pid) is None  # exited: ESRCH on the kept fd
    reader.close()


def test_waits_go_on_over_a_restart_as_without_one():
    """The sums and each thread's last times come back: a thread's wait while the exporter
    was down is added at the first scrape after; a thread that exited meanwhile keeps what
    was counted; busy threads are measured again from that scrape."""
    import json

    hz = os.sysconf("SC_CLK_TCK")
    s0 = [TaskTimes(1, 0, 10**9, 0), TaskTimes(2, 0, 2 * 10**9, hz)]
    s1 = [TaskTimes(1, 10**9, 4 * 10**9, hz)]  # thread 2 exited while the exporter was down
    steady = WaitTotals()
    steady.update("7", s0, 0.0)
    before = WaitTotals()
    before.update("7", s0, 0.0)
    restarted = WaitTotals()
    restarted.restore(json.loads(json.dumps(before.snapshot())))
    want, got = steady.update("7", s1, 60.0), restarted.update("7", s1, 60.0)
    assert got.cpu_wait_seconds == want.cpu_wait_seconds == 6.0
    assert got.io_wait_seconds == want.io_wait_seconds == 2.0
    assert got.busy_tasks is None  # no interval measured since the start yet
