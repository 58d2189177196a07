"""On the real stack: a job that waited for another shows its wait, the reason Slurm gave
and the partition at submit; the cluster page in headless Chromium (JavaScript off)."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from selenium.webdriver.common.by import By

from tests.helpers import stack
from tests.helpers.browser import ARTIFACTS, serve, severe, wait_for_url
from tests.helpers.wait import wait_for
from webapp.renderers import text
from webapp.report.service import ReportService
from webapp.settings import SETTINGS_DOC, Settings


# Both want every CPU of one node (the last CPU node): the second waits for the first
# (Resources, or Priority behind other queued jobs). Its hour-long limit is far past the
# partition's minutes.
def first_and_second(node: str) -> tuple[stack.StackJob, stack.StackJob]:
    return (stack.StackJob("queue-first", "bob", ("-c2", "-w", node, "--mem=100M", "--time=5"),
                           "sleep 20"),
            stack.StackJob("queue-second", "alice", ("-c2", "-w", node, "--mem=100M",
                                                     "--time=60"), "sleep 1"))


def partition_cpus(partition: str) -> int:
    """sinfo's total CPUs of a partition (``%C``: allocated/idle/other/total)."""
    out = subprocess.run(["sinfo", "-h", "-p", partition, "-o", "%C"], capture_output=True,
                         text=True, check=True).stdout
    return int(out.strip().split("/")[-1])


@pytest.fixture(scope="module")
def waited(stack_env, stack_jobs) -> Iterator[tuple[str, str]]:
    # After the session's jobs: "usual" needs 20 jobs in the partition, and a fresh
    # machine's accounting holds no others.
    node = [n.name for n in stack.nodes() if n.partition == "debug"][-1]
    ids = tuple(stack.submit(job) for job in first_and_second(node))
    try:
        stack.wait_until_done(list(ids), timeout=300)
        yield ids
    finally:
        subprocess.run(["scancel", *ids], check=False)


def test_a_job_that_waited_shows_its_wait_and_reason(waited, stack_env):
    first, second = waited
    # Only this branch's settings: the stack may already export settings of others.
    settings = Settings.from_env({k: v for k, v in stack_env.items() if k in SETTINGS_DOC})
    service = ReportService(dataclasses.replace(
        settings, thresholds=dataclasses.replace(settings.thresholds, queue_wait_min_seconds=10)))
    report = service.build(second)
    q = report.queue
    assert q is not None and q.seen, report.gaps
    assert q.pending_seconds >= 10
    reasons = {r.reason for r in q.reasons}
    # It waited for the first job; a loaded machine's slurmd answering late may also have
    # the node read unavailable for a while (seen beside two more busy loops).
    assert reasons & {"Resources", "Priority"}, reasons
    assert reasons <= {"Resources", "Priority", "ReqNodeNotAvail"}, reasons
    total = partition_cpus("debug")
    assert q.cpus_total == total and q.queue_length is not None
    out = text.render(report, details=True)
    assert "Pending reasons" in out and f"of {total} CPUs idle" in out
    names = {f.name for f in report.findings}
    assert "time_limit_past_usual" in names  # 60 min against the partition's minutes
    assert "time_limit_past_usual" not in {f.name for f in service.build(first).findings}


@pytest.fixture
def app_url(stack_env, tmp_path) -> Iterator[str]:
    yield from serve(lambda: None, tmp_path)  # default settings: the stack's Prometheus


@pytest.fixture
def gpu_held(stack_env) -> Iterator[str]:
    """A GPU job of the test's own, running and seen by Prometheus: the usage chart's
    points are the allocations at instants a grid step apart (10 minutes over its week),
    so without one the chart had a point only where another test's GPU job happened to
    run within five minutes before one (run aj: none, and no chart)."""
    job_id = stack.submit(stack.StackJob("cluster-page-gpu", "bob", (
        "-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:1", "--time=5"), "sleep 300"))
    url = f"{stack_env['JOBREPORT_PROMETHEUS_URL']}/api/v1/query"

    def allocated() -> bool:
        answer = requests.get(url, timeout=10, params={
            "query": 'slurm_account_gpus_alloc{state="RUNNING",account="teaching"}'}).json()
        return any(float(r["value"][1]) >= 1 for r in answer["data"]["result"])

    try:
        stack.wait_until_running(job_id, timeout=600)
        wait_for(allocated, 60, "Prometheus holding the test's GPU allocation", every=1)
        yield job_id
    finally:
        subprocess.run(["scancel", job_id], check=False)


def test_cluster_page_in_chromium(app_url, gpu_held, driver):
    driver.get(f"{app_url}/cluster")
    assert "/login" in driver.current_url
    driver.find_element(By.ID, "username").send_keys("alice")
    driver.find_element(By.ID, "password").send_keys("pw")
    driver.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    wait_for_url(driver, lambda url: url.endswith("/cluster"))

    def base_states() -> dict[str, str]:
        out = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %T"], capture_output=True,
                             text=True, check=True).stdout
        return {n: s.rstrip("*~#!%$@^-").split("+")[0].lower()
                for n, s in (line.split() for line in out.splitlines())}

    # Jobs of other tests start and end meanwhile, and the page shows what the last scrape
    # saw (5 s ago at most): compare with each node's states around the page load.
    seen: list = []

    def page_agrees() -> bool:
        if seen:
            driver.refresh()
        before = base_states()
        rows = driver.find_elements(By.CSS_SELECTOR, "#nodes tr")[1:]
        shown = {r.find_elements(By.TAG_NAME, "td")[0].text:
                 r.find_element(By.CSS_SELECTOR, "td.state").text.split("+")[0] for r in rows}
        seen[:] = [shown, before, base_states()]
        after = seen[2]
        return set(shown) == set(before) and all(
            shown[n] in {before[n], after.get(n)} for n in shown)

    wait_for(page_agrees, 30, lambda: f"the page's node states (shown, before, after): {seen}",
             every=2)
    shown = seen[0]
    assert len(shown) >= 4
    gpu_rows = {r.text.split()[0]: r.text for r in
                driver.find_elements(By.CSS_SELECTOR, "#gpus tr")[1:]}
    # a row per gres type: two GPUs of each model, the MIG node's devices by profile
    assert {t: row.split()[-1] for t, row in gpu_rows.items()} == {
        "t4": "2", "h100": "2", "mi300x": "2", "3g.40gb": "1", "2g.20gb": "1", "1g.10gb": "2"}
    assert driver.find_element(By.CSS_SELECTOR, "#usage svg").is_displayed()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = Path(ARTIFACTS) / "browser-cluster-page.png"
    assert driver.save_screenshot(str(shot))
    assert severe(driver) == []
