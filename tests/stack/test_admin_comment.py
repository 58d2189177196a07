"""JOBREPORT_ADMIN_COMMENT on the real stack: `jobreport sync` writes a synced job's
summary into its Slurm AdminComment in jobstats' format, reportseff (the real tool, from
PyPI) shows our report's figures from it, and a comment the site wrote is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.stack import BUSY, IDLE_GPU, StackJob, off_debug, submit, wait_until_done
from webapp.report.jobstats_history import NOTE
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.jobstats_comment import figures, parse_comment
from webapp.sync.options import SyncOptions
from webapp.sync.run import Syncer

pytestmark = pytest.mark.stack

REPORTSEFF = "reportseff==2.10.3"
REPORTSEFF_VENV = Path(os.environ.get("JOBREPORT_TEST_REPORTSEFF_VENV", "/tmp/reportseff-venv"))
# scripts/dev-stack grants this user SELECT and UPDATE(admin_comment) on demo_job_table only.
COMMENT_DB_URL = "mysql://jobreport_comment:jobreport-comment-demo@127.0.0.1:3306/slurm_acct_db"
SITE_NOTE = "requeued by staff: node fault"

JOBS = (
    # one core of two busy, one (fake, idle) GPU: CPU ~50%, GPU 0%
    StackJob("comment-gpu", "alice", ("-c2", *IDLE_GPU, "--mem=500M", "--time=10"),
             BUSY.format(s=25)),
    StackJob("comment-site", "bob", ("-c1", "--mem=200M", "--time=10", *off_debug("gpu4")),
             "sleep 15"),
)


@pytest.fixture(scope="module")
def reportseff() -> Path:
    """reportseff in its own venv (made here when missing: a fresh CI machine has none)."""
    exe = REPORTSEFF_VENV / "bin" / "reportseff"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(REPORTSEFF_VENV)], check=True)
        subprocess.run([str(REPORTSEFF_VENV / "bin" / "pip"), "install", "-q",
                        "--disable-pip-version-check", REPORTSEFF], check=True)
    return exe


def admin_comment(job_id: str) -> str:
    return subprocess.run(["sacct", "-X", "-n", "-P", "-o", "AdminComment", "-j", job_id],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def synced(stack_env, tmp_path_factory):
    """Both jobs ended, the site's note on one, then synced (archive only) twice."""
    tmp = tmp_path_factory.mktemp("admin-comment")
    ids = {job.name: submit(job) for job in JOBS}
    wait_until_done(list(ids.values()), timeout=3600)  # a shared stack queues for long
    subprocess.run(["sacctmgr", "-i", "modify", "job", "where", f"jobid={ids['comment-site']}",
                    "set", f"AdminComment='{SITE_NOTE}'"], check=True, capture_output=True)
    site = admin_comment(ids["comment-site"])
    assert site  # (lowercased by this Slurm's sacctmgr, as a site's own note would be)
    settings = Settings.from_env({
        **stack_env, "JOBREPORT_ARCHIVE_URL": str(tmp / "archive.sqlite"),
        "JOBREPORT_OUTBOX": str(tmp / "outbox.sqlite"), "JOBREPORT_ADMIN_COMMENT": "database",
        "JOBREPORT_ADMIN_COMMENT_DB_URL": COMMENT_DB_URL})
    syncer = Syncer(settings)
    try:
        for job_id in ids.values():
            result = syncer.run(SyncOptions(direction="archive", job_id=job_id))
            assert result.error is None, result.error
        first = {name: admin_comment(jid) for name, jid in ids.items()}
        for job_id in ids.values():
            syncer.run(SyncOptions(direction="archive", job_id=job_id))
    finally:
        syncer.close()
    reports = {name: ReportService(settings).build(jid) for name, jid in ids.items()}
    return ids, {**first, "site-before": site}, reports


def test_synced_job_has_a_jobstats_comment(synced):
    ids, first, reports = synced
    comment = admin_comment(ids["comment-gpu"])
    assert comment.startswith("JS1:H4sI")
    assert comment == first["comment-gpu"]  # a second sync changed nothing
    report = reports["comment-gpu"]
    got = figures(parse_comment(comment))
    assert got.cpu_efficiency == pytest.approx(report.cpu_efficiency, abs=0.01)
    assert got.gpu_utilization == pytest.approx(report.gpu_utilization, abs=0.01)


def test_the_sites_comment_is_kept(synced):
    ids, first, _ = synced
    assert first["site-before"] == first["comment-site"] == admin_comment(ids["comment-site"])


def _percent(text: str) -> float:
    return float(text.rstrip("%"))


def test_reportseff_shows_our_figures(synced, reportseff):
    ids, _, reports = synced
    job_id = ids["comment-gpu"]
    out = subprocess.run([str(reportseff), "--no-color", "-p", "--format",
                          "JobID,CPUEff,MemEff,GPUEff,GPUMem", job_id],
                         check=True, capture_output=True, text=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    header, row = rows[0], next(r for r in rows[1:] if r[0].strip() == job_id)
    shown = dict(zip((h.strip() for h in header), (v.strip() for v in row), strict=True))
    report = reports["comment-gpu"]
    assert _percent(shown["CPUEff"]) == pytest.approx(100 * report.cpu_efficiency, abs=1)
    assert _percent(shown["MemEff"]) == pytest.approx(100 * report.memory_efficiency, abs=1)
    assert _percent(shown["GPUEff"]) == pytest.approx(100 * report.gpu_utilization, abs=1)


def test_a_report_without_prometheus_reads_the_comment(synced, stack_env, tmp_path):
    """A site moving from jobstats: the job's series are gone (no Prometheus here) and it
    was never archived, so the report takes memory and GPU figures from its summary."""
    ids, _, reports = synced
    lost = Settings.from_env({**stack_env, "JOBREPORT_PROMETHEUS_URL": "",
                              "JOBREPORT_ARCHIVE_URL": str(tmp_path / "empty.sqlite")})
    report = ReportService(lost).build(ids["comment-gpu"])
    before = reports["comment-gpu"]
    assert NOTE in report.notes
    assert report.gpu_utilization == pytest.approx(before.gpu_utilization, abs=0.001)
    assert report.memory_peak_bytes == before.memory_peak_bytes
    assert report.cpu_efficiency == pytest.approx(before.cpu_efficiency)
