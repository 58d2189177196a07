"""Charts: one SVG per plot with data, nothing for missing data, cached by content."""

from __future__ import annotations

from dataclasses import replace

import matplotlib

from tests.helpers.reports import gap_report, sample_report
from webapp.model import Series, Usage
from webapp.renderers import charts


def test_every_plot_renders_as_inline_svg():
    rendered = charts.svg_charts(sample_report())
    assert [c.name for c in rendered] == ["cpu", "cpu-cores", "memory", "gpu", "io"]
    for chart in rendered:
        assert chart.svg.startswith("<svg") and chart.svg.rstrip().endswith("</svg>")
        assert chart.summary


def test_no_data_no_plot():
    assert charts.svg_charts(gap_report()) == []
    only_cpu = replace(sample_report(), usage=Usage(cpu_cores=sample_report().usage.cpu_cores))
    assert [c.name for c in charts.svg_charts(only_cpu)] == ["cpu"]


def test_memory_summary_names_the_request():
    summary = charts.PLOTS["memory"].summary(sample_report())
    assert "of 8.0 GiB requested per node" in summary


def test_agg_backend_and_no_pyplot_figures():
    charts.svg_charts(sample_report())
    assert matplotlib.get_backend().lower() == "agg"
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []


def test_labels_are_escaped_in_svg():
    hostile = Series("--><script>alert(1)</script>", ((0.0, 1.0), (60.0, 2.0)))
    report = replace(sample_report(), usage=Usage(cpu_cores=(hostile,)))
    svg = charts.svg_charts(report)[0].svg
    assert "<script>" not in svg


def test_cache_hits_by_content():
    cache = charts.ChartCache(size=2)
    first = cache.get(sample_report())
    assert cache.get(sample_report()) is first
    assert cache.get(sample_report(n=10)) is not first
    cache.get(sample_report(n=11))
    assert cache.get(sample_report()) is not first  # evicted (LRU of 2)


def test_a_pages_list_of_plots_builds_no_figure(monkeypatch):
    """The page lists each plot's title and summary (its image loads on its own): the
    same as the drawn plots', computed without building a figure."""
    drawn = [(c.name, c.title, c.summary) for c in charts.svg_charts(sample_report())]

    def no_figure(*args, **kwargs):
        raise AssertionError("a figure was built for a page's list of plots")

    monkeypatch.setattr(charts, "_figure", no_figure)
    listed = charts.chart_refs(sample_report())
    assert [(c.name, c.title, c.summary) for c in listed] == drawn
    assert {c.svg for c in listed} == {""}
    assert charts.chart_refs(gap_report()) == []
