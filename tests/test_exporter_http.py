"""jobs-exporter's /metrics over real HTTP (``jobs_exporter.http_server``): the text
format 0.0.4 whatever Prometheus asks for, gzipped when it accepts gzip, the same
families as prometheus_client's own writer, on IPv4 and IPv6, one connection kept from
one scrape to the next as Prometheus keeps it."""

from __future__ import annotations

import gzip
import http.client
import socket

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from jobs_exporter.http_server import TEXT_FORMAT, serve

# What Prometheus sends (its default scrape_protocols): OpenMetrics preferred.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,"
                     "application/openmetrics-text;version=0.0.1;q=0.4,"
                     "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")


@pytest.fixture
def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    c = Counter("jobs_test_seconds", "A counter of the test.", ["jobid"], registry=reg)
    for i in range(200):
        c.labels(str(1000 + i)).inc(i * 1.5)
    return reg


def get(host: str, port: int, headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/metrics", headers=headers)
    return conn.getresponse()


def test_prometheus_gets_the_text_format_gzipped(registry):
    httpd = serve(registry, "127.0.0.1", 0)
    try:
        answer = get("127.0.0.1", httpd.server_port,
                     {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
        raw = answer.read()
        assert answer.status == 200
        assert answer.getheader("Content-Type") == TEXT_FORMAT
        assert answer.getheader("Content-Encoding") == "gzip"
        assert int(answer.getheader("Content-Length")) == len(raw)
        body = gzip.decompress(raw)
        assert body == generate_latest(registry)  # the text writer's families, unchanged
        assert b"# EOF" not in body  # not OpenMetrics
        assert len(raw) < len(body) / 3
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_without_gzip_plain_text(registry):
    httpd = serve(registry, "127.0.0.1", 0)
    try:
        answer = get("127.0.0.1", httpd.server_port, {})
        body = answer.read()
        assert answer.getheader("Content-Encoding") is None
        assert body == generate_latest(registry)
        assert int(answer.getheader("Content-Length")) == len(body)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_ipv6(registry):
    try:
        socket.socket(socket.AF_INET6).close()
        httpd = serve(registry, "::1", 0)
    except OSError as exc:  # a kernel without IPv6 says so; this one is checked in CI
        pytest.fail(f"no IPv6 loopback here: {exc}")
    try:
        answer = get("::1", httpd.server_port, {"Accept-Encoding": "gzip"})
        assert answer.status == 200
        assert gzip.decompress(answer.read()) == generate_latest(registry)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_connection_is_kept_between_scrapes(registry):
    httpd = serve(registry, "127.0.0.1", 0)
    conn = http.client.HTTPConnection("127.0.0.1", httpd.server_port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
        first = conn.getresponse()
        assert gzip.decompress(first.read()) == generate_latest(registry)
        assert first.version == 11 and not first.will_close
        sock = conn.sock
        conn.request("GET", "/metrics")
        second = conn.getresponse()
        assert second.read() == generate_latest(registry)
        assert conn.sock is sock  # the same connection answered both
    finally:
        conn.close()
        httpd.shutdown()
        httpd.server_close()


def test_the_body_is_not_held_back_for_the_scrapers_ack(registry, monkeypatch):
    """The answer's two writes (headers, then the body) go out at once: with Nagle's
    algorithm on, the body waited for the scraper's delayed ACK of the headers, 43 ms a
    scrape of an 80 KB text kept alive on loopback (0.5 ms without)."""
    from jobs_exporter import http_server

    seen: list[int] = []
    setup = http_server._Handler.setup

    def record(self):
        setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(http_server._Handler, "setup", record)
    httpd = serve(registry, "127.0.0.1", 0)
    try:
        assert get("127.0.0.1", httpd.server_port, {}).read() == generate_latest(registry)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert seen == [1]
