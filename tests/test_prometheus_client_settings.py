"""Prometheus client settings: no credentials in URLs, no inconsistent ones, and every
reader opening Prometheus from the same settings (basic auth, a bearer token and mutual
TLS through a real proxy in front of the stack's Prometheus:
tests/stack/test_prometheus_client_settings_live.py)."""

from __future__ import annotations

import pytest

from webapp.report.service import ReportService
from webapp.settings import Settings, SettingsError


@pytest.mark.parametrize("url", ["http://user:pw@prom:9090", "https://token@prom"])
def test_credentials_in_the_url_are_refused(url):
    with pytest.raises(SettingsError, match="JOBREPORT_PROMETHEUS_PASSWORD_FILE") as err:
        Settings.from_env({"JOBREPORT_PROMETHEUS_URL": url})
    assert "pw" not in str(err.value) and "token@" not in str(err.value)


@pytest.mark.parametrize(("env", "message"), [
    ({"JOBREPORT_PROMETHEUS_USER": "u"}, "go together"),
    ({"JOBREPORT_PROMETHEUS_USER": "u", "JOBREPORT_PROMETHEUS_PASSWORD_FILE": "/etc/hostname",
      "JOBREPORT_PROMETHEUS_TOKEN_FILE": "/etc/hostname"}, "not both"),
    ({"JOBREPORT_PROMETHEUS_TOKEN_FILE": "/nonexistent/token"}, "not a readable file"),
    ({"JOBREPORT_PROMETHEUS_CLIENT_KEY": "/etc/hostname"}, "needs .*CLIENT_CERT"),
])
def test_inconsistent_client_settings_are_refused(env, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_every_reader_opens_prometheus_from_the_same_settings(tmp_path):
    """The report service, the staff report, `jobreport watch` and `jobreport history`
    open Prometheus through one function: the same URL, credentials, TLS, node label and
    cluster label."""
    from webapp.cli.history import source_for
    from webapp.sources.from_settings import prometheus_from
    from webapp.sources.prometheus_http import BearerTokenFile
    from webapp.watch.run import Watcher

    for name in ("token", "ca.pem", "client.pem"):  # only read when a request is made
        (tmp_path / name).write_text("t\n")
    s = Settings.from_env({
        "JOBREPORT_CONFIG": "", "JOBREPORT_PROMETHEUS_URL": "https://prom.example:9090",
        "JOBREPORT_PROMETHEUS_TOKEN_FILE": str(tmp_path / "token"),
        "JOBREPORT_PROMETHEUS_CA_BUNDLE": str(tmp_path / "ca.pem"),
        "JOBREPORT_PROMETHEUS_CLIENT_CERT": str(tmp_path / "client.pem"),
        "JOBREPORT_PROMETHEUS_NODE_LABEL": "host", "JOBREPORT_PROMETHEUS_TIMEOUT": "5",
        "JOBREPORT_CLUSTER": "v24", "JOBREPORT_PROMETHEUS_CLUSTER_LABEL": "cluster"})
    readers = {
        "report": ReportService(s).prometheus,
        "staff": prometheus_from(s, min_timeout=30.0),
        "watch": Watcher(s, running=list).live.p,
        "history": source_for(s, "alice", "alice").p,
    }
    for name, p in readers.items():
        assert (p.url, p.node_label) == ("https://prom.example:9090", "host"), name
        assert p.cluster_matcher == 'cluster="v24"', name
        assert isinstance(p.session.auth, BearerTokenFile), name
        assert p.session.auth.path == str(tmp_path / "token"), name
        assert (p.session.verify, p.session.cert) == (
            str(tmp_path / "ca.pem"), str(tmp_path / "client.pem")), name
    assert {n: p.timeout for n, p in readers.items()} == {
        "report": 5.0, "staff": 30.0, "watch": 5.0, "history": 5.0}
