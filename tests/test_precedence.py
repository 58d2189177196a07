"""The report build split in two: which source wins for each figure (``precedence``, pure,
on records parsed from real sacct captures and accounting-view rows) and the reading of
the sources (``build``: the real sources, the database and Prometheus on closed ports)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta

import pytest

from tests.test_job_list import NOW, _acct
from tests.test_numbers import FIX, PENDING, SLYME_2014, sacct_answer, service
from webapp.model import (
    CpuSource,
    Gap,
    JobId,
    JobNotFound,
    Series,
    TimeLimitKind,
    Usage,
)
from webapp.report.build import ACCOUNTING_DOWN, read_records, read_time_limit, read_usage
from webapp.report.precedence import cpu_time, join, time_limit, timing
from webapp.sources.sacct import FIELDS, parse_sacct

STEPS = "stack_sacct_parsable2_steps_1506.psv"
JOB = JobId.parse("1506")


def sacct_job(fixture: str, job_id: str, fields=None):
    answer = sacct_answer(fixture, fields, job=job_id)
    return next(j for j in parse_sacct(answer, FIELDS, tz=UTC) if j.job_id == job_id)


@pytest.fixture(scope="module")
def sj():
    return sacct_job(STEPS, "1506")


@pytest.fixture(scope="module")
def acct(sj):
    """The accounting view's row of the same job, as the view names it."""
    return replace(_acct("1506"), nodes=("vm",), node_list="vm", start_time=sj.start_time,
                   end_time=sj.end_time, cpus=sj.cpus, billing=None)


# -- precedence: pure ----------------------------------------------------------------------
def test_state_from_sacct_times_and_nodes_from_the_view(sj, acct):
    later = acct.start_time + timedelta(seconds=5)
    t = timing(JOB, replace(acct, state="PENDING", start_time=later), replace(
        sj, state="REQUEUED"), NOW)
    assert t.state == "REQUEUED"  # sacct's state wins over the view's
    assert t.start == later and t.nodes == ("vm",) and t.metrics_id == "1506"
    assert t.elapsed == sj.elapsed_seconds  # sacct's Elapsed, not end - start


def test_without_the_view_sacct_decides_and_elapsed_dates_the_start(sj):
    t = timing(JOB, None, replace(sj, start_time=None, raw_id="1507"), NOW)
    assert t.start == sj.end_time - timedelta(seconds=sj.elapsed_seconds)
    assert t.metrics_id == "1507" and t.nodes == ("vm",)
    running = timing(JOB, None, replace(sj, end_time=None, elapsed_seconds=None), NOW)
    assert running.elapsed == (NOW - sj.start_time).total_seconds()


def test_cpu_time_steps_then_allocation_then_prometheus(sj):
    t = timing(JOB, None, sj, NOW)
    assert cpu_time(sj, Usage(), t) == (sj.total_cpu_seconds, CpuSource.STEPS)
    old = sacct_job("slyme_JobReportTest_sacct_rows_2014.psv", "10048462", SLYME_2014)
    assert cpu_time(old, Usage(), timing(JOB, None, old, NOW))[1] == CpuSource.ALLOCATION
    busy = Usage(cpu_cores=(Series("vm", ((0.0, 1.5), (5.0, 0.5))),))
    run = replace(t, state="RUNNING")
    assert cpu_time(sj, busy, run) == (1.0 * t.elapsed, CpuSource.PROMETHEUS)
    assert cpu_time(sj, busy, replace(t, state="PENDING")) == (None, None)
    # A node that died took its slurmstepd along: sacct's TotalCPU 0 is no measurement.
    died = replace(t, state="NODE_FAIL")
    lost = replace(sj, steps=tuple(replace(x, total_cpu_seconds=0.0) for x in sj.steps))
    assert cpu_time(lost, busy, died) == (1.0 * t.elapsed, CpuSource.PROMETHEUS)


def test_time_limit_the_views_then_sacct(sj, acct):
    assert time_limit(replace(acct, time_limit_seconds=600.0), sj) == (TimeLimitKind.JOB, 600.0)
    pending = sacct_job(PENDING, "17")  # Partition_Limit
    assert time_limit(None, pending) == (TimeLimitKind.PARTITION, None)
    assert time_limit(None, None) == (None, None)


def test_join_takes_identity_from_the_view_and_usage_from_prometheus(sj, acct):
    t = timing(JOB, acct, sj, NOW)
    report = join(JOB, "elsewhere", acct, sj, t, Usage(), (None, None), (Gap("x", "y"),))
    assert (report.cluster, report.user, report.job_name) == ("demo", "alice", "n1506")
    assert report.steps == sj.steps and report.gaps == (Gap("x", "y"),)
    assert report.figures_from is None and report.gpus == 0
    alone = join(JOB, "here", None, sj, timing(JOB, None, sj, NOW), Usage(), (None, None))
    assert (alone.cluster, alone.user, alone.partition) == ("here", sj.user, sj.partition)


def test_the_qos_comes_from_the_view_else_sacct_as_the_partition_does(sj, acct):
    t, alone = timing(JOB, acct, sj, NOW), timing(JOB, None, sj, NOW)
    normal = replace(sj, qos="normal")
    assert join(JOB, "c", replace(acct, qos="long"), normal, t, Usage(), (None, None)
                ).qos == "long"
    assert join(JOB, "c", None, normal, alone, Usage(), (None, None)).qos == "normal"
    # a view older than its qos column, and sacct asked without QOS (job_figures)
    assert join(JOB, "c", acct, sj, t, Usage(), (None, None)).qos is None


# -- reading the sources: I/O --------------------------------------------------------------
def test_read_records_turns_a_database_outage_into_a_plain_gap():
    svc = service(sacct_answer(STEPS))
    records = read_records(JOB, svc.accounting, svc.sacct)
    assert records.acct is None and records.sacct.job_id == "1506"
    (gap,) = records.gaps
    assert gap.reason == ACCOUNTING_DOWN and "Can't connect" in gap.detail
    told = []
    read_records(JOB, svc.accounting, svc.sacct, on_owner=lambda u, n: told.append((u, n)))
    assert told == [(records.sacct.user, records.sacct.job_name)]


def test_read_records_job_nobody_knows():
    svc = service("")
    with pytest.raises(JobNotFound):
        read_records(JobId.parse("999"), svc.accounting, svc.sacct)


def test_read_usage_says_why_there_is_none(sj):
    svc = service(sacct_answer(STEPS))
    gaps: list[Gap] = []
    t = timing(JOB, None, sj, NOW)
    assert read_usage(JOB, svc.prometheus, replace(t, state="PENDING"), NOW, "plot",
                      gaps).empty
    assert read_usage(JOB, svc.prometheus, t, NOW, "plot", gaps).empty  # closed port
    assert gaps[0].reason == "the job has not started yet (PENDING): no metrics"
    assert gaps[1].source == "prometheus" and len(gaps) == 2


def test_read_time_limit_asks_scontrol_only_for_a_partitions_limit():
    captured = (FIX / "slurm" / "local-scontrol-show-partition-debug-oneliner.txt").read_text()
    calls = []

    def scontrol(argv):
        calls.append(argv)
        return captured  # MaxTime=UNLIMITED

    svc = service(sacct_answer(PENDING, job="17"), scontrol=scontrol)
    records = read_records(JobId.parse("17"), svc.accounting, svc.sacct)
    assert read_time_limit(records, svc.partitions) == (TimeLimitKind.UNLIMITED, None)
    assert calls == [["scontrol", "show", "partition", "debug", "--oneliner"]]
    done = read_records(JOB, svc.accounting, service(sacct_answer(STEPS)).sacct)
    assert read_time_limit(done, svc.partitions) == time_limit(None, done.sacct)
    assert len(calls) == 1


def test_the_syncs_bulk_windows_follow_the_same_rules(sj, acct):
    from webapp.sync.bulk import windows

    no_start = replace(sj, start_time=None)  # sacct's Elapsed dates it, as in the report
    (w,) = windows(["1506"], {}, {"1506": no_start})
    t = timing(JOB, None, no_start, NOW)
    assert (w.start, w.end, w.nodes) == (t.start.timestamp(), t.end.timestamp(), ("vm",))
    (v,) = windows(["1506"], {"1506": acct}, {"1506": sj})
    assert v.nodes == acct.nodes and v.start == acct.start_time.timestamp()
    assert windows(["1506", "1507"], {}, {"1506": replace(sj, end_time=None)}) == []


HET = "stack_sacct_parsable2_het_84.psv"  # -n1 --mem=100M : -n1 --mem=100M, srun over both


def het_record(job: str):
    from webapp.sources.sacct import pick_record

    rows = [(j.raw_id, j) for j in parse_sacct(sacct_answer(HET), FIELDS, tz=UTC)]
    return pick_record(job, rows, alone=False)


def test_a_het_job_asked_whole_is_judged_whole():
    job = JobId.parse("84")
    sj = het_record("84")
    t = timing(job, None, sj, NOW)
    report = join(job, "c", None, sj, t, Usage(), (None, None))
    # the headline's 2 cores, not component 0's 1, and no "figures of 84+0"
    assert report.cpus == 2 and report.figures_from is None
    assert report.memory_requested_bytes == 200 * 2**20
    assert set(report.nodes) == {"cpu1", "cpu3"}
    assert report.cpu_seconds == pytest.approx((0.016 + 0.001) + 0.001)  # steps of both
    assert t.metrics_ids == ("84", "85")  # each component is a job of its own to the exporter
    assert len(report.components) == 2  # the details keep a line each


def test_a_het_component_asked_for_is_itself():
    job = JobId.parse("84+1")
    sj = het_record("84+1")
    t = timing(job, None, sj, NOW)
    report = join(job, "c", None, sj, t, Usage(), (None, None))
    assert report.cpus == 1 and report.nodes == ("cpu3",) and t.metrics_ids == ()


def test_the_component_ids_select_every_components_series():
    from webapp.sources.prometheus import job_selector

    assert job_selector(("84", "85")) == 'jobid=~"84|85"'
    assert job_selector("84") == 'jobid="84"'
