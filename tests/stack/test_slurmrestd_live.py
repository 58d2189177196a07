"""slurmrestd as the jobs source on the real stack: for real jobs, the records it gives are
sacct's, field by field, and the report built from it equals the one built from sacct.

The test starts its own slurmrestd (the Debian package dev-stack installs) on a Unix
socket with rest_auth/local, as an unprivileged user: it needs no JWT and no restart of
the stack's daemons. The JWT path (`http://127.0.0.1:6820`) is the same source with a
token header (tests/test_slurmrestd.py)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers.stack import (
    BUSY,
    IDLE_GPU,
    StackJob,
    submit,
    wait_for_scrape_after,
    wait_until_done,
)
from tests.helpers.wait import wait_for
from webapp.report.service import ReportService
from webapp.sources.sacct import SacctSource
from webapp.sources.slurmrestd import SlurmrestdSource

pytestmark = pytest.mark.stack

JOBS = (
    StackJob("restd-steps", "alice", ("-c2", "--mem=300M", "--time=10"),
             "srun -c2 -n1 sh -c 'timeout 8 sh -c \"while :; do :; done\"; exit 0'; sleep 2"),
    StackJob("restd-array", "bob", ("-c1", "--mem=200M", "--time=10", "--array=1-2"),
             "sleep 6"),
    StackJob("restd-gpu", "alice", ("-c1", *IDLE_GPU, "--mem=200M", "--time=10"),
             BUSY.format(s=8)),
)


@pytest.fixture(scope="module")
def restd():
    """slurmrestd on a Unix socket, run as nobody; its URL. (Its folder sits directly in
    /tmp: pytest's own temporary folders are root's alone.)"""
    exe = shutil.which("slurmrestd") or "/usr/sbin/slurmrestd"
    tmp = Path(tempfile.mkdtemp(prefix="jobreport-restd-"))
    shutil.chown(tmp, "nobody")
    sock, log = tmp / "restd.sock", tmp / "restd.log"
    with log.open("wb") as out:
        # slurmrestd itself is the child (no runuser between): terminate() reaches it.
        proc = subprocess.Popen(
            [exe, "-a", "rest_auth/local", "-s", "openapi/v0.0.38,openapi/dbv0.0.38",
             f"unix:{sock}"], user="nobody", group="nogroup", extra_groups=[],
            stdout=out, stderr=subprocess.STDOUT)

    def listening() -> bool:
        assert proc.poll() is None, log.read_text()
        return sock.exists()

    wait_for(listening, 20, lambda: f"slurmrestd's socket: {log.read_text()}", every=0.1)
    yield f"unix:{sock}"
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def ended(stack_env):
    ids = {job.name: submit(job) for job in JOBS}
    wait_until_done(list(ids.values()), timeout=3600)  # a shared stack queues for long
    # Their last samples in: two builds a moment apart must read the same series.
    wait_for_scrape_after(stack_env["JOBREPORT_PROMETHEUS_URL"], time.time())
    return ids


def test_same_records_as_sacct(restd, ended, settings):
    cli = SacctSource(settings.sacct, cluster=settings.cluster)
    api = SlurmrestdSource(restd, cluster=settings.cluster)
    for job_id in (ended["restd-steps"], ended["restd-gpu"], f"{ended['restd-array']}_2"):
        assert api.job(job_id) == cli.job(job_id), job_id
    assert api.job(ended["restd-steps"]).steps  # the srun step and the batch step
    assert api.job(ended["restd-gpu"]).gpus == 1
    assert api.array(ended["restd-array"]) == cli.array(ended["restd-array"])


def test_same_report_from_either_source(restd, ended, settings):
    rest = dataclasses.replace(settings, sacct_source="slurmrestd", slurmrestd_url=restd,
                               sizing_cache_seconds=0)
    a = ReportService(dataclasses.replace(settings, sizing_cache_seconds=0))
    b = ReportService(rest)
    assert isinstance(b.sacct, SlurmrestdSource)
    for job_id in (*ended.values(), f"{ended['restd-array']}_1"):
        ra, rb = a.build(job_id), b.build(job_id)
        # Not the queue context: it is read from Prometheus alone (the slurm-exporter's
        # series over the wait), whichever source lists the job, and a late scrape of the
        # wait's last moment may land between the two builds; its inputs (partition,
        # submit and start) are compared here with the rest.
        differ = [f.name for f in dataclasses.fields(ra)
                  if f.name != "queue" and getattr(ra, f.name) != getattr(rb, f.name)]
        assert differ == [], (job_id, differ)
    steps = b.build(ended["restd-steps"])
    assert steps.cpu_seconds and len(steps.steps) >= 2  # figures really came from it
