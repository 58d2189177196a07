"""promtool check metrics on what the stack's exporters serve, scraped from the URLs
the stack's Prometheus scrapes, while a job of this test runs (so the per-job families are
there too)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
import requests

from tests.helpers import stack
from tests.helpers.promtool import check_metrics
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.stack

# A small job that fits beside others: what matters is that it runs while we scrape.
JOB = stack.StackJob("promtool", "alice", ("-c1", "--mem=100M", "--time=2"), "sleep 60")


@pytest.fixture(scope="module")
def running_job(stack_env: dict[str, str]) -> Iterator[str]:
    job_id = stack.submit(JOB)
    try:
        stack.wait_until_running(job_id)
        yield job_id
    finally:
        subprocess.run(["scancel", job_id], check=True)


def scrape_urls(prometheus_url: str) -> dict[tuple[str, str], str]:
    """(scrape job, instance) -> the URL the stack's Prometheus scrapes it at."""
    answer = requests.get(f"{prometheus_url}/api/v1/targets", timeout=10).json()
    return {(t["labels"]["job"], t["labels"]["instance"]): t["scrapeUrl"]
            for t in answer["data"]["activeTargets"]}


def scrape_showing(url: str, marker: str) -> str:
    """The exposition once it holds ``marker``: the jobs exporter sees the job's cgroup,
    and slurm-exporter's next poll its state, a moment after Slurm says RUNNING."""
    def showing() -> str | None:
        text = requests.get(url, timeout=30).text
        return text if marker in text else None

    return wait_for(showing, 30, f"{marker} in the exposition at {url}")


@pytest.mark.parametrize("exporter", ["jobs", "slurm"])
def test_running_exporter_passes_promtool(stack_env: dict[str, str], running_job: str,
                                          exporter: str):
    urls = scrape_urls(stack_env["JOBREPORT_PROMETHEUS_URL"])
    # The jobs-exporter of the node the job runs on; this cluster's slurm-exporter (the VM
    # clusters' are scraped beside it, each labelled with its node).
    host = socket.gethostname().split(".")[0]
    (url,) = [u for (job, instance), u in urls.items() if job == exporter and (
        instance == host if exporter == "slurm" else instance == stack.node_of(running_job))]
    cluster = stack_env["JOBREPORT_CLUSTER"]
    marker = {"jobs": f'jobs_info{{jobid="{running_job}"',
              "slurm": f'slurm_user_jobs{{cluster="{cluster}",state="RUNNING",user="alice"}}'}
    text = scrape_showing(url, marker[exporter])
    assert marker[exporter] in text
    assert check_metrics(text) == (0, "")
