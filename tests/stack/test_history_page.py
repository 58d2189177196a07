"""The history page in headless Chromium (JavaScript off): alice sees her jobs of one name
and the #SBATCH block, the report page shows the same block, another user's history is
refused. Screenshots are kept in test-artifacts/."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.helpers import stack
from tests.helpers.browser import ARTIFACTS, login, serve, severe


@pytest.fixture(scope="module")
def site(stack_jobs, service):
    with tempfile.TemporaryDirectory() as tmp:
        yield from serve(lambda: service, Path(tmp))


def test_history_page_shows_her_jobs_and_the_block(site, driver, stack_jobs, service):
    ids = [stack_jobs[f"sizing-{mib}"] for mib in stack.SIZING_MIB]
    login(driver, site, ids[-1])
    report_block = driver.find_element(By.CSS_SELECTOR, "#sizing pre").text
    driver.save_screenshot(str(ARTIFACTS / "report-sizing.png"))
    driver.get(f"{site}/history?name={stack.SIZING_NAME}&days=1")
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / "history-page.png"))
    block = driver.find_element(By.CSS_SELECTOR, "#sizing pre").text
    assert block == report_block == "\n".join(service.build(ids[-1]).sizing.lines())
    assert block.startswith("#SBATCH --mem=") and "#SBATCH --time=" in block
    rows = driver.find_elements(By.CSS_SELECTOR, "#jobs tr td:first-child a")
    assert sorted(r.text for r in rows) == sorted(ids)
    # One line per job: no cell wraps (the state column once did, COMPLETE|D).
    for tr in driver.find_elements(By.CSS_SELECTOR, "#jobs tbody tr"):
        link = tr.find_element(By.CSS_SELECTOR, "td a")
        assert tr.rect["height"] < 2 * link.rect["height"], tr.text
    assert "From 10 jobs named" in driver.find_element(By.ID, "sizing").text
    assert not severe(driver)


def test_another_users_history_is_refused(site, driver):
    driver.get(f"{site}/history?user=bob")
    assert "Only your own history" in driver.page_source
