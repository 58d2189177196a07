"""Delivery of real jobs: the stack's web app (gunicorn) in headless Chromium, the PDF,
an email through a real SMTP server, and the web app with a source down."""

from __future__ import annotations

import dataclasses
import email
import subprocess
from email import policy

import requests
from aiosmtpd.controller import Controller
from selenium.webdriver.common.by import By

from tests.helpers.browser import ARTIFACTS, severe, wait_for_url
from tests.helpers.mail import free_port
from tests.helpers.stack import ROOT
from tests.helpers.wait import wait_for
from tests.helpers.web import make_client, pdf_of
from webapp.report.service import ReportService

WEB = "http://127.0.0.1:8000"


def _password() -> str:
    return (ROOT / "var" / "demo-password").read_text().strip()


def _login(session: requests.Session, user: str) -> None:
    page = session.get(f"{WEB}/login", timeout=10)
    token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    resp = session.post(f"{WEB}/login", data={"username": user, "password": _password(),
                                               "csrf_token": token}, timeout=10)
    assert resp.status_code == 200 and "/login" not in resp.url


def test_real_job_page_in_chromium(stack_jobs, driver):
    browser = driver
    job = stack_jobs["gpu-untouched"]
    browser.get(f"{WEB}/jobs/{job}")
    assert "/login" in browser.current_url
    browser.find_element(By.ID, "username").send_keys("staff")
    browser.find_element(By.ID, "password").send_keys(_password())
    browser.find_element(By.CSS_SELECTOR, "form.login button[type=submit]").click()
    wait_for_url(browser, lambda url: "/login" not in url)
    assert browser.current_url == f"{WEB}/jobs/{job}"
    findings = browser.find_elements(By.CSS_SELECTOR, "#findings .finding")
    assert findings and all(f.is_displayed() for f in findings)
    assert any("idle" in f.text.lower() and "gpu" in f.text.lower() for f in findings)
    browser.find_element(By.CSS_SELECTOR, "details#details > summary").click()  # the details
    plots = browser.find_elements(By.CSS_SELECTOR, "section.plot img")  # loaded on opening
    assert len(plots) >= 3 and all(p.is_displayed() for p in plots)
    wait_for(lambda: all(p.get_property("complete") and p.get_property("naturalWidth")
                         for p in plots), 60, "every plot loaded", every=0.3)
    assert all(p.get_property("naturalWidth") > 300 for p in plots)  # each SVG drawn
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"browser-real-job-{job}.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert severe(browser) == []


def test_owner_sees_own_job_and_not_others(stack_jobs):
    with requests.Session() as alice:
        _login(alice, "alice")
        assert alice.get(f"{WEB}/jobs/{stack_jobs['busy']}.json", timeout=30).status_code == 200
        assert alice.get(f"{WEB}/jobs/{stack_jobs['idle']}", timeout=30).status_code == 403
        missing = alice.get(f"{WEB}/jobs/99999999", timeout=30)
        assert missing.status_code == 404 and "99999999" in missing.text
        assert alice.get(f"{WEB}/jobs/12abc", timeout=30).status_code in (400, 404)


def test_real_job_pdf(stack_jobs, tmp_path):
    with requests.Session() as staff:
        _login(staff, "staff")
        resp = pdf_of(lambda url: staff.get(url, timeout=60),
                      f"{WEB}/jobs/{stack_jobs['mem-over-request']}.pdf")
    assert resp.status_code == 200 and resp.content.startswith(b"%PDF")
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(resp.content)
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout
    pages = text.split("\f")
    assert "Page 1 of" in pages[0]
    total = int(pages[0].split("Page 1 of", 1)[1].split()[0])
    assert total == len([p for p in pages if p.strip()]) >= 2
    assert "--mem=" in text  # the memory finding's advice


class _Sink:
    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's API
        self.messages.append(email.message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"


def test_real_job_email_through_smtp(stack_jobs, settings, tmp_path):
    from webapp.cli.mail import add_email_arguments, run_email

    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        # To the owner, so by the sync's policy: a fresh archive (no opt-outs, no cap used).
        mail = dataclasses.replace(settings, smtp_host="127.0.0.1", smtp_port=port,
                                   mail_to="{user}@example.org", mail_min_runtime=0,
                                   mail_daily_cap=0, outbox=str(tmp_path / "outbox.sqlite"),
                                   archive_url=str(tmp_path / "archive.sqlite"))
        import argparse

        parser = argparse.ArgumentParser()
        add_email_arguments(parser)
        args = parser.parse_args([stack_jobs["idle"]])
        assert run_email(args, mail) == 0
    finally:
        controller.stop()
    assert len(sink.messages) == 1
    msg = sink.messages[0]
    assert msg["To"] == "bob@example.org"
    assert stack_jobs["idle"] in msg["Subject"]
    parts = {p.get_content_type() for p in msg.walk()}
    assert {"text/plain", "text/html", "application/pdf"} <= parts


def _client(settings, tmp_path, **changes):
    return make_client(dataclasses.replace(settings, staff=frozenset({"staff"}),
                                           web_state=str(tmp_path / "web-state.sqlite")),
                       ReportService(dataclasses.replace(settings, **changes)), "staff")


def test_prometheus_down_page_still_renders(stack_jobs, settings, tmp_path):
    client = _client(settings, tmp_path, prometheus_url="http://127.0.0.1:9")
    resp = client.get(f"/jobs/{stack_jobs['busy']}")
    assert resp.status_code == 200
    assert b"unavailable" in resp.data.lower()


def test_database_down_is_503(stack_jobs, settings, tmp_path):
    client = _client(settings, tmp_path, db_url="mysql://jobreport:x@127.0.0.1:9/jobreport")
    resp = client.get(f"/jobs/{stack_jobs['busy']}")
    assert resp.status_code == 503
    assert b"accounting" in resp.data.lower()


def test_hostile_names_are_inert_in_html_pdf_and_email(stack_jobs, service, settings, tmp_path):
    from tests.helpers.stack import HOSTILE_HEADER, HOSTILE_MARKUP

    markup_job, header_job = stack_jobs["hostile-markup"], stack_jobs["hostile-header"]
    assert service.build(markup_job).job_name == HOSTILE_MARKUP  # stored as is, read back
    with requests.Session() as staff:
        _login(staff, "staff")
        page = staff.get(f"{WEB}/jobs/{markup_job}", timeout=60).text
        pdf = pdf_of(lambda url: staff.get(url, timeout=60),
                     f"{WEB}/jobs/{markup_job}.pdf").content
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    (tmp_path / "hostile.pdf").write_bytes(pdf)
    text = subprocess.run(["pdftotext", str(tmp_path / "hostile.pdf"), "-"],
                          capture_output=True, text=True, check=True).stdout
    # the name printed as text, wherever LaTeX broke its line (it depends on the job id)
    assert "\\input{/etc/passwd} $&%#_{}~^\\" in " ".join(text.split())

    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        import argparse

        from webapp.cli.mail import add_email_arguments, run_email

        parser = argparse.ArgumentParser()
        add_email_arguments(parser)
        mail = dataclasses.replace(settings, smtp_port=port, mail_to="{user}@example.org",
                                   mail_min_runtime=0, mail_daily_cap=0,
                                   outbox=str(tmp_path / "outbox.sqlite"),
                                   archive_url=str(tmp_path / "archive.sqlite"))
        assert run_email(parser.parse_args([header_job]), mail) == 0
    finally:
        controller.stop()
    (msg,) = sink.messages
    assert msg["Bcc"] is None and msg["To"] == "bob@example.org"
    assert "\r" not in msg["Subject"] and "\n" not in msg["Subject"]
    assert HOSTILE_HEADER.split("\r\n")[1] not in str(msg).split("\n\n", 1)[0].splitlines()
