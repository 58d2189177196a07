"""PDF renderer: a section per page, "Page X of Y", findings, hostile text printed literally."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import replace

import pytest

from tests.helpers.reports import LATEX_PAYLOAD, gap_report, sample_report
from webapp.renderers import pdf


def pdf_pages(body: bytes, tmp_path) -> list[str]:
    path = tmp_path / "report.pdf"
    path.write_bytes(body)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout
    return text.split("\f")[:-1]  # pdftotext ends every page with a form feed


@pytest.fixture(scope="module")
def full_pdf() -> tuple[bytes, float]:
    started = time.perf_counter()
    body = pdf.render(sample_report(name=LATEX_PAYLOAD))
    return body, time.perf_counter() - started


def test_one_section_per_page(full_pdf, tmp_path):
    pages = pdf_pages(full_pdf[0], tmp_path)
    titles = ["Summary", "Findings", "CPU per node", "CPU per core", "Memory",
              "GPU utilization", "I/O"]
    assert len(pages) == len(titles)
    for page, title in zip(pages, titles, strict=True):
        assert re.search(rf"^{re.escape(title)}\s*$", page, re.M), (title, page[:300])


def test_page_x_of_y(full_pdf, tmp_path):
    pages = pdf_pages(full_pdf[0], tmp_path)
    for number, page in enumerate(pages, start=1):
        assert f"Page {number} of {len(pages)}" in page


def test_findings_and_advice_present(full_pdf, tmp_path):
    findings = pdf_pages(full_pdf[0], tmp_path)[1]
    for text in ("GPU gpu1 was idle for the whole job.", "Advice: Request --gres=gpu:1.",
                 "Ask for --mem=4G next time.", "CRITICAL", "WARNING"):
        assert text in findings


def test_latex_payload_prints_literally(full_pdf, tmp_path):
    summary = pdf_pages(full_pdf[0], tmp_path)[0]
    assert LATEX_PAYLOAD in summary
    assert "root:" not in "".join(pdf_pages(full_pdf[0], tmp_path))


def test_render_time(full_pdf):
    print(f"PDF render with 5 plots: {full_pdf[1]:.2f} s")
    assert full_pdf[1] < 5.0


def test_gap_report_has_note_and_no_plot_pages(tmp_path):
    pages = pdf_pages(pdf.render(gap_report()), tmp_path)
    assert len(pages) == 2
    assert "Metrics unavailable (Prometheus)" in pages[0]
    assert "Page 2 of 2" in pages[1]


def test_hostile_characters_do_not_break_latex(tmp_path):
    name = "a--b <<x>> ``q'' \"d\" ?` !` é 日本\x07\ttab"
    pages = pdf_pages(pdf.render(replace(gap_report(), job_name=name)), tmp_path)
    assert "a--b <<x>> ``q'' \"d\" ?` !` é ?? tab" in pages[0]


def test_temporary_directory_removed_even_on_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pdf.render(gap_report())
    assert list(tmp_path.iterdir()) == []

    def broken(tex_path):
        raise pdf.PdfError("boom")

    monkeypatch.setattr(pdf, "compile_tex", broken)
    with pytest.raises(pdf.PdfError):
        pdf.render(gap_report())
    assert list(tmp_path.iterdir()) == []


def test_two_pdflatex_passes_without_latexmk(monkeypatch, tmp_path):
    monkeypatch.setattr(pdf.shutil, "which", lambda name: None)
    pages = pdf_pages(pdf.render(gap_report()), tmp_path)
    assert "Page 1 of 2" in pages[0]
