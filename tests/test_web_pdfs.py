"""PDF builds: a bounded number at once per host, whichever worker asks (503 +
Retry-After beyond), finished PDFs of ended jobs kept on disk for every worker within a
byte budget; error pages keep their headers."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from tests.helpers.reports import default_service, sample_report
from tests.helpers.web import make_client, password_settings, signed_in
from webapp.renderers.pdf_store import NoSlot, PdfStore, pdf_key
from webapp.web.pdfs import PdfBuilds, PdfBusy


@pytest.fixture
def web_settings(tmp_path):
    """The conftest's web settings with one PDF build at a time."""
    return password_settings(tmp_path, pdf_builds=1)


def test_builds_beyond_the_bound_get_503_with_retry_after(app, monkeypatch):
    started, release = threading.Event(), threading.Event()
    renders: list[str] = []

    def slow_render(report, footer=""):
        renders.append(report.job_id)
        started.set()
        release.wait(10)
        return b"%PDF-1.5 slow"

    monkeypatch.setattr("webapp.renderers.pdf.render", slow_render)
    app.extensions["jobreport.pdfs"].store.wait = 0.2
    first = threading.Thread(target=lambda: signed_in(app, "staffer").get("/jobs/4242.pdf"))
    first.start()
    assert started.wait(10)
    busy = signed_in(app, "staffer").get("/jobs/5000.pdf")
    release.set()
    first.join(10)
    assert busy.status_code == 503
    assert busy.headers["Retry-After"] == "10"
    assert "Too many PDF reports" in busy.get_data(as_text=True)
    assert renders == ["4242"]  # the refused request never started LaTeX


def test_pdfs_of_ended_jobs_are_kept(app, monkeypatch):
    renders: list[str] = []
    monkeypatch.setattr("webapp.renderers.pdf.render",
                        lambda report, footer="": renders.append(report.job_id)
                        or b"%PDF " + b"x" * 100)
    client = signed_in(app, "staffer")
    for _ in range(3):
        assert client.get("/jobs/4242.pdf").data.startswith(b"%PDF")
        assert client.get("/jobs/4243.pdf").status_code == 200  # has a gap: built each time
    assert renders == ["4242", "4243", "4243", "4243"]


def test_a_kept_pdf_is_still_only_for_its_owner(app, monkeypatch):
    monkeypatch.setattr("webapp.renderers.pdf.render",
                        lambda report, footer="": b"%PDF bob's")
    assert signed_in(app, "staffer").get("/jobs/5000.pdf").status_code == 200  # now cached
    alice = signed_in(app, "alice")
    assert alice.get("/jobs/5000.pdf").status_code == 403


def store(tmp_path, wait: float = 5.0, budget: int = 2**20) -> PdfStore:
    return PdfStore(tmp_path / "pdfs", budget, slots=1, wait=wait, version="v1")


def test_the_store_stays_within_its_budget(tmp_path):
    pdfs = store(tmp_path)  # 1 MiB
    for n in range(5):
        pdfs.build(sample_report(str(n)), lambda report: b"x" * 300_000, key=str(n))
        time.sleep(0.01)  # distinct mtimes: least recently read goes first
    assert [n for n in range(5) if pdfs.get(str(n))] == [2, 3, 4]
    running = replace(sample_report("9"), state="RUNNING", end_time=None)
    pdfs.build(running, lambda report: b"y", key="9")
    assert pdfs.get("9") is None  # a running job's PDF will change: not kept
    assert sorted(p.name for p in (tmp_path / "pdfs").iterdir())[-1] == "v1"
    assert oct((tmp_path / "pdfs").stat().st_mode & 0o777) == "0o700"


def test_a_pdf_built_by_one_worker_is_served_by_another(tmp_path):
    """Two workers (two stores on one directory): one build, then file reads."""
    renders: list[str] = []
    first, second = store(tmp_path), store(tmp_path)
    body = first.build(sample_report("4242"), lambda r: renders.append("1") or b"%PDF 1",
                       key=pdf_key("demo", "4242"))
    assert second.get(pdf_key("demo", "4242")) == body == b"%PDF 1"
    assert second.build(sample_report("4242"), lambda r: renders.append("2") or b"%PDF 2",
                        key=pdf_key("demo", "4242")) == b"%PDF 1"
    assert renders == ["1"]
    assert second.get(pdf_key("other", "4242")) is None  # ids repeat across clusters


def test_two_requests_for_one_pdf_build_it_once(tmp_path):
    first, second = store(tmp_path), store(tmp_path)
    started, release, renders = threading.Event(), threading.Event(), []

    def slow(report):
        renders.append(report.job_id)
        started.set()
        release.wait(10)
        return b"%PDF once"

    bodies = []
    one = threading.Thread(target=lambda: bodies.append(first.build(sample_report("7"), slow,
                                                                    key="7")))
    one.start()
    assert started.wait(10)
    two = threading.Thread(target=lambda: bodies.append(second.build(sample_report("7"), slow,
                                                                     key="7")))
    two.start()
    time.sleep(0.2)
    release.set()
    one.join(10), two.join(10)
    assert renders == ["7"] and bodies == [b"%PDF once", b"%PDF once"]


def test_a_build_in_another_process_holds_the_hosts_slot(tmp_path):
    """The slot is the host's, not the worker's: a process holding it keeps this one out
    (PdfBusy through the web's side), and its death frees it (the kernel drops the lock)."""
    pdfs = store(tmp_path, wait=0.3)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time;"
         f"fd = os.open({str(tmp_path / 'pdfs' / 'slot-0.lock')!r}, os.O_RDWR | os.O_CREAT);"
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(NoSlot):
            pdfs.build(sample_report("1"), lambda r: b"never", key="1")
        with pytest.raises(PdfBusy):
            PdfBuilds(pdfs).build(sample_report("1"), lambda r: b"never", key="1")
        assert pdfs.build(sample_report("2"), lambda r: b"%PDF sync", key="2",
                          slot=False) == b"%PDF sync"  # the sync's build takes no slot
    finally:
        holder.kill()
        holder.wait()
    assert pdfs.build(sample_report("1"), lambda r: b"%PDF now", key="1") == b"%PDF now"


def test_a_new_release_starts_an_empty_folder(tmp_path):
    old = store(tmp_path)
    old.put("1", b"%PDF old")
    assert PdfStore(tmp_path / "pdfs", 2**20, 1, 1.0, version="v2").get("1") is None
    assert (tmp_path / "pdfs" / "v1").exists()  # within the hour a rolling update takes


def test_405_keeps_its_allow_header(app):
    client = signed_in(app, "staffer")
    response = client.put("/jobs/4242")
    assert response.status_code == 405
    assert "GET" in response.headers["Allow"]


@pytest.mark.needs("pdflatex")
def test_pdf_of_a_job_with_a_13000_backslash_work_dir_is_served(tmp_path):
    """Real pdflatex: the work dir's one escaped line overflowed its buffer (a 500)."""
    report = replace(sample_report("7000", "alice"), work_dir="/tmp/" + "\\" * 13_000)
    service = default_service()
    service.reports["7000"] = report
    resp = make_client(password_settings(tmp_path), service, "staffer").get("/jobs/7000.pdf")
    assert resp.status_code == 200
    assert resp.mimetype == "application/pdf" and resp.data.startswith(b"%PDF")


def test_a_final_reports_plots_are_drawn_once_for_every_worker(tmp_path, monkeypatch):
    """The page lists its plots without drawing them; the plots, drawn at the first
    image request, are kept beside the PDF: a second worker (a second app on the same
    directory, its own LRU empty) lists and serves them without matplotlib."""
    from webapp.renderers.presentation import CHARTS

    settings = password_settings(tmp_path)
    first = make_client(settings, user="staffer")
    page = first.get("/jobs/4242").get_data(as_text=True)
    assert page.count('<img src="/jobs/4242/plots/') == 5
    assert not list((tmp_path / "pdf-cache").rglob("*.svg.json"))  # listed, not drawn
    cpu = first.get("/jobs/4242/plots/cpu.svg").get_data(as_text=True)
    assert cpu.startswith("<svg")
    assert list((tmp_path / "pdf-cache").rglob("*.svg.json"))
    CHARTS._items.clear()

    def no_matplotlib(report):
        raise AssertionError("drawn again")

    monkeypatch.setattr("webapp.renderers.charts.svg_charts", no_matplotlib)
    monkeypatch.setattr("webapp.web.pdfs.chart_refs", no_matplotlib)
    second = make_client(settings, user="staffer")
    assert second.get("/jobs/4242").get_data(as_text=True).count("<img src=") == 5
    assert second.get("/jobs/4242/plots/cpu.svg").get_data(as_text=True) == cpu
    monkeypatch.undo()
    gap = make_client(settings, user="staffer").get("/jobs/4243")
    assert gap.status_code == 200
    assert len(list((tmp_path / "pdf-cache").rglob("*.svg.json"))) == 1  # a gap: not kept


def test_a_report_from_the_archive_is_final_a_report_with_a_source_down_is_not():
    from webapp.model import ARCHIVE_SOURCE, Gap
    from webapp.renderers.pdf_store import final

    ended = sample_report("4242")
    assert final(ended)
    assert final(replace(ended, gaps=(Gap(ARCHIVE_SOURCE, "Usage from the archive"),)))
    assert not final(replace(ended, gaps=(Gap("prometheus", "Connection refused"),)))
    assert not final(replace(ended, state="RUNNING", end_time=None))


def test_a_failed_background_build_is_told_to_the_next_request(tmp_path):
    """A reload of the 'being built' page after the builder failed gets the failure (an
    error page, or 503 when no slot freed up), not another 202 for ever."""
    from concurrent.futures import Future

    builds = PdfBuilds(store(tmp_path), in_process=True)
    broken: Future = Future()
    broken.set_exception(RuntimeError("pdflatex failed"))
    builds._forget("demo/1", broken)
    assert not builds.pending("demo/1")
    with pytest.raises(RuntimeError, match="pdflatex failed"):
        builds.build(sample_report("1"), lambda r: b"never", key="demo/1")
    busy: Future = Future()
    busy.set_exception(NoSlot())
    builds._forget("demo/2", busy)
    with pytest.raises(PdfBusy):
        builds.build(sample_report("2"), lambda r: b"never", key="demo/2")
