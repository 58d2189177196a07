"""The PDF of real stack jobs, built by this checkout's report service: two pages for an
ordinary job, page 1 with the header, gauges, findings (with their evidence sentences)
and the #SBATCH block, page 2 with every plot the report has data for."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace

import pytest

from tests.helpers.browser import ARTIFACTS
from tests.helpers.reports import SIZING
from webapp.renderers import pdf
from webapp.renderers.charts import FIGURES
from webapp.renderers.presentation import evidence_line

# Each figure's own title, drawn inside the plot (tests/test_pdf.py checks the same names).
PLOT_TITLES = {"cpu": "CPU: cores busy per node", "cpu-cores": "CPU: mean busy per core",
               "memory": "Memory held per node", "gpu": "GPU utilization per GPU",
               "io": "I/O: read and write rate per node"}


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def _page(path, n: int) -> str:
    return " ".join(_run("pdftotext", "-layout", "-f", str(n), "-l", str(n), str(path),
                         "-").split())


@pytest.fixture(scope="module")
def rendered(stack_jobs, service, tmp_path_factory):
    """name -> (report, pdf path) for a GPU job, a memory job and an array."""
    out = {}
    tmp = tmp_path_factory.mktemp("pdf")
    for name in ("gpu-untouched", "mem-over-request", "array"):
        report = service.build(stack_jobs[name])
        # The history's block is the report service's to fill; the layout must hold it.
        if report.sizing is None:
            report = replace(report, sizing=SIZING)
        path = tmp / f"{name}.pdf"
        path.write_bytes(pdf.render(report))
        out[name] = report, path
    return out


@pytest.mark.parametrize("name", ["gpu-untouched", "mem-over-request", "array"])
def test_real_job_pdf_is_two_pages_with_findings_block_and_plots(rendered, name):
    report, path = rendered[name]
    pages = int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(path)), re.M).group(1))
    # verdict and findings on the first page, the plots on the second; the memory table,
    # the queue, the waste and the audit may run onto a third (a GPU job's do)
    assert pages in (2, 3)
    first, second = _page(path, 1), _page(path, 2)
    assert report.findings, "every job here has at least one finding"
    for f in report.findings:
        assert " ".join(f.message.replace("`", "").split()) in first, f.name
        assert evidence_line(f) in first, f.name
    for line in report.sizing.lines():
        assert line in first
    for label in ("CPU efficiency", "Memory peak of requested", "Time used of requested"):
        assert label in first
    plotted = [p.name for p in FIGURES if p.summary(report) is not None]
    assert "memory" in plotted  # a 6-second array task may end before its first CPU rate
    for key in plotted:
        assert PLOT_TITLES[key] in second, key
    assert f"Page 2 of {pages}" in second
    ARTIFACTS.mkdir(exist_ok=True)
    subprocess.run(["pdftoppm", "-png", "-r", "60", str(path),
                    str(ARTIFACTS / f"pdf-real-{name}")], check=True)


def test_gpu_job_shows_its_idle_gpu(rendered):
    report, path = rendered["gpu-untouched"]
    first = _page(path, 1)
    assert "GPU utilisation" in first and "1 GPU allocated; it was idle" in first
    assert "GPU utilization per GPU" in _page(path, 2)


def test_array_job_lists_its_tasks(rendered):
    report, path = rendered["array"]
    text = _page(path, 1) + " " + _page(path, 2)
    assert "Array summary" in text and "Array tasks" in text
    for task in report.array.tasks:
        assert task.job_id in text
