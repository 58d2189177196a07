"""Verdicts that hold on a busy node: oversubscribed, serial_on_many_cores and cpu_starved /
io_starved decided from the threads' waits and busy count (cgroup v1 too), on the figures
the exporter reads from real captures of jobs sharing a loaded node, with true negatives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.cpu_wait import cpu_seconds, two_scrapes
from webapp.detectors import Thresholds, detect_all
from webapp.detectors.measures import thread_wait_share, waiting_for
from webapp.model import JobReport, Usage

T = Thresholds(min_runtime_seconds=10)  # the captured jobs ran ~35 s
START = datetime(2026, 11, 26, 11, 40, tzinfo=UTC)


def report(elapsed: float, cpus: int, cpu: float, usage: Usage) -> JobReport:
    return JobReport(
        job_id="7", cluster="test", user="alice", cpus=cpus, state="COMPLETED",
        exit_code="0:0", start_time=START, end_time=START + timedelta(seconds=elapsed),
        elapsed_seconds=elapsed, time_limit_seconds=60.0, cpu_seconds=cpu,
        memory_requested_bytes=2**30, usage=usage, nodes=("vm",),
    )  # fmt: skip


def captured(name: str, job: str, cpus: int) -> JobReport:
    """The report the captured job would get: run time and CPU time up to the second
    capture, the exporter's wait total and busy threads there."""
    times, _, second = two_scrapes(name, job)
    usage = Usage(cpu_wait_seconds=second.cpu_wait_seconds,
                  io_wait_seconds=second.io_wait_seconds,
                  busy_tasks_max=float(second.busy_tasks))
    return report(times[2] - times[0], cpus, cpu_seconds(f"{name}-b", job), usage)


def names(r: JobReport) -> set[str]:
    return {f.name for f in detect_all(r, T)}


def test_four_busy_processes_on_one_core_of_a_loaded_node_are_oversubscribed():
    r = captured("over", "151", cpus=1)
    # the core was far from the old 90 % bar: outside load took its share too
    assert r.cpu_seconds / r.elapsed_seconds < T.oversubscription_busy
    assert thread_wait_share(r, "cpu") > 0.5
    found = names(r)
    assert "oversubscribed" in found
    # the wait is the job's own doing: not called starved (nor bare low efficiency)
    assert not found & {"cpu_starved", "cpu_efficiency_low", "serial_on_many_cores"}
    f = next(f for f in detect_all(r, T) if f.name == "oversubscribed")
    assert f.evidence["busy_tasks_max"] == 4 and "waited for a core" in f.message


def test_two_busy_processes_slowed_by_outside_load_are_not_serial_but_starved():
    r = captured("two", "152", cpus=2)
    used = r.cpu_seconds / r.elapsed_seconds
    assert 0.75 <= used <= T.serial_cores_max  # the total alone looks serial
    found = names(r)
    assert "serial_on_many_cores" not in found and "oversubscribed" not in found
    assert waiting_for(r, T) == "cpu" and "cpu_starved" in found
    f = next(f for f in detect_all(r, T) if f.name == "cpu_starved")
    assert f.evidence["cpu_wait_of_run"] > T.pressure_high and f.evidence["busy_tasks_max"] == 2


def test_the_old_figures_alone_gave_the_wrong_verdicts():
    """Without the exporter's thread figures the same jobs get the verdicts the issue saw."""
    over, two = captured("over", "151", 1), captured("two", "152", 2)
    assert "oversubscribed" not in names(over.__class__(**{**vars(over), "usage": Usage()}))
    assert "serial_on_many_cores" in names(two.__class__(**{**vars(two), "usage": Usage()}))


@pytest.mark.parametrize(("cpus", "cpu", "wait", "busy", "expected"), [
    # quiet: one busy thread on two cores, little wait -> serial (a true serial job)
    (2, 20.0, 0.1, 1.0, {"serial_on_many_cores"}),
    # quiet: four threads on four cores, busy, no wait -> nothing about CPU
    (4, 80.0, 0.2, 4.0, set()),
    # many busy threads but they hardly waited (short bursts) -> not oversubscribed
    (1, 19.0, 1.0, 4.0, set()),
    # two threads on two cores, a node so busy they waited but efficiency stayed high
    (2, 36.0, 9.0, 2.0, set()),
    # a sleeping job whose few short runs waited as long as they ran: idle, not starved
    (1, 0.02, 0.02, 0.0, {"cpu_efficiency_low"}),
])
def test_quiet_and_boundary_cases(cpus, cpu, wait, busy, expected):
    usage = Usage(cpu_wait_seconds=wait, busy_tasks_max=busy)
    found = names(report(20.0, cpus, cpu, usage))
    cpu_verdicts = {"serial_on_many_cores", "oversubscribed", "cpu_starved", "io_starved",
                    "cpu_efficiency_low"}
    assert found & cpu_verdicts == expected


def test_io_wait_from_delay_accounting_makes_io_starved_on_v1():
    # 20 s run, 4 s CPU, 10 s blocked on I/O, 0.5 s waiting for a CPU
    r = report(20.0, 1, 4.0, Usage(cpu_wait_seconds=0.5, io_wait_seconds=10.0,
                                   busy_tasks_max=1.0))
    assert waiting_for(r, T) == "io" and "io_starved" in names(r)
    # delay accounting off: no I/O figure, so no verdict from it (and no false 0)
    r = report(20.0, 1, 4.0, Usage(cpu_wait_seconds=0.5, busy_tasks_max=1.0))
    assert "io_starved" not in names(r) and "cpu_efficiency_low" in names(r)


# The stack's "two-cpus-one-used" job (one busy loop on 2 cores) as it ran during a full
# test run on this 2-core machine beside other work: 20 s, 13.2 s of CPU, its one busy
# thread waited 6 s for a CPU (the figures of its report, job 435).
def test_one_busy_thread_slowed_by_outside_load_is_serial_not_starved():
    r = report(20.0, 2, 13.2, Usage(cpu_wait_seconds=6.0, busy_tasks_max=1.0))
    assert r.cpu_seconds / r.elapsed_seconds < 0.75  # under a core: the total alone says no
    assert waiting_for(r, T) == "cpu"
    assert names(r) - {"short_job"} == {"serial_on_many_cores"}  # 20 s: short, too


# The stack's "steps" job: 2 cores for 20 s, busy 2 s then 8 s on both; 12 s of CPU and
# 5 s of waiting under load. Its cores mostly sat idle: the CPU finding, not starved.
def test_some_waiting_on_a_mostly_idle_job_is_low_efficiency_not_starved():
    r = report(20.0, 2, 12.0, Usage(cpu_wait_seconds=5.0, busy_tasks_max=2.0))
    assert waiting_for(r, T) == "cpu"
    found = names(r)
    assert "cpu_efficiency_low" in found and "cpu_starved" not in found
    f = next(f for f in detect_all(r, T) if f.name == "cpu_efficiency_low")
    assert "mostly idle, not starved" in f.message
    # PSI over its line too (cgroup v2): it did not stay low, and the finding says so (run
    # ea's io-sync read "Pressure stayed low" at 35 % of its run waiting for a CPU).
    psi = report(20.0, 2, 12.0, Usage(cpu_wait_seconds=5.0, busy_tasks_max=2.0,
                                      cpu_pressure_seconds=7.0, io_pressure_seconds=0.0))
    (f,) = [f for f in detect_all(psi, T) if f.name == "cpu_efficiency_low"]
    assert "mostly idle, not starved" in f.message and "stayed low" not in f.message
    quiet = report(20.0, 2, 12.0, Usage(cpu_wait_seconds=0.5, busy_tasks_max=2.0,
                                        cpu_pressure_seconds=0.5, io_pressure_seconds=0.0))
    (f,) = [f for f in detect_all(quiet, T) if f.name == "cpu_efficiency_low"]
    assert "Pressure stayed low" in f.message


def two_nodes(second_node_cores: float) -> JobReport:
    """``-N2 -n2`` slowed by load beside it: one busy rank on node a at half a core, and
    node b at ``second_node_cores``; the exporter's busy count is per node (1)."""
    from webapp.model import Series

    def flat(label: str, v: float) -> Series:
        return Series(label, tuple((START.timestamp() + 10 * i, v) for i in range(7)))

    r = report(60.0, 2, 60.0 * (0.5 + second_node_cores),
               Usage(cpu_cores=(flat("a", 0.5), flat("b", second_node_cores)),
                     busy_tasks_max=1.0))
    return r.__class__(**{**vars(r), "nodes": ("a", "b")})


def test_one_busy_rank_per_node_is_not_serial():
    r = two_nodes(0.5)
    assert r.cpu_seconds / r.elapsed_seconds <= T.serial_cores_max  # the total looks serial
    assert "serial_on_many_cores" not in names(r)


def test_a_multi_node_job_whose_other_nodes_did_nothing_is_serial():
    found = names(two_nodes(0.0))
    assert {"serial_on_many_cores", "node_idle"} <= found
