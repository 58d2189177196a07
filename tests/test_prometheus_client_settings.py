"""Prometheus behind basic auth, a bearer token and mutual TLS, through a real loopback
HTTPS proxy in front of the stack's real Prometheus; and no credentials in URLs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.auth_proxy import AuthProxy, basic, make_certs, running
from webapp.model import SourceUnavailable
from webapp.report.service import ReportService
from webapp.settings import Settings, SettingsError


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def usage_through(settings: Settings):
    end = datetime.now(UTC)
    prometheus = ReportService(settings).prometheus
    return prometheus.usage("1", end - timedelta(minutes=10), end)


def tls_settings(settings: Settings, url: str, certs, **changes) -> Settings:
    return replace(settings, prometheus_url=url, prometheus_ca_bundle=str(certs["ca.pem"]),
                   prometheus_client_cert=str(certs["client.pem"]),
                   prometheus_client_key=str(certs["client.key"]), **changes)


def test_basic_auth_with_ca_bundle_and_client_cert(settings, certs, tmp_path):
    (tmp_path / "pw").write_text("s3cret: with spaces\n")
    proxy = AuthProxy(settings.prometheus_url, basic("reports", "s3cret: with spaces"), certs)
    with running(proxy):
        good = tls_settings(settings, proxy.url, certs, prometheus_user="reports",
                            prometheus_password_file=str(tmp_path / "pw"))
        usage = usage_through(good)
        assert usage.step_seconds and proxy.forwarded >= 10 and proxy.refused == 0
        (tmp_path / "bad").write_text("wrong\n")
        with pytest.raises(SourceUnavailable, match="HTTP 401"):
            usage_through(replace(good, prometheus_password_file=str(tmp_path / "bad")))


def test_bearer_token_is_reread_when_it_changes(settings, certs, tmp_path):
    token = tmp_path / "token"
    token.write_text("first-token\n")
    proxy = AuthProxy(settings.prometheus_url, "Bearer first-token", certs)
    with running(proxy):
        service_settings = tls_settings(settings, proxy.url, certs,
                                        prometheus_token_file=str(token))
        prometheus = ReportService(service_settings).prometheus
        end = datetime.now(UTC)
        prometheus.usage("1", end - timedelta(minutes=10), end)
        assert proxy.forwarded and not proxy.refused
        proxy.expected = "Bearer rotated-token"
        token.write_text("rotated-token\n")  # no restart: the same source reads it
        forwarded = proxy.forwarded
        prometheus.usage("1", end - timedelta(minutes=10), end)
        assert proxy.forwarded > forwarded and not proxy.refused


def test_tls_is_verified_against_the_ca_bundle(settings, certs):
    proxy = AuthProxy(settings.prometheus_url, "", certs, require_client_cert=False)
    with running(proxy):
        with pytest.raises(SourceUnavailable, match="SSLError"):
            usage_through(replace(settings, prometheus_url=proxy.url))  # system CAs only
        usage_through(replace(settings, prometheus_url=proxy.url,
                              prometheus_ca_bundle=str(certs["ca.pem"])))
        assert proxy.forwarded


def test_a_client_certificate_is_required_by_the_proxy(settings, certs):
    proxy = AuthProxy(settings.prometheus_url, "", certs)
    with running(proxy):
        no_cert = replace(settings, prometheus_url=proxy.url,
                          prometheus_ca_bundle=str(certs["ca.pem"]))
        with pytest.raises(SourceUnavailable):
            usage_through(no_cert)
        assert proxy.forwarded == 0


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
