"""slurmrestd's newer accounting APIs (Slurm 24.11: v0.0.40-42; 26.05: v0.0.42-45): each
captured job reads as the very record sacct's parser makes of the same job, captured the
same minute on the same cluster (fixtures/slurmrestd, see fixtures/SOURCES.md); the
source asks /openapi/v3 once which version to speak; its errors are gaps or JobNotFound.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import socket
from pathlib import Path

import pytest

from tests.helpers.sacct_fields import as_captured
from webapp.model import JobNotFound, SacctJob, SourceUnavailable
from webapp.sources import slurmrestd_jobs
from webapp.sources.sacct import SacctSource, parse_sacct
from webapp.sources.slurmrestd import APIS, SlurmrestdSource, pick_api
from webapp.sources.slurmrestd_jobs import parse_jobs

CAPTURES = Path(__file__).parent.parent / "fixtures" / "slurmrestd"
# cluster -> (its slurmrestd's newest API, Slurm release, its jobs by what they show)
CLUSTERS = {
    "v24": ("v0.0.42", "24.11.5", {"steps": "5", "failed": "6", "oom": "7", "cancelled": "8",
                                   "timeout": "9", "array": "10", "het-step": "71",
                                   "cancelled-pending-het": "11", "running": "13",
                                   "exit137": "73"}),
    "v26": ("v0.0.45", "26.05.5", {"steps": "7", "failed": "8", "oom": "9", "cancelled": "10",
                                   "timeout": "11", "array": "12", "het-step": "73",
                                   "cancelled-pending-het": "13", "running": "15",
                                   "exit137": "75"}),
}
# The older versions each cluster also serves, captured for its steps job.
OLDER = [("v24", "v0.0.40"), ("v24", "v0.0.41"), ("v26", "v0.0.42"), ("v26", "v0.0.43"),
         ("v26", "v0.0.44")]
# The VMs' /etc/passwd: slurmrestd names who cancelled, sacct gives the uid, and the
# source maps the name on the machine it runs on (a site's shared user database).
VM_UIDS = {"root": 0, "alice": 1001, "bob": 1002}
# A return code of 128 or more: 22.05's and 24.11's sacct print it less 128 (`exit 137`:
# 9:0), 26.05's as it is (137:0), as slurmrestd gives it and the accounting view reads it
# (webapp.sources.accounting.exit_code_text); the source keeps the code the job returned.
SACCT_LESS_128 = {"v24"}
# The sacct captures were asked for FIELDS before it had QOS (tests/helpers/sacct_fields):
# slurmrestd's QoS, the VMs' only one, is checked on its own.
QOS = "normal"
# The running job's Elapsed is counted to the moment of each query; the two commands ran
# within the capture's 90 s (v24's answers came 10 s apart, v26's 1 s).
CAPTURE_SECONDS = 90


@pytest.fixture(autouse=True)
def vm_users(monkeypatch):
    monkeypatch.setattr(slurmrestd_jobs, "_uid", VM_UIDS.get)


def answer(name: str) -> dict:
    return json.loads((CAPTURES / name).read_text())


def sacct_text(cluster: str, what: str = "jobs") -> str:
    return (CAPTURES / f"sacct-{cluster}-{what}.psv").read_text()


def sacct_records(cluster: str) -> dict[str, SacctJob]:
    return {j.job_id: j for what in ("jobs", "het-step", "exit137")
            for j in parse_sacct(sacct_text(cluster, what))}


def openapi(release: str) -> dict:
    return json.loads(gzip.decompress((CAPTURES / f"openapi-v3-slurm-{release}.json.gz")
                                      .read_bytes()))


def without_qos(rest: SacctJob) -> SacctJob:
    """slurmrestd's record as the capture's sacct line reads (no QOS asked then)."""
    assert rest.qos == QOS, rest.job_id
    return dataclasses.replace(rest, qos=None)


def assert_same(rest: SacctJob, cli: SacctJob) -> None:
    """Field by field (steps too), so a failure names the field."""
    rest = without_qos(rest)
    if rest.state == "RUNNING":
        assert 0 <= rest.elapsed_seconds - cli.elapsed_seconds <= CAPTURE_SECONDS
        rest = dataclasses.replace(rest, elapsed_seconds=cli.elapsed_seconds, steps=tuple(
            dataclasses.replace(s, elapsed_seconds=c.elapsed_seconds)
            for s, c in zip(rest.steps, cli.steps, strict=True)))
    for field in dataclasses.fields(SacctJob):
        if field.name != "steps":
            assert getattr(rest, field.name) == getattr(cli, field.name), field.name
    assert len(rest.steps) == len(cli.steps)
    for mine, theirs in zip(rest.steps, cli.steps, strict=True):
        assert dataclasses.astuple(mine) == dataclasses.astuple(theirs), mine.step_id
    assert rest == cli


CASES = [(c, api, what, job) for c, (api, _, jobs) in CLUSTERS.items()
         for what, job in jobs.items()]


@pytest.mark.parametrize(("cluster", "api", "what", "job"), CASES,
                         ids=[f"{c}-{what}" for c, _, what, _ in CASES])
def test_same_records_as_sacct(cluster, api, what, job):
    expected = sacct_records(cluster)
    rows = parse_jobs(answer(f"{api}-{cluster}-job-{job}.json"))
    assert rows
    for raw_id, record in rows:
        cli = expected[record.job_id]
        if what == "exit137" and cluster in SACCT_LESS_128:
            assert (record.exit_code, cli.exit_code) == ("137:0", "9:0")
            assert [s.exit_code for s in cli.steps] == ["9:0"]
            cli = dataclasses.replace(cli, exit_code="137:0", steps=tuple(
                dataclasses.replace(s, exit_code="137:0") for s in cli.steps))
        assert_same(record, cli)
        assert record.raw_id == raw_id


@pytest.mark.parametrize(("cluster", "api"), OLDER)
def test_older_versions_read_alike(cluster, api):
    newest, _, jobs = CLUSTERS[cluster]
    (_, record), = parse_jobs(answer(f"{api}-{cluster}-job-{jobs['steps']}.json"))
    (_, same), = parse_jobs(answer(f"{newest}-{cluster}-job-{jobs['steps']}.json"))
    assert_same(record, sacct_records(cluster)[jobs["steps"]])
    assert record == same


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_captures_cover_what_the_report_reads(cluster):
    api, _, jobs = CLUSTERS[cluster]
    rec = {j.job_id: j for job in jobs.values()
           for _, j in parse_jobs(answer(f"{api}-{cluster}-job-{job}.json"))}
    steps = rec[jobs["steps"]]
    assert steps.gpus == 1 and steps.memory_requested_bytes == 200 * 2**20
    assert [s.step_id for s in steps.steps] == ["batch", "0", "1"]
    assert steps.steps[1].tasks == 2 and steps.steps[1].total_cpu_seconds > 19
    assert steps.steps[2].max_rss_bytes > 60 * 2**20 and steps.steps[2].max_rss_node
    assert rec[jobs["failed"]].exit_code == "3:0"
    assert rec[jobs["failed"]].memory_requested_bytes == 100 * 2**20  # 100M per CPU
    assert rec[jobs["failed"]].time_limit_kind.value == "unlimited"
    assert rec[jobs["oom"]].state == "OUT_OF_MEMORY" and rec[jobs["oom"]].exit_code == "0:125"
    assert rec[jobs["cancelled"]].cancelled_by == 1001
    assert rec[jobs["timeout"]].state == "TIMEOUT" and rec[jobs["timeout"]].time_limit_seconds == 60
    array = jobs["array"]
    assert {f"{array}_1", f"{array}_2", f"{array}_3"} <= rec.keys()
    assert rec[f"{array}_3"].raw_id == array  # the last task keeps the array's id
    # `srun A : B` in a one-node job: component 0 ran, 1 found no node of its own
    hetstep = rec[jobs["het-step"]]
    assert [s.step_id for s in hetstep.steps] == ["batch", "0+0"]
    assert hetstep.state == "FAILED" and hetstep.exit_code == "1:0"
    assert rec[jobs["cancelled-pending-het"]].cpus == 0  # sacct: no allocation, AllocCPUS 0
    assert rec[jobs["running"]].state == "RUNNING" and rec[jobs["running"]].end_time is None


def test_het_ids_of_either_shape():
    """A het job never ran on the one-node VMs (backfill places each component on a node
    of its own), so its ids are read here from literal answers, one per shape."""
    new = {"job_id": 59, "array": {"job_id": 0, "task_id": {"set": False}, "task": ""},
           "het": {"job_id": 58, "job_offset": {"set": True, "infinite": False, "number": 1}}}
    old = {"job_id": 59, "array": {"job_id": 0, "task_id": None, "task": None},
           "het": {"job_id": 58, "job_offset": 1}}
    assert slurmrestd_jobs.display_id(new) == slurmrestd_jobs.display_id(old) == "58+1"
    new["het"]["job_offset"] = {"set": False, "infinite": False, "number": 0}
    assert slurmrestd_jobs.display_id(new) == "59"


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_array_tasks_as_sacct_lists_them(cluster):
    api, _, jobs = CLUSTERS[cluster]
    cli = as_captured(SacctSource(runner=lambda argv: sacct_text(cluster), delimiter="|"))
    rest = SlurmrestdSource("http://vm", transport=Replay(cluster))
    tasks = tuple(without_qos(t) for t in rest.array(jobs["array"]))
    assert tasks == cli.array(jobs["array"])


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_admin_comment_as_sacct_prints_it(cluster):
    api, _, jobs = CLUSTERS[cluster]
    rest = SlurmrestdSource("http://vm", transport=Replay(cluster))
    cli = SacctSource(runner=lambda argv: sacct_text(cluster, "admin-comment"), delimiter="|")
    for job in (jobs["steps"], jobs["failed"]):
        assert rest.admin_comment(job) == cli.admin_comment(job)
    assert rest.admin_comment(jobs["steps"]) == f"JS1:restd-capture-{cluster} Mixed Case"


# --- which version: /openapi/v3, once --------------------------------------------------

@pytest.mark.parametrize(("release", "api"), [
    ("22.05.8", "v0.0.38"), ("24.11.5", "v0.0.42"), ("26.05.5", "v0.0.45")])
def test_probing_picks_the_newest_known(release, api):
    assert pick_api(openapi(release)["paths"]) == api


def test_an_unknown_newer_version_falls_back_to_the_newest_known():
    paths = dict(openapi("26.05.5")["paths"])
    # what a later release would add: 26.05's newest paths under a version not known here
    paths.update({p.replace("v0.0.45", "v0.0.46"): v for p, v in paths.items()
                  if "/v0.0.45/" in p})
    assert "v0.0.46" not in APIS
    assert pick_api(paths) == "v0.0.45"
    old = {p.replace("v0.0.38", "v0.0.37"): v for p, v in openapi("22.05.8")["paths"].items()}
    assert pick_api(old) is None
    with pytest.raises(SourceUnavailable, match="none of the accounting APIs"):
        SlurmrestdSource("http://x", transport=Replay("v26", paths=old)).job("7")


class Replay:
    """One VM's slurmrestd from its captures: /openapi/v3, then each job by path (an
    unknown one as that version answers it); records the paths asked for."""

    def __init__(self, cluster: str, paths: dict | None = None,
                 status: dict[str, tuple[int, bytes]] | None = None) -> None:
        self.cluster, self.requests = cluster, []
        api, release, _ = CLUSTERS[cluster]
        self.doc = {"paths": paths} if paths is not None else openapi(release)
        self.api, self.status = api, status or {}

    def __call__(self, path: str, headers):
        self.requests.append(path)
        if path in self.status:
            return self.status[path]
        if path == "/openapi/v3":
            return 200, json.dumps(self.doc).encode()
        api, _, rest = path.removeprefix("/slurmdb/").partition("/job/")
        name = CAPTURES / f"{api}-{self.cluster}-job-{rest.split('?')[0]}.json"
        if not name.exists():
            name = CAPTURES / f"{self.api}-{self.cluster}-job-999999.json"
        return 200, name.read_bytes()


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_source_asks_once_and_speaks_the_newest(cluster):
    api, _, jobs = CLUSTERS[cluster]
    replay = Replay(cluster)
    src = SlurmrestdSource("http://vm", cluster=cluster, transport=replay)
    expected = sacct_records(cluster)
    for what in ("steps", "failed", "oom"):
        assert_same(src.job(jobs[what]), expected[jobs[what]])
    assert replay.requests[0] == "/openapi/v3"
    assert replay.requests.count("/openapi/v3") == 1
    assert replay.requests[1] == f"/slurmdb/{api}/job/{jobs['steps']}?cluster={cluster}"
    assert src.api() == api


def test_a_users_recent_jobs_are_filtered_there_too():
    seen = []

    def transport(path, headers):
        seen.append(path)
        if path == "/openapi/v3":
            return 200, json.dumps(openapi("24.11.5")).encode()
        return 200, (CAPTURES / "v0.0.42-v24-job-6.json").read_bytes()

    from datetime import UTC, datetime
    src = SlurmrestdSource("http://vm", transport=transport)
    since = datetime(2026, 11, 28, 20, 30, tzinfo=UTC)
    assert [j.job_id for j in src.recent(since, user="bob")] == ["6"]
    assert src.recent(since, user="alice") == ()
    # Unix seconds: a local time is refused from v0.0.40 on (HTTP 400 on 24.11, 500 on 26.05)
    assert seen[1] == f"/slurmdb/v0.0.42/jobs?start_time={int(since.timestamp())}&users=bob"


# --- errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("cluster", CLUSTERS)
def test_unknown_job_is_not_found_by_its_id(cluster):
    src = SlurmrestdSource("http://vm", transport=Replay(cluster))
    with pytest.raises(JobNotFound, match="job 999999 not found"):
        src.job("999999")
    assert src.admin_comment("999999") is None
    # an answer of 404 with JSON reads the same (the job, not the path, is unknown)
    api = CLUSTERS[cluster][0]
    body = (CAPTURES / f"{api}-{cluster}-job-999999.json").read_bytes()
    src = SlurmrestdSource("http://vm", transport=Replay(
        cluster, status={f"/slurmdb/{api}/job/4242": (404, body)}))
    with pytest.raises(JobNotFound, match="job 4242 not found"):
        src.job("4242")


@pytest.mark.parametrize(("cluster", "why"), [
    ("v24", r"Unable to connect to database \(Failed to open slurmdbd connection, "
            r"authentication error\)"),
    ("v26", r"Unable to connect to database \(Failed to open slurmdbd connection\)")])
def test_a_refused_token_is_a_gap(cluster, why):
    """A wrong JWT: /openapi/v3 still answers, slurmdbd refuses it (HTTP 502); no token at
    all: HTTP 401 from slurmrestd itself."""
    api, _, jobs = CLUSTERS[cluster]
    bad = (502, (CAPTURES / f"{api}-{cluster}-bad-token.json").read_bytes())
    src = SlurmrestdSource("http://vm", transport=Replay(
        cluster, status={f"/slurmdb/{api}/job/{jobs['steps']}": bad}))
    with pytest.raises(SourceUnavailable, match=why):
        src.job(jobs["steps"])
    none = SlurmrestdSource("http://vm", transport=Replay(
        cluster, status={"/openapi/v3": (401, b"Authentication failure")}))
    with pytest.raises(SourceUnavailable, match="HTTP 401: authentication refused"):
        none.job(jobs["steps"])


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_version_no_longer_served_is_asked_again(cluster):
    api, _, jobs = CLUSTERS[cluster]
    gone = (404, (CAPTURES / f"unknown-path-404-{cluster}.txt").read_bytes())
    replay = Replay(cluster, status={f"/slurmdb/{api}/job/{jobs['failed']}": gone})
    src = SlurmrestdSource("http://vm", transport=replay)
    with pytest.raises(SourceUnavailable, match=f"HTTP 404: {api} no longer served"):
        src.job(jobs["failed"])
    assert src.job(jobs["oom"]).state == "OUT_OF_MEMORY"
    assert replay.requests.count("/openapi/v3") == 2


def test_connection_refused_is_a_gap():
    with socket.socket() as bound:  # a port bound, not listening: refused, not a timeout
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}"
        with pytest.raises(SourceUnavailable, match="refused"):
            SlurmrestdSource(url, timeout=5).job("5")  # the real transport
