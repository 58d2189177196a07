"""/cluster and /api/constants through the Flask client: login, the constants file,
a Prometheus that cannot be reached, and a broken constants file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from werkzeug.security import generate_password_hash

from tests.helpers.reports import default_service
from tests.helpers.sessions import sign_in
from webapp import create_app
from webapp.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = ROOT / "deploy" / "slurm-exporter-constants.toml"


@pytest.fixture
def web_settings(tmp_path) -> Settings:
    (tmp_path / "passwords").write_text(f"bob:{generate_password_hash('pw')}\n")
    # Port 9 (discard) refuses connections: Prometheus down, for real.
    return Settings(secret_key="cluster-page-test-" + "k" * 32,
                    password_file=str(tmp_path / "passwords"),
                    web_state=str(tmp_path / "web-state.sqlite"),
                    prometheus_url="http://127.0.0.1:9", prometheus_timeout=2,
                    constants_file=str(CONSTANTS))


def client_for(settings: Settings, signed_in: bool = True):
    app = create_app(settings, default_service())
    app.testing = True
    client = app.test_client()
    if signed_in:
        sign_in(client, "bob")
    return client


@pytest.mark.parametrize("path", ["/cluster", "/api/constants"])
def test_login_required(web_settings, path):
    resp = client_for(web_settings, signed_in=False).get(path)
    assert resp.status_code == 302 and "/login" in resp.headers["Location"]


def test_constants_served_as_json(web_settings):
    resp = client_for(web_settings).get("/api/constants")
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.json["demo"]["accounts"]["research"] == {"gpu_years": 1.5, "target_share": 0.75}
    assert resp.json["demo"]["gpus"] == 2.0


def test_no_constants_file_is_an_empty_object(web_settings):
    assert client_for(replace(web_settings, constants_file="")).get("/api/constants").json == {}


def test_a_broken_constants_file_stops_the_start_naming_the_setting_and_key(web_settings,
                                                                             tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text("[clusters.demo]\nstudnets = 2\n")
    with pytest.raises(SettingsError, match="JOBREPORT_CONSTANTS_FILE=.*studnets"):
        client_for(replace(web_settings, constants_file=str(bad)))


def test_cluster_page_says_data_unavailable_when_prometheus_is_down(web_settings):
    resp = client_for(web_settings).get("/cluster")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert "Cluster data unavailable (Prometheus)" in page and "<script" not in page
    assert 'href="/cluster"' in page  # linked from the page header


def test_usage_plot_draws_each_target_as_gpus_on_average():
    from webapp.model import Series
    from webapp.renderers.cluster_chart import usage_svg

    now = 1795440000.0
    used = (Series("research", ((now - 7200, 1.0), (now - 3600, 2.0))),)
    svg, summary = usage_svg(used, {"research": 1.5, "teaching": 0.5}, now)
    assert svg.startswith("<svg") and svg.count('stroke-dasharray') >= 2  # two target lines
    assert "research 1.50" in summary and "research 1.5, teaching 0.5" in summary
    assert usage_svg((), {}, now) is None
