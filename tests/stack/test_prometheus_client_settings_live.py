"""Prometheus behind basic auth, a bearer token and mutual TLS, through a real loopback
HTTPS proxy in front of the stack's real Prometheus (the settings' own checks:
tests/test_prometheus_client_settings.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.auth_proxy import AuthProxy, basic, make_certs, running
from webapp.model import SourceUnavailable
from webapp.report.service import ReportService
from webapp.settings import Settings


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
