"""Steps and het components as lines, waste in billing units, coverage and the audit, on
real sacct lines and real cgroup captures (issue 14, items 1, 6 and 7)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from jobs_exporter import cgroupfs
from tests.helpers.exporter_scrape import FIXTURES, make_settings, scrape, value
from webapp.detectors import Thresholds, detect_all
from webapp.model import (
    Coverage,
    CpuSource,
    JobReport,
    PeakSource,
    Series,
    SeriesCoverage,
    Usage,
    cpu_efficiency,
)
from webapp.renderers import html, text
from webapp.renderers import json as json_renderer
from webapp.report.coverage import audited
from webapp.report.peak import sacct_peak
from webapp.report.steps import step_lines
from webapp.report.waste import NO_WEIGHTS, compute_waste
from webapp.sources.partitions import parse_billing_weights
from webapp.sources.prometheus_coverage import coverages, series_coverage
from webapp.sources.sacct import _with_components, parse_sacct

SACCT = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
STEPS_FIXTURE = SACCT / "stack_sacct_parsable2_steps_1506.psv"
HET_FIXTURE = SACCT / "torchx_sacct_parsable2_hetjob_1853.psv"
# The stack's own partition (no TRESBillingWeights), as scontrol printed it.
DEBUG_PARTITION = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
                   / "local-scontrol-show-partition-debug-oneliner.txt").read_text()


def steps_report(**extra) -> JobReport:
    """Job 1506 as the report builder makes it from sacct (two srun steps, billing=2)."""
    (job,) = parse_sacct(STEPS_FIXTURE.read_text())
    fields = dict(
        job_id=job.job_id, cluster="demo", user=job.user, partition=job.partition,
        nodes=("vm",), cpus=job.cpus, memory_requested_bytes=job.memory_requested_bytes,
        state=job.state, exit_code=job.exit_code, start_time=job.start_time,
        end_time=job.end_time, elapsed_seconds=job.elapsed_seconds,
        cpu_seconds=job.total_cpu_seconds, cpu_source=CpuSource.STEPS,
        memory_peak=sacct_peak(job), steps=job.steps, billing=job.billing,
    )  # fmt: skip
    fields.update(extra)
    report = JobReport(**fields)
    return dataclasses.replace(report, step_lines=step_lines(report))


def test_each_step_has_its_own_line_with_seffs_formula():
    report = steps_report()
    lines = {x.step_id: x for x in report.step_lines}
    assert list(lines) == ["batch", "0", "1"]  # extern is Slurm's own: not listed
    for x, (cpu, elapsed) in zip(lines.values(), [(0.023, 28), (16.5, 20), (3.818, 8)],
                                 strict=True):
        assert x.cpu_seconds == pytest.approx(cpu)
        assert x.elapsed_seconds == elapsed and x.cpus == 2
        assert x.cpu_efficiency == pytest.approx(cpu / (elapsed * 2))
        assert x.state == "COMPLETED" and x.exit_code == "0:0"
    assert lines["1"].memory_peak_bytes == 556 * 1024  # MaxRSS x 1 task


def test_single_step_job_gets_no_table():
    report = steps_report()
    alone = dataclasses.replace(report, steps=report.steps[:1])
    assert step_lines(alone) == ()


def test_het_components_each_one_line():
    jobs = parse_sacct(HET_FIXTURE.read_text())
    lead = next(j for j in jobs if j.job_id == "1853+0")
    job = _with_components(lead, list(jobs))
    assert [c.step_id for c in job.components] == ["1853+0", "1853+1", "1853+2"]
    report = JobReport(job_id="1853", cluster="t", components=job.components, steps=job.steps)
    lines = step_lines(report)
    assert [(x.kind, x.step_id) for x in lines[:3]] == [
        ("component", "1853+0"), ("component", "1853+1"), ("component", "1853+2")]
    assert all(x.cpus == 1 and x.state == "COMPLETED" for x in lines[:3])


def test_cpu_finding_names_the_responsible_step():
    report = steps_report()
    (finding,) = [f for f in detect_all(report, Thresholds(min_runtime_seconds=10))
                  if f.name == "cpu_efficiency_low"]
    # Step 0 left 40 - 16.5 = 23.5 core-seconds idle, step 1 16 - 3.8 = 12.2.
    assert "step 0's: it used 0.8 of 2 cores" in finding.message
    assert finding.evidence["step"] == "0" and finding.evidence["step_cpus"] == 2


def test_cpu_finding_names_no_step_when_idleness_is_spread():
    report = steps_report()
    # Two srun steps of 14 s each at 40 %: each holds half the idle core-seconds.
    even = [x if x.step_id == "batch" else
            dataclasses.replace(x, elapsed_seconds=14.0, cpu_seconds=14.0 * 0.4 * 2)
            for x in report.step_lines]
    report = dataclasses.replace(report, step_lines=tuple(even))
    (finding,) = [f for f in detect_all(report, Thresholds(min_runtime_seconds=10))
                  if f.name == "cpu_efficiency_low"]
    assert "step" not in finding.evidence and "step" not in finding.message


def test_waste_without_weights_bills_the_cpus():
    report = steps_report()
    assert parse_billing_weights(DEBUG_PARTITION) == {}
    waste = compute_waste(report, parse_billing_weights(DEBUG_PARTITION))
    assert waste.weights_source == NO_WEIGHTS and waste.billing_per_hour == 2
    cpu = next(i for i in waste.items if i.resource == "cpu")
    unused = (28 * 2 - 20.341) / 3600
    assert cpu.unused == pytest.approx(unused)
    assert cpu.billing_units == pytest.approx(unused * 2 / 2)  # billing / cpus per core-hour
    assert cpu.core_hours is None
    mem = next(i for i in waste.items if i.resource == "memory")
    assert mem.billing_units == 0.0  # the default billing counts CPUs only


def test_waste_with_weights_and_core_hours():
    # What parse_billing_weights makes of CPU=1.0,Mem=0.25G,GRES/gpu=2.0 (memory per MB).
    weights = {"cpu": 1.0, "mem": 0.25 / 1024, "gres/gpu": 2.0}
    report = steps_report(gpus=1, usage=Usage(gpu_utilization=(
        Series("vm/0", ((0.0, 0.25), (5.0, 0.25))),)))
    waste = compute_waste(report, weights, core_hours_per_billing_unit=0.5)
    gpu = next(i for i in waste.items if i.resource == "gpu")
    assert gpu.unused == pytest.approx(0.75 * 28 / 3600)
    assert gpu.billing_units == pytest.approx(gpu.unused * 2.0)
    assert gpu.core_hours == pytest.approx(gpu.billing_units * 0.5)
    mem = next(i for i in waste.items if i.resource == "memory")
    assert mem.billing_weight == pytest.approx(0.25)  # per GiB-hour


def test_series_coverage_finds_the_missing_half():
    times = [float(t) for t in range(0, 31, 5)]  # samples over the first half of [0, 60]
    cov = series_coverage("vm", times, 0.0, 60.0, 5.0)
    assert cov.samples == 7 and cov.interval_seconds == 5.0
    assert cov.fraction == pytest.approx(0.5)
    assert cov.gaps == ((30.0, 60.0),)
    full = series_coverage("vm", [float(t) for t in range(0, 61, 5)], 0.0, 60.0, 5.0)
    assert full.fraction == 1.0 and full.gaps == ()
    # The end held to the start's length: a node's tasks may end a scrape before Slurm's
    # record (run df: a 21-s job's idle rank gone before the scrape at +20).
    four = [0.0, 5.0, 10.0, 15.0]
    assert series_coverage("vm", four, 0.0, 24.0, 5.0).gaps == ()
    assert series_coverage("vm", [9.0, *(t + 9 for t in four[1:])], 0.0, 24.0, 5.0).gaps == ()
    late = series_coverage("vm", four, 0.0, 26.0, 5.0)
    assert late.gaps == ((15.0, 26.0),) and late.fraction == pytest.approx(15 / 26)
    # a node never scraped during the job: expected, so listed at 0 %
    (missing,) = coverages([], ["vm"], 0.0, 60.0, 5.0)
    assert missing.fraction == 0.0 and missing.samples == 0


def half_covered(report: JobReport) -> JobReport:
    return dataclasses.replace(report, coverage=Coverage(
        nodes=(SeriesCoverage("vm", 3, 5.0, 14.0, 0.5, ((1795449536.0, 1795449550.0),)),),
        queries=(("coverage_nodes", 'jobs_cpu_seconds_total{jobid="1506"}[38s]'),)))


def test_low_coverage_withholds_a_prometheus_cpu_verdict_only():
    thresholds = Thresholds(min_runtime_seconds=10, overridden=frozenset({"min_runtime_seconds"}))
    base = half_covered(steps_report())
    # sacct's TotalCPU is complete whatever Prometheus holds: the verdict stands.
    report = dataclasses.replace(base, findings=detect_all(base, thresholds))
    kept = audited(report, thresholds, 0.8)
    assert "cpu_efficiency_low" in {f.name for f in kept.findings}
    verdict = {v.detector: v for v in kept.audit.verdicts}["cpu_efficiency_low"]
    assert not verdict.withheld and verdict.rests_on.startswith("sacct")
    # The same figure from Prometheus (no sacct): withheld, and the report says why.
    prom = dataclasses.replace(base, cpu_source=CpuSource.PROMETHEUS, step_lines=())
    prom = dataclasses.replace(prom, findings=detect_all(prom, thresholds))
    assert "cpu_efficiency_low" in {f.name for f in prom.findings}
    withheld = audited(prom, thresholds, 0.8)
    assert "cpu_efficiency_low" not in {f.name for f in withheld.findings}
    verdict = {v.detector: v for v in withheld.audit.verdicts}["cpu_efficiency_low"]
    assert verdict.withheld and "vm 50%" in verdict.why
    (note,) = withheld.notes
    assert note.startswith("Verdicts withheld, samples cover too little") and (
        "cpu_efficiency_low" in note)
    overridden = {n: o for n, _, o in kept.audit.thresholds}
    assert overridden["min_runtime_seconds"] and not overridden["gpu_idle"]


def test_sections_in_text_json_and_html():
    thresholds = Thresholds(min_runtime_seconds=10)
    report = half_covered(steps_report(memory_peak=None))
    report = dataclasses.replace(report, waste=compute_waste(report, {}),
                                 findings=detect_all(report, thresholds))
    report = audited(report, thresholds, 0.8)
    out = text.render(report, details=True)
    assert "Steps" in out and "  0       sh" in out and "Waste" in out and "Coverage" in out
    assert "Steps" not in text.render(report)  # a detail: one screen without --details
    data = json.loads(json_renderer.render(report))
    assert [x["step_id"] for x in data["step_lines"]] == ["batch", "0", "1"]
    assert data["waste"]["items"][0]["resource"] == "cpu"
    assert data["coverage"]["nodes"][0]["fraction"] == 0.5
    assert data["coverage"]["queries"][-1]["promql"].startswith("jobs_cpu_seconds_total")
    assert data["coverage"]["rules_version"]
    page = html.render(report)
    assert '<section id="steps">' in page and '<details id="audit-details">' in page
    assert "jobs_cpu_seconds_total{jobid=&#34;1506&#34;}[38s]" in page  # escaped PromQL


def test_exporter_labels_steps_only_for_multi_step_jobs():
    assert cgroupfs.user_step_names(["batch", "extern", "0"]) == []
    assert cgroupfs.user_step_names(["batch", "extern", "3"]) == ["3"]
    assert cgroupfs.user_step_names(["batch", "0", "1"]) == ["0", "1"]
    # The real capture of job 1506 during its second step: step 1 is labelled.
    out = scrape(make_settings(FIXTURES / "v1-steps"))
    user = value(out, "jobs_step_cpu_seconds_total", jobid="1506", step="1", mode="user")
    assert user is not None and user > 0
    assert value(out, "jobs_step_memory_rss_bytes", jobid="1506", step="1") > 0
    assert value(out, "jobs_step_cpu_seconds_total", jobid="1506", step="batch",
                 mode="user") is None
    # Single-step jobs (v1-local: batch only; v2-samples: step_0 only) get no step series.
    for tree in ("v1-local", "v2-samples"):
        assert "jobs_step_cpu_seconds_total{" not in scrape(make_settings(FIXTURES / tree))


def test_cpu_efficiency_helper_is_the_step_formula():
    assert cpu_efficiency(16.5, 20.0, 2) == pytest.approx(0.4125)
    assert PeakSource.SACCT == "sacct"


def test_archived_summary_keeps_the_sections():
    from webapp.archive.record import report_from_record

    thresholds = Thresholds(min_runtime_seconds=10)
    report = half_covered(steps_report())
    report = dataclasses.replace(report, waste=compute_waste(report, {}),
                                 findings=detect_all(report, thresholds))
    report = audited(report, thresholds, 0.8)
    summary = json_renderer.to_dict(report, include_series=False)
    back = report_from_record(json.loads(json.dumps(summary)), {})
    assert back.step_lines == report.step_lines and back.waste == report.waste
    assert back.coverage.nodes == report.coverage.nodes and back.audit == report.audit
    assert json_renderer.to_dict(back, include_series=False)["coverage"] == summary["coverage"]
