"""A loopback HTTPS reverse proxy that demands credentials before it forwards to a real
Prometheus, as a site's nginx (or Prometheus's own web config) would; and the test
certificates it needs (a CA, a server and a client certificate, made with openssl)."""

from __future__ import annotations

import base64
import hmac
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests


def make_certs(tmp: Path) -> dict[str, Path]:
    """ca.pem, server.pem/.key (for 127.0.0.1), client.pem/.key, all signed by the CA."""
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
        "-keyout", "ca.key", "-out", "ca.pem")
    extensions = {"server": "subjectAltName=IP:127.0.0.1", "client": "extendedKeyUsage=clientAuth"}
    for name, ext in extensions.items():
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
        (tmp / f"{name}.ext").write_text(ext + "\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    return {n: tmp / n for n in ("ca.pem", "server.pem", "server.key", "client.pem",
                                 "client.key")}


class AuthProxy:
    """Accepts ``Authorization`` equal to ``expected`` (and, when ``client_ca`` is given,
    only clients with a certificate it signed); forwards the rest to ``upstream``."""

    def __init__(self, upstream: str, expected: str, certs: dict[str, Path],
                 require_client_cert: bool = True) -> None:
        self.upstream, self.expected = upstream, expected
        self.forwarded = 0
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                sent = self.headers.get("Authorization", "")
                if not hmac.compare_digest(sent.encode(), proxy.expected.encode()):
                    proxy.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="prometheus"')
                    self.end_headers()
                    self.wfile.write(b"Unauthorized\n")
                    return
                answer = requests.get(proxy.upstream + self.path, timeout=10)
                proxy.forwarded += 1
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", ""))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: object) -> None:
                pass

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certs["server.pem"], certs["server.key"])
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(certs["ca.pem"])
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_port}"


@contextmanager
def running(proxy: AuthProxy) -> Iterator[AuthProxy]:
    thread = threading.Thread(target=proxy.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
        thread.join(10)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
