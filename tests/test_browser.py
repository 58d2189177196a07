"""Headless Chromium against the app on a loopback port: log in, read a report.

JavaScript is switched off in the browser, which proves the pages need none. The
service is injectable (``make_service``); the integration copy points it at a real job.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By

from tests.helpers.browser import ARTIFACTS, login, serve, severe, wait_for_url
from tests.helpers.reports import HTML_PAYLOAD, default_service
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.needs("chromium")



@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> Iterator[str]:
    yield from serve(default_service, tmp_path_factory.mktemp("browser"))


def test_job_page_in_a_real_browser(driver, base_url):
    login(driver, base_url, "4242")
    assert driver.current_url == f"{base_url}/jobs/4242"
    findings = driver.find_elements(By.CSS_SELECTOR, "#findings .finding")
    assert len(findings) == 3 and all(f.is_displayed() for f in findings)
    assert "GPU gpu1 was idle for the whole job." in findings[0].text
    assert "Request --gres=gpu:1." in findings[0].text
    plots = driver.find_elements(By.CSS_SELECTOR, "section.plot img")
    assert len(plots) == 5
    # The plots are details: folded until the reader opens them (no JavaScript needed),
    # each an image the browser asks for then.
    assert not any(img.is_displayed() for img in plots)
    driver.find_element(By.CSS_SELECTOR, "details#details > summary").click()
    wait_for(lambda: all(img.get_property("complete") and img.get_property("naturalWidth")
                         for img in plots), 30, "every plot loaded", every=0.2)
    for img in plots:
        assert img.is_displayed() and img.size["width"] > 300 and img.size["height"] > 100
        assert img.get_property("naturalWidth") > 300  # the SVG arrived and was drawn
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "browser-job-4242.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert severe(driver) == []


def _fresh_login(driver, base_url: str) -> None:
    """A session of the test's own: under `pytest -n` a test may not share the browser
    that logged in first."""
    driver.get(f"{base_url}/login")
    driver.delete_all_cookies()
    login(driver, base_url, "")


def test_gap_note_and_hostile_name(driver, base_url):
    _fresh_login(driver, base_url)
    driver.get(f"{base_url}/jobs/4243")
    note = driver.find_element(By.CSS_SELECTOR, "p.gap")
    assert note.is_displayed() and "Metrics unavailable" in note.text
    driver.get(f"{base_url}/jobs/6000_1")
    assert driver.find_element(By.CSS_SELECTOR, "h1 .jobname").text == HTML_PAYLOAD
    assert severe(driver) == []


def test_lookup_form_and_logout(driver, base_url):
    _fresh_login(driver, base_url)
    box = driver.find_element(By.ID, "job")
    box.send_keys("6002+1")
    box.submit()
    wait_for_url(driver, lambda url: "/jobs/" in url)
    assert driver.current_url.endswith("/jobs/6002+1") or driver.current_url.endswith("%2B1")
    assert "Job 6002+1" in driver.find_element(By.TAG_NAME, "h1").text
    driver.find_element(By.CSS_SELECTOR, "header.top form button").click()
    wait_for_url(driver, lambda url: url.endswith("/login"))
    driver.get(f"{base_url}/jobs/4242")
    assert "/login" in driver.current_url
    assert severe(driver) == []


def test_artifacts_are_ignored_by_git():
    gitignore = (ARTIFACTS.parent / ".gitignore").read_text().split()
    assert f"{ARTIFACTS.name}/" in gitignore
