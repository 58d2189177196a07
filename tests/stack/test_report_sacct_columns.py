"""The report asks sacct without AllocTRES once the accounting view has answered (a TRES
column costs sacct a second slurmdbd request): on real jobs every figure is the one the
report gives with every column, GPUs, memory and billing coming from the view's
tres_alloc."""

from __future__ import annotations

import dataclasses

import pytest

from tests.helpers.every_column import EveryColumn
from webapp.model import JobId, JobReport
from webapp.report.service import ReportService

JOBS = ("busy", "gpu-untouched", "oom", "multi-task", "steps", "array", "two-cpus-one-used")


def figures(report: JobReport) -> dict:
    """Every field of the report but the series and the queue context: Prometheus' and the
    view's, read afresh by each build (the cluster's state moves between two builds)."""
    out = dataclasses.asdict(report)
    out.pop("usage")
    out.pop("queue")
    return out


@pytest.fixture(scope="module")
def with_every_column(settings, service):
    sacct = EveryColumn(service.sacct)
    return ReportService(settings, sacct=sacct, prometheus=service.prometheus)


@pytest.mark.parametrize("name", JOBS)
def test_the_figures_do_not_need_alloctres(stack_jobs, service, with_every_column, name):
    job_id = stack_jobs[name]
    lean = service.build(job_id, sizing=False, archive_fallback=False)
    full = with_every_column.build(job_id, sizing=False, archive_fallback=False)
    assert figures(lean) == figures(full)
    if name == "gpu-untouched":
        assert lean.gpus == 1 and lean.billing and lean.memory_requested_bytes


def test_without_the_view_sacct_still_gives_gpus_and_billing(stack_jobs, service):
    job = service.sacct.job(JobId.parse(stack_jobs["gpu-untouched"]))
    assert job.gpus == 1 and job.billing
    lean = service.sacct.job_figures(JobId.parse(stack_jobs["gpu-untouched"]))
    assert lean.gpus == 0 and lean.billing is None  # why job_figures needs the view
