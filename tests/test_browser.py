"""Headless Chromium against the app on a loopback port: log in, read a report.

JavaScript is switched off in the browser, which proves the pages need none. The
service is injectable (``make_service``); the integration copy points it at a real job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

from tests.test_web_support import HTML_PAYLOAD, default_service
from webapp import create_app
from webapp.settings import Settings

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def serve(make_service: Callable[[], object], tmp: Path) -> Iterator[str]:
    """Run the app in a thread on a free loopback port; yields its base URL."""
    (tmp / "passwords").write_text(f"alice:{generate_password_hash('pw')}\n")
    settings = Settings(secret_key="browser-test", password_file=str(tmp / "passwords"))
    server = make_server("127.0.0.1", 0, create_app(settings, make_service()), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def chromium(profile: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,2000",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {
        "profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@pytest.fixture(scope="module")
def base_url(tmp_path_factory) -> Iterator[str]:
    yield from serve(default_service, tmp_path_factory.mktemp("browser"))


def severe(drv: webdriver.Chrome) -> list[dict]:
    return [entry for entry in drv.get_log("browser") if entry["level"] == "SEVERE"]


def login(drv: webdriver.Chrome, base_url: str, job: str) -> None:
    drv.get(f"{base_url}/jobs/{job}")
    assert "/login" in drv.current_url
    drv.find_element(By.ID, "username").send_keys("alice")
    drv.find_element(By.ID, "password").send_keys("pw")
    drv.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    wait_for_url(drv, lambda url: "/login" not in url)


def wait_for_url(drv: webdriver.Chrome, ok: Callable[[str], bool]) -> None:
    """Clicks return before the next page has loaded: wait for its URL."""
    WebDriverWait(drv, 10).until(lambda d: ok(d.current_url))


def test_job_page_in_a_real_browser(driver, base_url):
    login(driver, base_url, "4242")
    assert driver.current_url == f"{base_url}/jobs/4242"
    findings = driver.find_elements(By.CSS_SELECTOR, "#findings .finding")
    assert len(findings) == 3 and all(f.is_displayed() for f in findings)
    assert "GPU gpu1 was idle for the whole job." in findings[0].text
    assert "Request --gres=gpu:1." in findings[0].text
    plots = driver.find_elements(By.CSS_SELECTOR, "section.plot svg")
    assert len(plots) == 5
    for svg in plots:
        assert svg.is_displayed() and svg.size["width"] > 300 and svg.size["height"] > 100
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "browser-job-4242.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert severe(driver) == []


def test_gap_note_and_hostile_name(driver, base_url):
    driver.get(f"{base_url}/jobs/4243")
    note = driver.find_element(By.CSS_SELECTOR, "p.gap")
    assert note.is_displayed() and "Metrics unavailable" in note.text
    driver.get(f"{base_url}/jobs/6000_1")
    assert driver.find_element(By.CSS_SELECTOR, "h1 .jobname").text == HTML_PAYLOAD
    assert severe(driver) == []


def test_lookup_form_and_logout(driver, base_url):
    driver.get(f"{base_url}/")
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
