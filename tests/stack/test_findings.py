"""Real jobs on the real stack get exactly their expected findings, efficiencies match
seff's formulas, and a report still builds (with the gap named) when a source is down."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from tests.helpers import stack
from tests.helpers.wait import wait_for
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.sacct_values import parse_memory, parse_sacct_duration

EXPECTED = {
    "busy": set(),
    "idle": {"cpu_efficiency_low"},
    "two-cpus-one-used": {"serial_on_many_cores"},
    "mem-over-request": {"cpu_efficiency_low", "memory_over_requested"},
    "oom": {"out_of_memory"},
    "gpu-untouched": {"gpu_idle", "cpu_efficiency_low"},
    "short": {"short_job"},
    "small-files": {"cpu_efficiency_low", "io_not_on_scratch", "small_io"},
    "multi-task": {"cpu_efficiency_low", "memory_over_requested"},
}


def test_array_job_is_summarised(stack_jobs, service):
    report = service.build(stack_jobs["array"])
    summary = report.array
    assert summary is not None and len(summary.tasks) == 4
    assert {t.job_id for t in summary.tasks} == {f"{stack_jobs['array']}_{i}" for i in range(1, 5)}
    assert 140 * 2**20 <= summary.memory_peak_p95 <= 220 * 2**20
    assert summary.memory_peak_p50 < summary.memory_peak_p95
    from webapp.sources.sacct_values import parse_memory

    assert parse_memory(summary.suggested_mem) >= 200 * 2**20  # covers the largest task
    task = service.build(f"{stack_jobs['array']}_2")
    assert task.array is None and task.job_id == f"{stack_jobs['array']}_2"
    assert 90 * 2**20 <= task.memory_peak_bytes <= 120 * 2**20


@pytest.fixture(scope="module")
def reports(stack_jobs, service):
    # The stack's settings scale the runtime floors and I/O volume down to its
    # seconds-long jobs (JOBREPORT_THRESHOLDS in var/jobreport.env); ratios keep defaults.
    assert service.thresholds.min_runtime_seconds == 10
    return {name: service.build(stack_jobs[name]) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_job_gets_exactly_its_findings(reports, service, name):
    report = reports[name]
    found = {f.name for f in report.findings}
    if name == "busy" and stack.waited_for_cpu(report, service.thresholds):
        found.discard("cpu_starved")  # when it also fell under the CPU bar: starved, right
    if name == "oom" and _paged_back_in(report):
        found.discard("io_not_on_scratch")
    assert found == EXPECTED[name], [
        (f.name, f.message) for f in report.findings
    ]
    if name in ("short", "oom"):  # over in ~1 s: a 5 s scrape may or may not have seen it
        assert {g.source for g in report.gaps} <= {"prometheus"}
    else:
        assert not report.gaps, report.gaps
    for f in report.findings:
        assert f.message and f.advice and f.evidence


def _paged_back_in(report) -> bool:
    """The OOM job read its own program back, nothing else: squeezed to its 100 MiB, the
    kernel drops the file pages charged to the job (python3 and its libraries, where this
    job was the first to read them since they left the page cache) and the job faults them
    in again until the kill, the same pages again and again: run 4 of 2026-12-06 read
    12.5 MiB so, run ah of 2026-12-07 145 MiB, over the stack's scaled-down 8 MiB I/O bar;
    most runs read less. How much depends on how long the kernel took to kill it, so only
    a write is refused: the job writes nothing."""
    return (report.usage.write_bytes or 0) < 2**20


def test_memory_advice_is_computed_from_the_peak(reports):
    finding = next(f for f in reports["mem-over-request"].findings
                   if f.name == "memory_over_requested")
    # 300 MiB peak x 1.2 margin -> a few hundred MB, never the 4G that was asked for
    assert "--mem=" in finding.advice and "--mem=4G" not in finding.advice


def _sacct_numbers(job_id: str) -> tuple[float, float, float, float, float]:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id,
         "--format=JobID,Elapsed,TotalCPU,AllocCPUS,ReqMem,MaxRSS"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    alloc = out[0].split("|")
    elapsed, cpus, req = parse_sacct_duration(alloc[1]), float(alloc[3]), parse_memory(alloc[4])
    steps = [line.split("|") for line in out[1:]]
    total_cpu = sum(parse_sacct_duration(s[2]) or 0 for s in steps)
    max_rss = max(parse_memory(s[5]) or 0 for s in steps)
    return elapsed, total_cpu, cpus, req, max_rss


@pytest.mark.parametrize("name", ["busy", "idle", "two-cpus-one-used", "mem-over-request"])
def test_efficiencies_match_seff(reports, stack_jobs, name):
    elapsed, total_cpu, cpus, req, max_rss = _sacct_numbers(stack_jobs[name])
    report = reports[name]
    assert abs(report.cpu_efficiency - total_cpu / (elapsed * cpus)) <= 0.02
    assert abs(report.memory_efficiency - max_rss / req) <= 0.02


def _runnable(report) -> float:
    return stack.runnable_share(report.cpu_seconds, report.usage.cpu_wait_seconds,
                                report.elapsed_seconds, report.cpus)


def test_seff_values_are_plausible(reports):
    # One busy thread on one core, one on two: runnable all along, whatever the
    # neighbours on the stack's shared cores took from it (its CPU wait).
    # (given at least a quarter of its core: 0.45 measured beside two other busy loops)
    assert _runnable(reports["busy"]) >= 0.85 and reports["busy"].cpu_efficiency >= 0.25
    assert 0.4 <= _runnable(reports["two-cpus-one-used"]) <= 0.55
    assert 0.05 <= reports["mem-over-request"].memory_efficiency <= 0.1  # 300M of 4G


def _service_with(settings: Settings, **changes) -> ReportService:
    return ReportService(dataclasses.replace(settings, **changes))


def test_prometheus_down_is_a_named_gap(stack_jobs, settings, service):
    report = _service_with(settings, prometheus_url="http://127.0.0.1:9").build(stack_jobs["busy"])
    # The queue context reads slurm-exporter's series from the same Prometheus.
    assert [g.source for g in report.gaps] == ["prometheus", "cluster"]
    assert report.user == "alice"  # the rest still there: sacct's CPU figure unchanged
    assert report.cpu_efficiency == service.build(stack_jobs["busy"]).cpu_efficiency


def test_database_down_is_a_named_gap(stack_jobs, settings):
    down = _service_with(settings, db_url="mysql://jobreport:x@127.0.0.1:9/jobreport")
    report = down.build(stack_jobs["busy"], strict_accounting=False)
    assert [g.source for g in report.gaps] == ["accounting"]
    assert report.user == "alice"  # from sacct
    assert report.usage.cpu_cores  # Prometheus still used


def test_sacct_missing_is_a_named_gap(stack_jobs, settings):
    report = _service_with(settings, sacct="/nonexistent/sacct").build(stack_jobs["busy"])
    assert [g.source for g in report.gaps] == ["sacct"]
    assert report.user == "alice" and report.cpus == 1  # from the accounting view
    # no TotalCPU without sacct: the integral of Prometheus' CPU rate stands in (with the
    # CPU wait: neighbours on the stack's shared cores take their share)
    assert 0.6 <= _runnable(report) <= 1.05


def test_text_report_shows_the_gap(stack_jobs, settings):
    from webapp.renderers import text

    report = _service_with(settings, prometheus_url="http://127.0.0.1:9").build(stack_jobs["idle"])
    assert "Metrics unavailable (Prometheus)" in text.render(report)


def test_running_job_uses_prometheus_for_cpu(stack_env, service):

    from tests.helpers import stack

    job = stack.StackJob("running-busy", "alice", ("-c1", "--mem=500M", "--time=5"),
                         stack.BUSY.format(s=60))
    job_id = stack.submit(job)
    try:
        stack.wait_until_running(job_id)
        # Until Prometheus holds enough scrapes for a rate (three, 5 s apart), no longer.
        def with_a_rate():  # noqa: ANN202 - the report once it has an efficiency
            report = service.build(job_id)
            return report if report.cpu_efficiency else None

        report = wait_for(with_a_rate, 90, f"job {job_id}'s CPU efficiency")
        assert report.state == "RUNNING" and report.end_time is None
        assert report.cpu_efficiency is not None and report.cpu_efficiency > 0
        # a busy loop so far: runnable (on its core or waiting for it, which load beside
        # it decides: it got 0.19 of its core beside two more busy loops) a good share
        assert stack.runnable_share(report.cpu_seconds, report.usage.cpu_wait_seconds,
                                    report.elapsed_seconds, report.cpus) >= 0.3
        assert report.memory_peak_bytes
    finally:
        subprocess.run(["scancel", job_id], check=False)
