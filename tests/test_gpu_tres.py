"""JOBREPORT_GPU_METRICS=tres: a job's GPU figures from its steps' ``gres/gpuutil`` and
``gres/gpumem`` usage TRES, on real sacct captures (hb-jobinfo's, fixtures/SOURCES.md),
built by the real report service with the accounting database and Prometheus down (the
helpers of tests/test_numbers.py), into the figures the GPU findings read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.test_detectors import HB, sacct_job
from tests.test_numbers import sacct_answer, show
from webapp.detectors import Thresholds, detect_all
from webapp.detectors.measures import gpu_mean, gpu_memory_peak
from webapp.model import Coverage, SeriesCoverage
from webapp.renderers import json as json_renderer
from webapp.renderers import text
from webapp.renderers.charts import chart_refs
from webapp.report.coverage import audited
from webapp.report.gpu_from_tres import AUDIT_LINE, job_gpu_tres
from webapp.sources.gpu_metrics import TRES
from webapp.sources.sacct import FIELDS, GPU_TRES_FIELDS, SacctSource

K = 1024
TRES_OUT = (*FIELDS, *GPU_TRES_FIELDS)  # what sacct is asked under JOBREPORT_GPU_METRICS=tres


def tres_report(job: str, fixture: str = HB, **settings):
    """The report of ``job`` from a real capture, the service set to
    JOBREPORT_GPU_METRICS=tres (sacct answers the capture's columns, the rest empty)."""
    answer = sacct_answer(fixture, job=job, out=TRES_OUT)
    return show(answer, job, gpu_metrics="tres", **settings)


def tres_gaps(report) -> list[str]:
    return [g.reason for g in report.gaps if g.source == TRES.exporter]


def test_the_figures_of_a_real_one_gpu_step():
    """7965768: one V100, its batch step ``gres/gpumem=20500736K,gres/gpuutil=90`` (Max
    and Tot; the capture has no Ave column), its extern step 0 and 0: busy 0.9 of its one
    GPU (the batch step's record is a second longer than the job's), 20500736 KiB."""
    job = sacct_job(HB, "7965768")
    got = job_gpu_tres(job.steps, job.gpus, job.elapsed_seconds)
    assert job.gpus == 1
    assert got.utilization == pytest.approx(0.9)
    assert got.memory_bytes == 20500736 * K


def test_the_formula_weights_each_step_by_its_share_of_the_run():
    """Two GPUs for 100 s: a 1-task step on both for the first 60 s at 150 (1.5 GPUs busy),
    one of 2 tasks for 20 s averaging 50 (Ave x tasks: 1 GPU busy), the batch step waiting
    for them all along (0), the extern step nothing; 20 s idle between steps count as idle:
    (1.5 x 60 + 1.0 x 20) / 2 / 100 = 0.55."""
    steps = (
        dataclasses.replace(sacct_job(HB, "7965768").steps[0], step_id="batch",
                            elapsed_seconds=100.0, tasks=1, tres_usage_in_ave=None,
                            tres_usage_in_tot="gres/gpuutil=0,gres/gpumem=0",
                            tres_usage_in_max="gres/gpuutil=0,gres/gpumem=0"),
        dataclasses.replace(sacct_job(HB, "7965768").steps[0], step_id="0",
                            elapsed_seconds=60.0, tasks=1, tres_usage_in_ave=None,
                            tres_usage_in_tot="gres/gpuutil=150",
                            tres_usage_in_max="gres/gpumem=3G"),
        dataclasses.replace(sacct_job(HB, "7965768").steps[0], step_id="1",
                            elapsed_seconds=20.0, tasks=2, tres_usage_in_tot=None,
                            tres_usage_in_ave="gres/gpuutil=50",
                            tres_usage_in_max="gres/gpumem=1G"),
    )
    got = job_gpu_tres(steps, gpus=2, elapsed=100.0)
    assert got.utilization == pytest.approx(0.55)
    assert got.memory_bytes == 3 * K**3
    assert job_gpu_tres(steps, gpus=2, elapsed=None).utilization is None


def test_sacct_asks_for_the_usage_tres_only_under_tres():
    plain, tres = SacctSource(), SacctSource(gpu_tres=True)
    assert "TRESUsageInAve" not in ",".join(plain.argv("1"))
    assert plain.figure_fields == tuple(f for f in FIELDS if f not in ("AllocTRES", "QOS"))
    wanted = ",".join(GPU_TRES_FIELDS)
    assert tres.argv("1")[tres.argv("1").index("--format") + 1].endswith(wanted)
    assert tres.figure_fields[-3:] == GPU_TRES_FIELDS


def test_a_gpu_job_report_from_a_real_capture_has_its_gpu_figures():
    report = tres_report("7965768")
    assert report.gpus == 1 and report.state.startswith("CANCELLED")
    # the figures every detector, gauge and the waste read: the Prometheus path's fields
    assert report.gpu_utilization == pytest.approx(0.9)
    assert gpu_mean(report) == pytest.approx(0.9)
    assert gpu_memory_peak(report) == 20500736 * K
    assert [s.label for s in report.usage.gpu_utilization] == ["v100gpu16/0"]
    assert report.usage.gpu_memory_total_bytes is None  # not in the TRES
    assert report.usage.empty  # Prometheus itself had nothing (the archive may stand in)
    assert not tres_gaps(report)
    # named as the source, in the audit and in the notes; no GPU plot (no series)
    assert AUDIT_LINE in report.usage.queries
    assert report.usage.gpu_figures_from == "Slurm's TRES (gres/gpuutil, gres/gpumem)"
    verdict = next(v for v in report.audit.verdicts if v.detector == "gpu_idle")
    assert "Slurm's TRES (gres/gpuutil, gres/gpumem)" in verdict.rests_on
    assert not verdict.withheld
    assert any("one figure per job step" in n for n in report.notes)
    assert "gpu" not in [c.name for c in chart_refs(report)]
    data = json.loads(json_renderer.render(report))
    assert data["usage"]["gpu_figures_from"] == TRES.exporter
    assert data["series"]["gpu_utilization"][0]["points"][0][1] == pytest.approx(0.9)
    assert "GPU figures from Slurm's TRES" in json.dumps(data["coverage"]["queries"])


def test_the_gpu_findings_see_the_tres_figures():
    """7971484: four A100s on two nodes, every step's gres/gpuutil 0: idle GPUs. The job ran
    3 min 53 s, under the default minimum for an efficiency verdict; at 60 s it is judged."""
    report = tres_report("7971484", thresholds=Thresholds(min_runtime_seconds=60))
    assert report.gpus == 4 and report.gpu_utilization == 0.0
    assert [s.label for s in report.usage.gpu_utilization] == [
        "a100gpu2/0", "a100gpu2/1", "a100gpu4/0", "a100gpu4/1"]
    idle = next(f for f in report.findings if f.name == "gpu_idle")
    assert "None of the 4 allocated GPU(s) did any work" in idle.message
    assert idle.evidence["gpus_allocated"] == 4 and idle.evidence["gpus_idle"] == 4
    gpu_waste = next(i for i in report.waste.items if i.resource == "gpu")
    assert gpu_waste.unused == pytest.approx(gpu_waste.requested)
    # 8150389: two A100s, its batch step's gres/gpuutil 100 (one GPU's worth): half each
    half = tres_report("8150389")
    assert half.gpu_utilization == pytest.approx(0.5, abs=1e-4)
    assert gpu_memory_peak(half) == 37956 * K * K
    assert not {"gpu_idle", "gpu_util_low"} & {f.name for f in half.findings}


def test_the_gpu_verdicts_stand_where_prometheus_has_no_gpu_samples():
    """With Prometheus up, its coverage has the nodes' samples and no GPU's (there is no GPU
    series under tres): the GPU verdicts rest on Slurm's accounting, not on those."""
    report = tres_report("7971484")
    nodes = tuple(SeriesCoverage(n, 10, 30.0, 233.0, 1.0, ()) for n in report.nodes)
    covered = dataclasses.replace(report, coverage=Coverage(nodes, ()),
                                  findings=detect_all(report, Thresholds(min_runtime_seconds=60)))
    judged = audited(covered, Thresholds(min_runtime_seconds=60), 0.8)
    assert "gpu_idle" in {f.name for f in judged.findings}
    assert not any(v.withheld for v in judged.audit.verdicts if v.detector.startswith("gpu_"))


def test_missing_tres_is_a_gap_not_zero():
    """Job 16 of the local stack (--gres=gpu:1), captured without the usage TRES columns
    (Slurm 22.05 without GPU accounting): no GPU figure, and the report says why."""
    report = tres_report("16", fixture="local-jobs-11-16.psv")
    assert report.gpus == 1
    assert report.gpu_utilization is None and gpu_memory_peak(report) is None
    assert report.usage.gpu_utilization == () and report.usage.gpu_figures_from is None
    assert tres_gaps(report) == [
        "no step of this job has gres/gpuutil or gres/gpumem in its usage TRES (not recorded "
        "by Slurm's GPU accounting here), so its GPU utilisation and memory are not known"]
    out = " ".join(text.render(report).split())
    assert "Data from Slurm's TRES (gres/gpuutil, gres/gpumem) unavailable: no step" in out
    data = json.loads(json_renderer.render(report))
    assert data["series"]["gpu_utilization"] == [] and data["usage"]["gpu_figures_from"] is None
    assert AUDIT_LINE in report.usage.queries  # the source it would have used, named


def test_a_running_job_has_no_tres_yet():
    """8298012: running on a V100; slurmdbd has no usage TRES of its running steps yet."""
    report = tres_report("8298012")
    assert report.gpu_utilization is None
    assert tres_gaps(report) and "when the step ends" in tres_gaps(report)[0]


def test_without_tres_the_report_is_unchanged():
    """JOBREPORT_GPU_METRICS=jobs (the default): the same capture gets no TRES figures."""
    report = show(sacct_answer(HB, job="7965768"), "7965768")
    assert report.usage.gpu_utilization == () and not tres_gaps(report)
    assert AUDIT_LINE not in report.usage.queries
