"""SacctSource against the real sacct of the local stack (Slurm 22.05, see scripts/dev-stack)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

import pytest

from tests.helpers import stack
from tests.helpers.wait import wait_for
from webapp.model import JobNotFound
from webapp.report.arrays import summarize_array
from webapp.settings import Settings
from webapp.sources.sacct import FIELDS, SacctSource, parse_sacct

pytestmark = pytest.mark.stack

# The session batch's jobs (tests/helpers/stack.py): key here -> name there.
JOBS = {"steps": "sacct-steps", "exit3": "sacct-exit3", "array": "sacct-array"}
FINAL = stack.FINAL_STATES


def _wait(src: SacctSource, ids: dict[str, str], timeout: float = 600) -> None:
    def ended() -> bool:
        try:
            jobs = [src.job(ids["steps"]), src.job(ids["exit3"]), *src.array(ids["array"])]
        except JobNotFound:
            return False  # slurmdbd not told yet
        return len(jobs) == 5 and all(j.state in FINAL for j in jobs)

    wait_for(ended, timeout, f"sacct test jobs {ids} finished")


@pytest.fixture(scope="module")
def source(stack_env) -> SacctSource:
    s = Settings.from_env(stack_env)
    return SacctSource(s.sacct, timeout=s.sacct_timeout, cluster=s.cluster)


@pytest.fixture(scope="module")
def ids(source, stack_jobs) -> dict[str, str]:
    ids = {key: stack_jobs[name] for key, name in JOBS.items()}
    _wait(source, ids)
    return ids


def test_job_with_steps(source, ids):
    job = source.job(ids["steps"])
    assert job.job_id == ids["steps"] and job.user == "alice" and job.state == "COMPLETED"
    assert [s.step_id for s in job.steps][:1] == ["batch"]
    steps = {s.step_id: s for s in job.steps}
    assert steps["0"].state == "COMPLETED" and steps["1"].state == "FAILED"
    assert steps["1"].exit_code == "2:0" and steps["0"].tasks == 1
    assert job.memory_requested_bytes == 100 * 1024**2 and job.time_limit_seconds == 300
    assert job.start_time.tzinfo is UTC and job.end_time >= job.start_time
    assert job.start_time > datetime(2020, 1, 1, tzinfo=UTC)


def test_failed_exit_code(source, ids):
    job = source.job(ids["exit3"])
    assert (job.state, job.exit_code) == ("FAILED", "3:0")


def test_array_tasks_and_summary(source, ids):
    tasks = source.array(ids["array"])
    assert sorted(t.job_id for t in tasks) == [f"{ids['array']}_{i}" for i in (1, 2, 3)]
    assert source.job(f"{ids['array']}_2").job_id == f"{ids['array']}_2"
    summary = summarize_array(tasks)
    assert len(summary.tasks) == 3 and summary.elapsed_p50 is not None
    assert summary.suggested_time == "00:05:00"


def test_epoch_times_match_the_iso_times_sacct_prints(source, ids):
    # The source asks for Unix seconds; plain sacct prints this host's local time.
    iso = subprocess.run(["sacct", "--parsable2", "--noheader", "--allusers", "--format",
                          ",".join(FIELDS), "--jobs", ids["exit3"]],
                         check=True, capture_output=True, text=True).stdout
    (plain,) = parse_sacct(iso, FIELDS)
    job = source.job(ids["exit3"])
    assert (plain.start_time, plain.end_time) == (job.start_time, job.end_time)


def test_unknown_job(source):
    with pytest.raises(JobNotFound):
        source.job("99999999")
