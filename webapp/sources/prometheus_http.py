"""The HTTP session the Prometheus source talks through: auth, CA bundle, client cert.

Secrets are read from files (a URL is shown in outage messages and logs; a file is not).
A bearer token file is re-read when it changes, so rotated tokens need no restart.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import requests
from requests.auth import AuthBase, HTTPBasicAuth


class BearerTokenFile(AuthBase):
    """``Authorization: Bearer <token>`` with the token read from a file (cached by mtime)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._token = ""

    def token(self) -> str:
        st = os.stat(self.path)
        with self._lock:
            if self._stamp != (st.st_mtime_ns, st.st_size):
                self._token = Path(self.path).read_text().strip()
                self._stamp = (st.st_mtime_ns, st.st_size)
            return self._token

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = f"Bearer {self.token()}"
        return r


def make_session(
    user: str = "",
    password_file: str = "",
    token_file: str = "",
    ca_bundle: str = "",
    client_cert: str = "",
    client_key: str = "",
) -> requests.Session:
    """A session that authenticates with basic auth or a bearer token and verifies TLS
    against ``ca_bundle`` (the system's CAs when empty), presenting a client certificate."""
    session = requests.Session()
    if user:
        session.auth = HTTPBasicAuth(user, Path(password_file).read_text().rstrip("\r\n"))
    elif token_file:
        session.auth = BearerTokenFile(token_file)
    if ca_bundle:
        session.verify = ca_bundle
        # With trust_env, REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE would silently replace it.
        session.trust_env = False
    if client_cert:
        session.cert = (client_cert, client_key) if client_key else client_cert
    return session
