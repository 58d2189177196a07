"""PDF builds: a bounded number at once per worker (503 + Retry-After beyond), finished
PDFs of ended jobs kept within a byte budget; error pages keep their headers."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from tests.helpers.reports import default_service, sample_report
from tests.helpers.sessions import password_settings, sign_in
from webapp import create_app
from webapp.web.pdfs import PdfBuilds, PdfBusy


@pytest.fixture
def app(tmp_path):
    app = create_app(password_settings(tmp_path, pdf_builds=1), default_service())
    app.testing = True
    return app


def staff_client(app):
    client = app.test_client()
    sign_in(client, "staffer")
    return client


def test_builds_beyond_the_bound_get_503_with_retry_after(app, monkeypatch):
    started, release = threading.Event(), threading.Event()
    renders: list[str] = []

    def slow_render(report):
        renders.append(report.job_id)
        started.set()
        release.wait(10)
        return b"%PDF-1.5 slow"

    monkeypatch.setattr("webapp.renderers.pdf.render", slow_render)
    app.extensions["jobreport.pdfs"].wait = 0.2
    first = threading.Thread(target=lambda: staff_client(app).get("/jobs/4242.pdf"))
    first.start()
    assert started.wait(10)
    busy = staff_client(app).get("/jobs/5000.pdf")
    release.set()
    first.join(10)
    assert busy.status_code == 503
    assert busy.headers["Retry-After"] == "10"
    assert "Too many PDF reports" in busy.get_data(as_text=True)
    assert renders == ["4242"]  # the refused request never started LaTeX


def test_pdfs_of_ended_jobs_are_kept(app, monkeypatch):
    renders: list[str] = []
    monkeypatch.setattr("webapp.renderers.pdf.render",
                        lambda report: renders.append(report.job_id) or b"%PDF " + b"x" * 100)
    client = staff_client(app)
    for _ in range(3):
        assert client.get("/jobs/4242.pdf").data.startswith(b"%PDF")
        assert client.get("/jobs/4243.pdf").status_code == 200  # has a gap: built each time
    assert renders == ["4242", "4243", "4243", "4243"]


def test_a_kept_pdf_is_still_only_for_its_owner(app, monkeypatch):
    monkeypatch.setattr("webapp.renderers.pdf.render", lambda report: b"%PDF bob's")
    assert staff_client(app).get("/jobs/5000.pdf").status_code == 200  # now cached
    alice = app.test_client()
    sign_in(alice, "alice")
    assert alice.get("/jobs/5000.pdf").status_code == 403


def test_the_cache_stays_within_its_budget():
    builds = PdfBuilds(limit=1, cache_mb=1)  # 1 MiB
    for n in range(5):
        builds.build(sample_report(str(n)), lambda report: b"x" * 300_000)
    kept = [n for n in range(5) if builds.cached(str(n))]
    assert kept == [2, 3, 4]  # the least recently used went first
    running = replace(sample_report("9"), state="RUNNING", end_time=None)
    builds.build(running, lambda report: b"y")
    assert builds.cached("9") is None


def test_a_busy_slot_raises_pdf_busy():
    builds = PdfBuilds(limit=1, cache_mb=1, wait=0.05)
    assert builds.slots.acquire()
    with pytest.raises(PdfBusy):
        builds.build(sample_report(), lambda report: b"never")


def test_405_keeps_its_allow_header(app):
    client = staff_client(app)
    response = client.put("/jobs/4242")
    assert response.status_code == 405
    assert "GET" in response.headers["Allow"]


def test_pdf_of_a_job_with_a_13000_backslash_work_dir_is_served(tmp_path):
    """Real pdflatex: the work dir's one escaped line overflowed its buffer (a 500)."""
    report = replace(sample_report("7000", "alice"), work_dir="/tmp/" + "\\" * 13_000)
    service = default_service()
    service.reports["7000"] = report
    app = create_app(password_settings(tmp_path), service)
    app.testing = True
    resp = staff_client(app).get("/jobs/7000.pdf")
    assert resp.status_code == 200
    assert resp.mimetype == "application/pdf" and resp.data.startswith(b"%PDF")
