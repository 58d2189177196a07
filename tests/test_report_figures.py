"""The key figures (gauges) and the suggested #SBATCH block: computed once in
presentation, drawn by the web page (server-side, no script) and the PDF."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tests.helpers.reports import HTML_PAYLOAD, SIZING, busy_cpu_report, gpu_report
from webapp.model import SizingSuggestion
from webapp.renderers import html
from webapp.renderers.presentation import gauges, sizing_lines, sizing_note


def test_gauges_are_the_reports_own_figures():
    report = gpu_report()
    by_label = {g.label: g for g in gauges(report)}
    assert list(by_label) == ["CPU efficiency", "Memory peak of requested", "GPU utilisation",
                              "Time used of requested"]
    assert by_label["CPU efficiency"].ratio == report.cpu_efficiency
    assert by_label["Memory peak of requested"].ratio == report.memory_efficiency
    assert by_label["GPU utilisation"].ratio == report.gpu_utilization
    assert report.gpu_utilization == pytest.approx((0.85 + 0.0) / 2)
    assert by_label["Time used of requested"].ratio == report.time_used == 0.25
    assert by_label["Time used of requested"].detail == "1h 00m of 4h 00m"
    assert "GPU utilisation" not in {g.label for g in gauges(busy_cpu_report())}


def test_a_ratio_over_one_fills_the_bar_and_is_marked():
    report = replace(busy_cpu_report(), elapsed_seconds=3 * 3600.0)
    time_gauge = gauges(report)[-1]
    assert time_gauge.ratio == 1.5 and time_gauge.fill == 1.0 and time_gauge.over
    # Without a finite limit there is no ratio to draw: the gauge is left out, not "n/a".
    unknown = gauges(replace(report, time_limit_seconds=None))
    assert "Time used of requested" not in {g.label for g in unknown}


def test_page_draws_the_gauges_without_script():
    page = html.render(gpu_report())
    section = page.split('<section id="figures">', 1)[1].split("</section>", 1)[0]
    widths = re.findall(r'<span style="width: ([0-9.]+)%"></span>', section)
    assert widths == ["21.2", "37.5", "42.5", "25.0"]
    assert "<script" not in page
    assert 'aria-label="CPU efficiency: 21%"' in section


def test_sizing_block_on_the_page_only_when_there_is_one():
    page = html.render(gpu_report())
    block = page.split('<pre class="sbatch">', 1)[1].split("</pre>", 1)[0]
    assert block.splitlines() == SIZING.lines() == [
        "#SBATCH --mem=4G", "#SBATCH --time=01:30:00", "#SBATCH --cpus-per-task=2",
        "#SBATCH --gres=gpu:1"]
    assert "Based on 12 earlier jobs (jobs named &#39;train-model&#39; of alice" in page
    assert 'class="sbatch"' not in html.render(busy_cpu_report())


def test_sizing_text_is_escaped_and_one_line():
    hostile = SizingSuggestion((("--job-name", HTML_PAYLOAD + "\nx"),), based_on=1,
                               basis=HTML_PAYLOAD)
    report = replace(gpu_report(), sizing=hostile)
    assert sizing_lines(report.sizing) == [f"#SBATCH --job-name={HTML_PAYLOAD}\\nx"]
    assert sizing_note(report) == f"Based on 1 earlier job ({HTML_PAYLOAD})."
    page = html.render(report)
    assert HTML_PAYLOAD not in page and "&lt;script&gt;" in page
