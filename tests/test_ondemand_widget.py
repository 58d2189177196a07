"""deploy/ondemand's dashboard widget in headless Chromium, JavaScript on.

The page is ``_jobreport.html.erb`` as Rails would render it (its three expressions done
here: the API's default URL, widget.html, widget.js in a script with the page's nonce),
served by a stand-in for OnDemand's host: the dashboard page under a Content-Security-
Policy like the dashboard's, and the real app proxied under /jobreport as OnDemand's
Apache does it, naming the signed-in user in X-Remote-User from a peer the app trusts
(JOBREPORT_PROMETHEUS_FRONT_PROXIES). The table must show alice's jobs, the rows the API
lists, each linked to its report; a visitor the portal names nobody is told to sign in.
"""

from __future__ import annotations

import html
import ipaddress
import json
import re
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.helpers.browser import ARTIFACTS, chromium, severe, wait_for_url
from tests.helpers.reports import HTML_PAYLOAD
from tests.helpers.web import make_app, password_settings

pytestmark = pytest.mark.needs("chromium")

WIDGETS = Path(__file__).resolve().parent.parent / "deploy" / "ondemand" / "views" / "widgets"
NONCE = "widget-test-nonce"
# The dashboard's policy when OnDemand's CSP is on (its content_security_policy
# initializer): scripts only by nonce, styles and connections only from the portal.
CSP = (f"default-src 'self'; script-src 'nonce-{NONCE}'; style-src 'self'; "
       "img-src 'self' data:; connect-src 'self'; object-src 'none'")
ROWS = 8  # data-jobreport-rows of the partial


def rendered_partial(api: str | None = None) -> str:
    """``_jobreport.html.erb`` as Rails renders it with JOBREPORT_API_URL unset (or
    ``api``); an expression it does not know fails the test, so the partial and this
    stand-in cannot drift apart."""
    erb = (WIDGETS / "_jobreport.html.erb").read_text()
    erb = re.sub(r"<%#.*?%>\n?", "", erb, flags=re.S)  # comments
    erb = re.sub(r"<%(?!=).*?%>\n?", "", erb, flags=re.S)  # code: the files' directory
    script = (WIDGETS / "jobreport" / "widget.js").read_text()
    done = {
        'ENV.fetch("JOBREPORT_API_URL", "/jobreport/api/v1/jobs")':
            html.escape(api or "/jobreport/api/v1/jobs"),
        'File.read(File.join(jobreport_dir, "widget.html")).html_safe':
            (WIDGETS / "jobreport" / "widget.html").read_text(),
        # javascript_tag's own wrapping, and the nonce Rails gives the page
        'javascript_tag(File.read(File.join(jobreport_dir, "widget.js")), nonce: true)':
            f'<script nonce="{NONCE}">\n//<![CDATA[\n{script}\n//]]>\n</script>',
    }
    page = re.sub(r"<%=(.*?)%>", lambda m: done[m.group(1).strip()], erb, flags=re.S)
    assert "<%" not in page
    return page


def dashboard(api: str | None = None):  # noqa: ANN201 - a WSGI application
    """The dashboard's page with only the widget in it, under the dashboard's CSP."""
    body = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>Dashboard</title>"
            f"</head><body>{rendered_partial(api)}</body></html>")

    @Request.application
    def page(request: Request) -> Response:
        return Response(body, mimetype="text/html",
                        headers={"Content-Security-Policy": CSP})
    return page


def names(user: str, app):  # noqa: ANN001, ANN201 - WSGI in and out
    """OnDemand's Apache in front of jobreport: ``RequestHeader set X-Remote-User``, the
    user it authenticated, whatever the browser sent."""
    def proxied(environ, start_response):  # noqa: ANN001, ANN202
        environ["HTTP_X_REMOTE_USER"] = user
        return app(environ, start_response)
    return proxied


@pytest.fixture(scope="module")
def portal() -> Iterator[str]:
    """OnDemand's host on a loopback port: /pun/sys/dashboard with the widget, jobreport
    under /jobreport for alice; /anon/dashboard's widget asks /anon/jobreport, where the
    portal names nobody."""
    with tempfile.TemporaryDirectory(prefix="jobreport-ondemand-") as tmp:
        settings = password_settings(
            Path(tmp), session_cookie_secure=False,
            prometheus_front_proxies=(ipaddress.ip_network("127.0.0.1"),))
        jobreport = make_app(settings)
        site = DispatcherMiddleware(dashboard(), {
            "/jobreport": names("alice", jobreport),
            "/anon/dashboard": dashboard("/anon/jobreport/api/v1/jobs"),
            "/anon/jobreport": jobreport})
        server = make_server("127.0.0.1", 0, site, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
            thread.join(10)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium with JavaScript on (the widget is a script)."""
    with tempfile.TemporaryDirectory(prefix="jobreport-chromium-") as profile:
        drv = chromium(profile, javascript=True)
        try:
            yield drv
        finally:
            drv.quit()


def api_jobs(portal: str) -> list[dict]:
    """What the API lists for alice through the portal, as the widget's request gets it."""
    with urllib.request.urlopen(f"{portal}/jobreport/api/v1/jobs", timeout=10) as resp:
        return json.load(resp)["jobs"]


def test_the_widget_shows_alices_jobs_linked_to_their_reports(browser, portal):
    browser.get(f"{portal}/pun/sys/dashboard")
    WebDriverWait(browser, 15).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "tr.jobreport-job"))
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.jobreport-job")
    listed = api_jobs(portal)
    assert listed and {j["user"] for j in listed} == {"alice"}
    assert [r.get_attribute("data-job") for r in rows] == [j["job_id"] for j in listed][:ROWS]
    for row, job in zip(rows, listed, strict=False):
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == job["job_id"] and cells[2] == job["state"]
        assert cells[3] == f"{round(job['cpu_efficiency'] * 100)}%"
        assert cells[6] == job["top_finding"]["message"]
        link = row.find_element(By.TAG_NAME, "a").get_attribute("href")
        assert link == f"{portal}{job['report_url']}"
        assert link.startswith(f"{portal}/jobreport/jobs/")
    hostile = next(r for r in rows if r.get_attribute("data-job") == "6000_1")
    assert hostile.find_elements(By.TAG_NAME, "td")[1].text == HTML_PAYLOAD  # as text
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 - the name's script never ran
    everything = browser.find_element(By.CSS_SELECTOR, "a.jobreport-all")
    assert everything.is_displayed()
    assert everything.get_attribute("href").startswith(f"{portal}/jobreport/?")
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "ondemand-widget.png"))
    assert severe(browser) == []  # no script error, nothing the CSP refused
    # A report link opens the job's page, the portal naming alice to jobreport there too.
    last = rows[-1].get_attribute("data-job")
    rows[-1].find_element(By.TAG_NAME, "a").click()
    wait_for_url(browser, lambda url: url.endswith(f"/jobreport/jobs/{last}"))
    assert f"Job {last}" in browser.find_element(By.TAG_NAME, "h1").text


def test_a_visitor_the_portal_does_not_name_is_told_to_sign_in(browser, portal):
    browser.get(f"{portal}/anon/dashboard")
    status = browser.find_element(By.CSS_SELECTOR, ".jobreport-status")
    WebDriverWait(browser, 15).until(lambda d: "sign in" in status.text)
    assert browser.find_elements(By.CSS_SELECTOR, "tr.jobreport-job") == []
    assert not browser.find_element(By.CSS_SELECTOR, "table.jobreport-jobs").is_displayed()
    sign_in = browser.find_element(By.CSS_SELECTOR, "a.jobreport-all")
    assert sign_in.get_attribute("href") == f"{portal}/anon/jobreport/login"
    sign_in.click()
    wait_for_url(browser, lambda url: url.endswith("/anon/jobreport/login"))
    assert browser.find_element(By.ID, "username").is_displayed()
