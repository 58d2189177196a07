"""slurmrestd as the jobs source: its answers give the very records sacct gives for the
same jobs (real captures of both, same stack, same minute), and the source's behaviour on
a Unix socket and on errors."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from jobreport_common.slurm_values import parse_tres
from tests.helpers.sacct_fields import CAPTURED_FIELDS
from webapp.model import JobNotFound, SacctJob, SourceUnavailable
from webapp.settings import Settings, SettingsError
from webapp.sources.sacct import parse_sacct
from webapp.sources.sacct_values import parse_memory
from webapp.sources.slurmrestd import SlurmrestdSource
from webapp.sources.slurmrestd_jobs import exit_code, parse_jobs

CAPTURES = Path(__file__).parent.parent / "fixtures" / "slurmrestd"
JOBS = ("1", "3", "7", "12", "13", "29", "37")


def answer(job: str) -> dict:
    return json.loads((CAPTURES / f"dbv0.0.38_job_{job}.json").read_text())


def sacct_records() -> dict[str, object]:
    text = (CAPTURES / "sacct_parsable2_same_jobs.psv").read_text()
    return {j.job_id: j for j in parse_sacct(text)}


def without_qos(record: SacctJob) -> SacctJob:
    """The record as the capture's sacct line reads: sacct was asked without QOS then
    (tests/helpers/sacct_fields), so slurmrestd's QoS, the stack's only one, is checked
    on its own."""
    assert record.qos == "normal", record.job_id
    return dataclasses.replace(record, qos=None)


@pytest.mark.parametrize("job", JOBS)
def test_same_records_as_sacct(job):
    expected = sacct_records()
    rows = parse_jobs(answer(job))
    assert rows
    for raw_id, record in rows:
        assert without_qos(record) == expected[record.job_id], record.job_id
        assert record.raw_id == raw_id


def test_the_captures_cover_what_the_report_reads():
    records = {j.job_id: j for job in JOBS for _, j in parse_jobs(answer(job))}
    assert records["7"].state == "OUT_OF_MEMORY" and records["7"].exit_code == "0:125"
    assert records["37"].gpus == 1 and records["37"].cancelled_by == 0
    assert {"12_1", "12_2", "12_3", "12_4"} <= records.keys()
    assert records["12_4"].raw_id == "12"
    assert [s.step_id for s in records["13"].steps] == ["batch", "0"]
    assert records["13"].steps[1].tasks == 2
    assert records["1"].time_limit_seconds is None
    assert records["29"].steps == () and records["29"].memory_requested_bytes == 100 * 2**20


@pytest.mark.parametrize(("value", "text"), [
    ({"status": "SUCCESS", "return_code": 0}, "0:0"),
    ({"status": "FAILED", "return_code": 3}, "3:0"),
    ({"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 9, "name": "Killed"}},
     "0:9"),
])
def test_exit_code_reads_as_sacct_prints_it(value, text):
    assert exit_code(value) == text


class Replay:
    """Answers captured answers by path; records the requests."""

    def __init__(self, status: int = 200) -> None:
        self.status, self.requests = status, []

    def __call__(self, path: str, headers):
        self.requests.append((path, dict(headers)))
        if path == "/openapi/v3":  # what slurmrestd 22.05 lists: v0.0.38 alone
            return 200, gzip.decompress((CAPTURES / "openapi-v3-slurm-22.05.8.json.gz")
                                        .read_bytes())
        job = path.split("/job/")[-1].split("?")[0]
        name = CAPTURES / f"dbv0.0.38_job_{job}.json"
        body = name.read_bytes() if name.exists() else json.dumps(
            {"errors": [{"error_number": 9003, "error": "Nothing found with query"}],
             "jobs": []}).encode()
        return self.status, body


def test_source_finds_jobs_tasks_and_arrays(tmp_path):
    token = tmp_path / "jwt"
    token.write_text("SLURM_JWT=abc.def.ghi\n")
    replay = Replay()
    src = SlurmrestdSource("http://127.0.0.1:6820", user="slurm", token_file=str(token),
                           cluster="demo", transport=replay)
    assert src.job("13").job_name == sacct_records()["13"].job_name
    assert [t.job_id for t in src.array("12")] == ["12_1", "12_2", "12_3", "12_4"]
    assert src.job("12").job_id == "12_4"  # the raw id 12 is task 4's own
    assert replay.requests[0][0] == "/openapi/v3"
    path, headers = replay.requests[1]
    assert path == "/slurmdb/v0.0.38/job/13?cluster=demo"
    assert headers["X-SLURM-USER-TOKEN"] == "abc.def.ghi"
    assert headers["X-SLURM-USER-NAME"] == "slurm"
    with pytest.raises(JobNotFound):
        src.job("99")


def test_source_errors_are_gaps():
    with pytest.raises(SourceUnavailable, match="authentication"):
        SlurmrestdSource("http://x", transport=Replay(status=401)).job("13")
    with pytest.raises(SourceUnavailable):
        SlurmrestdSource("unix:/nonexistent/restd.sock").job("13")
    # what slurmrestd 22.05 answers (HTTP 200) when slurmdbd refuses the JWT
    refused = {"errors": [{"error_number": 1007, "error": "Protocol authentication error",
                           "source": "slurmdb_jobs_get"}], "jobs": []}
    with pytest.raises(SourceUnavailable, match="authentication"):
        parse_jobs(refused)


def test_source_setting():
    assert Settings.from_env({}).sacct_source == "sacct"
    assert Settings.from_env({"JOBREPORT_SACCT_SOURCE": "slurmrestd"}).slurmrestd_url == \
        "http://127.0.0.1:6820"
    with pytest.raises(SettingsError, match="JOBREPORT_SACCT_SOURCE"):
        Settings.from_env({"JOBREPORT_SACCT_SOURCE": "squeue"})


def test_a_pending_array_reads_as_sacct_prints_it():
    text = (CAPTURES / "sacct_parsable2_job_346_pending_array.psv").read_text()
    expected = parse_sacct(text, CAPTURED_FIELDS)[0]
    (raw_id, record), = parse_jobs(answer("346_pending_array"))
    assert without_qos(record) == expected and record.job_id == "346_[1-2]" and raw_id == "346"


def test_a_failed_job_said_to_succeed_has_no_exit_code():
    # slurmrestd 22.05 answered this for job 77 of the stack, which sacct shows as 3:0
    assert exit_code({"status": "SUCCESS", "return_code": 0}, "FAILED") == ""
    assert exit_code({"status": "SUCCESS", "return_code": 0}, "COMPLETED") == "0:0"


@pytest.mark.parametrize("job", JOBS)
def test_the_steps_usage_tres_read_as_sacct_prints_it(job):
    # JOBREPORT_GPU_METRICS=tres reads gres/gpuutil and gres/gpumem from a step's usage
    # TRES; slurmdb's "requested" max is TRESUsageInMax, whose mem is the step's MaxRSS.
    expected = sacct_records()
    steps = 0
    for _, record in parse_jobs(answer(job), gpu_tres=True):
        for step, same in zip(record.steps, expected[record.job_id].steps, strict=True):
            assert step.tres_usage_in_tot and step.tres_usage_in_ave
            mem = parse_tres(step.tres_usage_in_max or "").get("mem")
            assert mem is not None and parse_memory(mem) == same.max_rss_bytes, step
            steps += 1
    assert steps or job in ("1", "29")  # never started: no steps
    # without it, the very record sacct gives (which asks the columns only then)
    assert all(s.tres_usage_in_max is None for _, r in parse_jobs(answer(job)) for s in r.steps)
