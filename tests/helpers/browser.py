"""Browser test support: the app on a loopback port and headless Chromium (no JavaScript
but where a test asks for it)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

from webapp import create_app
from webapp.settings import Settings

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def serve(make_service: Callable[[], object], tmp: Path, base: Settings | None = None,
          users: tuple[str, ...] = ("alice",)) -> Iterator[str]:
    """Run the app in a thread on a free loopback port; yields its base URL. ``base``:
    settings to start from (the stack's), ``users``: who may log in, each with ``pw``."""
    (tmp / "passwords").write_text("".join(f"{u}:{generate_password_hash('pw')}\n"
                                           for u in users))
    # Plain http on loopback: the one place (with the demo) cookies go without Secure.
    # Without the stack's settings, an archive of its own (never the checkout's var/).
    start = base or Settings(archive_url=str(tmp / "archive.sqlite"))
    settings = dataclasses.replace(start,
                                   secret_key="browser-test-key-of-at-least-32-bytes",
                                   password_file=str(tmp / "passwords"),
                                   session_cookie_secure=False,
                                   web_state=str(tmp / "web-state.sqlite"))
    server = make_server("127.0.0.1", 0, create_app(settings, make_service()), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def chromium(profile: str, javascript: bool = False) -> webdriver.Chrome:
    """Headless Chromium on a throw-away ``profile``: JavaScript off (the app's pages need
    none) unless ``javascript`` (a portal's widget that calls the API)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,2000",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option("prefs", {
            "profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def severe(drv: webdriver.Chrome) -> list[dict]:
    return [entry for entry in drv.get_log("browser") if entry["level"] == "SEVERE"]


def login(drv: webdriver.Chrome, base_url: str, job: str, user: str = "alice") -> None:
    drv.get(f"{base_url}/jobs/{job}" if job else f"{base_url}/")
    assert "/login" in drv.current_url
    drv.find_element(By.ID, "username").send_keys(user)
    drv.find_element(By.ID, "password").send_keys("pw")
    drv.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    wait_for_url(drv, lambda url: "/login" not in url)


def wait_for_url(drv: webdriver.Chrome, ok: Callable[[str], bool]) -> None:
    """Clicks return before the next page has loaded: wait for its URL."""
    WebDriverWait(drv, 10).until(lambda d: ok(d.current_url))
