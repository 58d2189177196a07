"""The labelled job set on the real stack: each job has the findings it must have and
none it must not (tests/helpers/labelled_jobs.py), and its CPU efficiency is seff's
TotalCPU / (Elapsed x AllocCPUS) from sacct within one point."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers.labelled_jobs import EVERYTHING, LABELLED
from tests.helpers.stack import STACK_JOBS, waited_for_cpu
from webapp.sources.sacct_values import parse_sacct_duration

ROWS = {r.job: r for r in LABELLED}


def test_the_set_is_large_enough_and_names_real_jobs():
    assert len(LABELLED) >= 12 and len(ROWS) == len(LABELLED)
    assert set(ROWS) <= {j.name for j in STACK_JOBS}
    assert any(r.must_not == EVERYTHING and not r.must for r in LABELLED)  # a tidy job
    for r in LABELLED:
        assert not r.must & r.must_not, r.job


@pytest.fixture(scope="module")
def labelled(stack_jobs, service):
    return {name: service.build(stack_jobs[name]) for name in ROWS}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_labelled_job_has_its_findings_and_not_the_forbidden(labelled, service, name):
    row, report = ROWS[name], labelled[name]
    found = {f.name for f in report.findings}
    if waited_for_cpu(report, service.thresholds):
        found.discard("cpu_starved")  # starved by its neighbours on the shared cores: right
    shown = [(f.name, f.message) for f in report.findings]
    assert row.must <= found, (row.why, shown)
    forbidden = found if row.must_not == EVERYTHING else found & row.must_not
    assert not forbidden, (row.why, shown)


def _seff_cpu_efficiency(job_id: str) -> float | None:
    """seff's figure from sacct; None for a job over within the second (Elapsed 0)."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id, "--format=JobID,Elapsed,TotalCPU,AllocCPUS"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    alloc = out[0].split("|")
    elapsed, cpus = parse_sacct_duration(alloc[1]), float(alloc[3])
    total = sum(parse_sacct_duration(line.split("|")[2]) or 0 for line in out[1:])
    return total / (elapsed * cpus) if elapsed else None


@pytest.mark.parametrize("name", sorted(ROWS))
def test_cpu_efficiency_is_seffs_within_one_point(labelled, stack_jobs, name):
    report, seff = labelled[name], _seff_cpu_efficiency(stack_jobs[name])
    if seff is None:  # killed within its first second: no figure, on either side
        assert report.cpu_efficiency is None
        return
    assert report.cpu_efficiency is not None
    assert abs(report.cpu_efficiency - seff) <= 0.01


def test_the_leak_is_fitted_and_projected(labelled):
    f = next(f for f in labelled["mem-growth"].findings if f.name == "memory_growth")
    assert f.evidence["fit_r2"] >= 0.9 and f.evidence["points"] >= 5
    # ~8 MB/s written by the job; the fitted slope sees the same rate
    assert 6e6 <= f.evidence["slope_bytes_per_second"] <= 14e6
    assert f.evidence["seconds_to_limit"] > 0 and f.evidence_text


def test_v1_tells_idle_from_starved_by_the_threads_waits(labelled):
    # No pressure files on cgroup v1; the threads' scheduler waits tell instead.
    f = next(f for f in labelled["idle"].findings if f.name == "cpu_efficiency_low")
    assert "idle, not starved" in f.message and f.evidence["pressure_data"] == "no"
    assert labelled["idle"].usage.cpu_pressure_seconds is None
    assert labelled["idle"].usage.cpu_wait_seconds is not None
