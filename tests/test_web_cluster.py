"""/cluster and /api/constants through the Flask client: login, the constants file,
a Prometheus that cannot be reached, and a broken constants file; the usage plot, which
ends at now."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from tests.helpers.web import make_client, password_settings
from webapp.model import Series
from webapp.renderers.cluster_chart import time_axis, usage_svg
from webapp.settings import Settings, SettingsError
from webapp.sources.cluster_overview import USAGE_DAYS, ClusterOverviewSource
from webapp.sources.prometheus import MAX_POINTS, PrometheusSource

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = ROOT / "deploy" / "slurm-exporter-constants.toml"


@pytest.fixture
def web_settings(tmp_path) -> Settings:
    """The conftest's web settings with the stack's constants file and a Prometheus that
    refuses connections (port 9, discard): Prometheus down, for real."""
    return password_settings(tmp_path, prometheus_url="http://127.0.0.1:9",
                             prometheus_timeout=2, constants_file=str(CONSTANTS))


@pytest.mark.parametrize("path", ["/cluster", "/api/constants"])
def test_login_required(client, path):
    resp = client.get(path)
    assert resp.status_code == 302 and "/login" in resp.headers["Location"]


def test_constants_served_as_json(web_settings):
    resp = make_client(web_settings, user="bob").get("/api/constants")
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.json["demo"]["accounts"]["research"] == {"gpu_years": 1.5, "target_share": 0.75}
    assert resp.json["demo"]["gpus"] == 2.0


def test_no_constants_file_is_an_empty_object(web_settings):
    client = make_client(replace(web_settings, constants_file=""), user="bob")
    assert client.get("/api/constants").json == {}


def test_a_broken_constants_file_stops_the_start_naming_the_setting_and_key(web_settings,
                                                                             tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[clusters.demo]\nstudnets = 2\n")
    with pytest.raises(SettingsError, match="JOBREPORT_CONSTANTS_FILE=.*studnets"):
        make_client(replace(web_settings, constants_file=str(bad)))


def test_cluster_page_says_data_unavailable_when_prometheus_is_down(web_settings):
    resp = make_client(web_settings, user="bob").get("/cluster")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert "Cluster data unavailable (Prometheus)" in page and "<script" not in page
    assert 'href="/cluster"' in page  # linked from the page header


def test_usage_plot_draws_each_target_as_gpus_on_average():
    now = 1795440000.0
    used = (Series("research", ((now - 7200, 1.0), (now - 3600, 2.0))),)
    svg, summary = usage_svg(used, {"research": 1.5, "teaching": 0.5}, now)
    assert svg.startswith("<svg") and svg.count('stroke-dasharray') >= 2  # two target lines
    assert "research 1.50" in summary and "research 1.5, teaching 0.5" in summary
    assert usage_svg((), {}, now) is None


class Evaluating(requests.Session):
    """Answers a range query as Prometheus evaluates one: ``start + k * step`` up to
    ``end``, one GPU of account ``research`` at each instant; keeps the parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[dict] = []

    def get(self, url, params=None, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.asked.append(dict(params))
        result = []
        if url.endswith("query_range"):
            start, end, step = (float(params[k]) for k in ("start", "end", "step"))
            n = int((end - start) // step)
            result = [{"metric": {"account": "research"},
                       "values": [[start + k * step, "1"] for k in range(n + 1)]}]
        resp = requests.Response()
        resp.status_code = 200
        resp._content = json.dumps(  # noqa: SLF001 - a canned answer
            {"status": "success", "data": {"resultType": "matrix" if result else "vector",
                                           "result": result}}).encode()
        return resp


@pytest.mark.parametrize("scrape", [5, 30])
def test_usage_series_ends_at_the_query_time(scrape):
    # From now - 7 days at 606 s steps, the last instant fell 12 s before now; the plot
    # stopped short of its "now".
    session = Evaluating()
    src = ClusterOverviewSource(PrometheusSource("http://prom", scrape_interval=scrape,
                                                 session=session), "demo")
    now = 1795925000.25
    (series,) = src.overview(now).usage
    assert series.points[-1][0] == pytest.approx(now, abs=1e-6)
    assert series.points[0][0] <= now - USAGE_DAYS * 86400  # the whole window
    (asked,) = [p for p in session.asked if "step" in p]
    assert asked["end"] == now and len(series.points) <= MAX_POINTS


def test_usage_plot_ends_at_now():
    # The axis runs from the first point to now (0): no margin past the last point (5 % of
    # a 10-hour span put the right edge half an hour after it).
    now = 1795440000.0
    used = (Series("research", tuple((now - 600 * k, 1.0) for k in range(60, -1, -1))),)
    svg, _ = usage_svg(used, {}, now)
    frame = re.search(r'<g id="patch_2">\s*<path d="([^"]*)"', svg).group(1)
    right = max(float(x) for x in re.findall(r"[ML] ([\d.]+) ", frame))
    ticks = dict(re.findall(r'<g id="xtick_\d+">.*?<path d="M ([\d.]+) .*?<!-- (\S+) -->',
                            svg, re.S))
    assert {label: float(x) for x, label in ticks.items()}["0"] == pytest.approx(right)
    left, div, unit = time_axis(used, now)
    assert (left, div, unit) == (-10.0, 3600, "hours")
