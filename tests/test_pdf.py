"""PDF renderer: two pages for an ordinary job (header, gauges, findings, #SBATCH block;
then the plots in a grid), "Page X of Y", commands as code, hostile text printed literally."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import replace

import pytest

from tests.helpers.reports import (
    LATEX_PAYLOAD,
    array_report,
    busy_cpu_report,
    gap_report,
    gpu_report,
    many_findings_report,
)
from webapp.renderers import latex, pdf
from webapp.renderers.charts import FIGURES
from webapp.renderers.presentation import evidence_line

pytestmark = pytest.mark.needs("pdflatex")  # every test compiles a report


# The title each plot draws inside its own figure (what a reader sees on page 2).
PLOT_TITLES = ("CPU: cores busy per node", "CPU: mean busy per core",
               "Memory held per node", "GPU utilization per GPU",
               "I/O: read and write rate per node")


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def page_count(path) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(path)), re.M).group(1))


def page_text(path, page: int) -> str:
    """One page's text, white space collapsed (lines wrap where LaTeX breaks them)."""
    text = _run("pdftotext", "-layout", "-f", str(page), "-l", str(page), str(path), "-")
    return " ".join(text.split())


def write(body: bytes, tmp_path, name: str = "report.pdf"):
    path = tmp_path / name
    path.write_bytes(body)
    return path


@pytest.fixture(scope="module")
def ordinary(tmp_path_factory) -> tuple[object, None]:
    """The sample GPU job (three real findings, a sizing block, five plots); its render time
    is measured in bench/, not here."""
    body = pdf.render(gpu_report(name=LATEX_PAYLOAD))
    return write(body, tmp_path_factory.mktemp("pdf")), None


def test_an_ordinary_job_fits_two_pages(ordinary):
    assert page_count(ordinary[0]) == 2


def test_page_one_has_headline_gauges_findings_and_the_sbatch_block(ordinary):
    report = gpu_report(name=LATEX_PAYLOAD)
    first = page_text(ordinary[0], 1)
    for label in ("alice", "demo", "Used 21% of its 8 cores", "problems to fix",
                  "CPU efficiency 21%", "Memory peak of requested 38%", "GPU utilisation 42%",
                  "Time used of requested 25%"):
        assert label in first, label
    second = page_text(ordinary[0], 2)  # the job's facts lead the details
    for label in ("The job", "State", "COMPLETED", "Submitted", "Started", "Ended"):
        assert label in second, label
    assert not any(label in first for label in ("Submitted", "Started", "Ended"))
    assert report.findings
    for f in report.findings:
        assert f.message.replace("`", "") in first
        assert evidence_line(f) in first
        assert " ".join(f.advice.replace("`", "").split()) in first
    assert "#SBATCH --mem=4G #SBATCH --time=01:30:00 #SBATCH --cpus-per-task=2" in first
    assert "Based on 12 earlier jobs" in first
    assert "Page 1 of 2" in first


def test_page_two_has_every_plot(ordinary):
    second = page_text(ordinary[0], 2)
    for title in PLOT_TITLES:
        assert title in second, title
    for plot in FIGURES:
        assert f"{plot.title}." in second  # the caption under each plot
    assert "Page 2 of 2" in second
    # Each plot is an embedded PDF of its own (a form XObject), not a raster image.
    assert _run("pdfimages", "-list", "-f", "2", "-l", "2", str(ordinary[0])).count("\n") == 2


def test_commands_are_typewriter_text(ordinary, tmp_path):
    doc = pdf.build_document(gpu_report(), str(tmp_path))
    tex = doc.dumps()
    assert r"\texttt{{-{}}{-{}}gres=gpu:1}" in tex
    assert r"\textasciigrave{}" not in tex.split(r"\begin{document}")[1].split("Findings")[1]
    fonts = _run("pdffonts", "-f", "1", "-l", "1", str(ordinary[0]))
    assert "LMMono" in fonts


def test_latex_payload_prints_literally(ordinary):
    first = page_text(ordinary[0], 1)
    assert LATEX_PAYLOAD in first
    assert "root:" not in first + page_text(ordinary[0], 2)


def test_many_findings_still_two_pages(tmp_path):
    report = many_findings_report()
    path = write(pdf.render(report), tmp_path)
    assert len(report.findings) >= 8
    assert page_count(path) == 2
    first = page_text(path, 1)
    assert all(evidence_line(f) in first for f in report.findings)
    assert "#SBATCH --gres=gpu:1" in first


def test_busy_cpu_job_without_sizing_or_gpu(tmp_path):
    path = write(pdf.render(busy_cpu_report()), tmp_path)
    assert page_count(path) == 2
    first = page_text(path, 1)
    assert "No problems found" in first and "#SBATCH" not in first
    assert "GPU utilisation" not in first and "CPU efficiency 98%" in first
    second = page_text(path, 2)
    assert "GPU utilization per GPU" not in second and "CPU: cores busy per node" in second


def test_array_table_adds_pages_after_the_plots(tmp_path):
    path = write(pdf.render(array_report()), tmp_path)
    pages = page_count(path)
    assert pages == 3
    assert "Array summary" in page_text(path, 1) and "--mem=8G" in page_text(path, 1)
    assert "CPU: cores busy per node" in page_text(path, 2)
    last = page_text(path, 3)
    assert last.startswith("Job 4500 on demo user alice Array tasks task state")  # heading kept
    assert "4500_50" in last and "10 more tasks" in last


def test_gap_report_has_note_and_its_details_on_page_two(tmp_path):
    path = write(pdf.render(gap_report()), tmp_path)
    assert page_count(path) == 2
    first = page_text(path, 1)
    assert "Metrics unavailable (Prometheus)" in first and "Page 1 of 2" in first
    assert "Plots" not in page_text(path, 2)  # no series: no plots, the facts still


def test_hostile_characters_do_not_break_latex(tmp_path):
    name = "a--b <<x>> ``q'' \"d\" ?` !` é 日本\x07\ttab"
    path = write(pdf.render(replace(gap_report(), job_name=name)), tmp_path)
    assert "a--b <<x>> ``q'' \"d\" ?` !` é ??\\x07\\ttab" in page_text(path, 1)


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


def _counted_passes(monkeypatch) -> list[str]:
    real, passes = pdf.subprocess.run, []

    def counted(argv, **kw):
        passes.append(argv[-1])
        return real(argv, **kw)

    monkeypatch.setattr(pdf.subprocess, "run", counted)
    return passes


def test_a_two_page_report_compiles_in_one_pass(monkeypatch, tmp_path):
    """The .aux starts out saying two pages, as the finished run's would: the first pass
    prints the total and its log asks for no second."""
    passes = _counted_passes(monkeypatch)
    path = write(pdf.render(gpu_report()), tmp_path)
    assert passes == ["report.tex"]
    assert "Page 1 of 2" in page_text(path, 1) and "Page 2 of 2" in page_text(path, 2)


def test_a_longer_report_takes_a_second_pass_for_its_total(monkeypatch, tmp_path):
    passes = _counted_passes(monkeypatch)
    path = write(pdf.render(array_report()), tmp_path)
    assert passes == ["report.tex", "report.tex"]
    assert [f"Page {n} of 3" in page_text(path, n) for n in (1, 2, 3)] == [True] * 3


def test_work_dir_of_13000_backslashes_is_cut_and_says_so(tmp_path):
    """pdflatex reads a source line into a 200,000-character buffer; this work dir's line
    (16 characters per escaped backslash) overflowed it and failed the whole PDF."""
    work_dir = "/tmp/" + "\\" * 13_000
    report = replace(gap_report(), work_dir=work_dir)
    tex = pdf.build_document(report, str(tmp_path)).dumps()
    assert max(len(line) for line in tex.splitlines()) < 2 * latex.SOURCE_LINE
    path = write(pdf.render(report), tmp_path)
    second = page_text(path, 2)  # the job's facts lead the details
    assert "/tmp/\\\\\\" in second
    assert "(cut, 13,005 characters)" in second
    assert second.count("\\") < latex.MAX_CHARS  # not the whole path


def test_name_of_100000_characters_is_cut_and_says_so(tmp_path):
    name = "~\\{" * 33_334  # 100,002 characters, each several in LaTeX
    path = write(pdf.render(replace(gap_report(), job_name=name)), tmp_path)
    text = " ".join(_run("pdftotext", "-layout", str(path), "-").split())
    assert "(cut, 100,002 characters)" in text  # the name's row
    assert "(cut, 100,012 characters)" in text  # the title: "Job 4243: " and the name
    assert "~\\{~\\{" in text
    assert page_count(path) <= 3


def test_long_text_wraps_inside_the_page(tmp_path):
    """A long path has no space to break at: it wraps in its column, every line of it
    inside the page's width (A4, 1.5 cm margins)."""
    work_dir = "/scratch/" + "d" * 600
    path = write(pdf.render(replace(gap_report(), work_dir=work_dir)), tmp_path)
    lines = [line for line in _run("pdftotext", "-layout", str(path), "-").splitlines()
             if "dddd" in line]
    assert len(lines) > 5  # wrapped, not one line running off the page
    assert sum(len(run) for line in lines for run in re.findall("d{2,}", line)) == 600
