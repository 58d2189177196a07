"""A job named with a line break and a "|" on the real stack: sacct's answers keep the
whole name and the job's figures, and every format shows the name visibly (the line break
as the two characters \\n): `jobreport show` text, JSON, PDF and the web page."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from selenium.webdriver.common.by import By

from tests.helpers import stack
from tests.helpers.browser import login, serve
from webapp.formatting import visible
from webapp.settings import SETTINGS_DOC, Settings
from webapp.sources.sacct import SacctSource
from webapp.sources.sacct_accounting import SacctJobList

pytestmark = pytest.mark.stack

NAME = "two\nlines|pipe"
SHOWN = "two\\nlines|pipe"



@pytest.fixture(scope="module")
def job_id(stack_jobs) -> str:
    """The session batch's "linebreak" job, named NAME."""
    assert next(j for j in stack.STACK_JOBS if j.name == "linebreak").job_name == NAME
    return stack_jobs["linebreak"]


@pytest.fixture(scope="module")
def source(settings) -> SacctSource:
    return SacctSource(settings.sacct, timeout=settings.sacct_timeout, cluster=settings.cluster)


def test_sacct_reads_the_whole_record(job_id, source):
    job = source.job(job_id)
    assert job.job_name == NAME and job.user == "alice" and job.cpus == 2
    assert job.state == "COMPLETED" and job.exit_code == "0:0"
    assert job.memory_requested_bytes == 300 * 2**20
    assert [s.step_id for s in job.steps] == ["batch", "0"]
    assert source.jobs([job_id])[job_id].job_name == NAME
    listing = SacctJobList(source, source.cluster or "")
    since = datetime.now(UTC) - timedelta(hours=1)
    rows = {r.job_id: r for r in listing.recent(since, user="alice")}
    assert rows[job_id].job_name == NAME and rows[job_id].submit_time is not None


def test_text_json_and_pdf_show_the_name_and_the_figures(job_id, source, tmp_path):
    job = source.job(job_id)
    cpu = sum(s.total_cpu_seconds or 0 for s in job.steps)
    shown = stack.jobreport("show", job_id, "--details")
    assert shown.returncode == 0, shown.stderr
    assert "\nlines|pipe" not in shown.stdout  # no line begins with the name's second half
    assert shown.stdout.startswith(f"Job {job_id}: {SHOWN} on demo\n")
    assert ": COMPLETED\n" in shown.stdout and " with 2 CPUs\n" in shown.stdout
    assert "CPU time from sacct, steps' TotalCPU" in shown.stdout

    data = json.loads(stack.jobreport("show", job_id, "--format", "json").stdout)
    assert data["job_name"] == NAME and data["cpus"] == 2 and data["state"] == "COMPLETED"
    assert data["cpu_seconds_source"] == "sacct_steps"
    assert data["cpu_seconds"] == pytest.approx(cpu)
    assert data["memory_requested_bytes"] == 300 * 2**20

    pdf = tmp_path / "report.pdf"
    made = stack.jobreport("show", job_id, "--format", "pdf", "-o", str(pdf))
    assert made.returncode == 0, made.stderr
    pdf_text = subprocess.run(["pdftotext", str(pdf), "-"], check=True, capture_output=True,
                              text=True).stdout
    assert f"Job {job_id}: {SHOWN}" in pdf_text and "COMPLETED (exit code 0:0)" in pdf_text


@pytest.fixture(scope="module")
def app_url(stack_env, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("linebreaks")
    base = Settings.from_env({k: v for k, v in stack_env.items() if k in SETTINGS_DOC})
    base = dataclasses.replace(base, archive_url=str(tmp / "archive.sqlite"))
    yield from serve(lambda: None, tmp, base=base)


def test_the_web_page_shows_the_name(job_id, app_url, driver):
    login(driver, app_url, job_id)
    assert driver.find_element(By.CSS_SELECTOR, "h1 .jobname").text == SHOWN == visible(NAME)
    driver.find_element(By.CSS_SELECTOR, "details#details > summary").click()  # the facts
    page = driver.find_element(By.TAG_NAME, "body").text
    assert "COMPLETED (exit code 0:0)" in page and "2 allocated" in page


def test_the_job_list_shows_the_name(job_id, app_url, driver):
    driver.get(f"{app_url}/")
    row = driver.find_element(By.CSS_SELECTOR, f'tr[data-job="{job_id}"]')
    assert row.find_element(By.CSS_SELECTOR, "td.name").text == SHOWN
