"""The web tests' app, client and login, one of each: the app on the fake report service
with password login for alice, bob, carol and staffer (staff); a session opened directly,
or through the login form as a browser posts it (to a Flask test client, or over HTTP to a
served app). The fixtures built on them (``web_settings``, ``web_service``, ``app``,
``client``) are in tests/conftest.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from tests.helpers.reports import default_service
from tests.helpers.sacctmgr import fake_sacctmgr
from tests.helpers.wait import wait_for
from webapp import create_app
from webapp.settings import Settings
from webapp.web import auth

if TYPE_CHECKING:
    import requests

PASSWORD = "correct horse"
SECRET = "sessions-test-secret-of-32-bytes-or-more"
USERS = ("alice", "bob", "carol", "staffer")


def password_file(tmp: Path) -> str:
    """A password file under ``tmp`` for alice, bob, carol and staffer: its path."""
    hashed = generate_password_hash(PASSWORD)
    (tmp / "passwords").write_text("".join(f"{u}:{hashed}\n" for u in USERS))
    return str(tmp / "passwords")


def password_settings(tmp: Path, **changes) -> Settings:
    """Password login for alice, bob, carol and staffer (staff); the archive, the outbox and
    the web state under ``tmp``, never the demo stack's in var/; an account has no
    coordinators (a sacctmgr that lists none: the machine's own would ask its slurmdbd,
    whose absence logged a warning)."""
    if "sacctmgr" not in changes:
        changes["sacctmgr"] = fake_sacctmgr(tmp, "")
    values = dict(secret_key=SECRET, password_file=password_file(tmp),
                  staff=frozenset({"staffer"}), web_state=str(tmp / "web-state.sqlite"),
                  archive_url=str(tmp / "archive.sqlite"), outbox=str(tmp / "outbox.sqlite"),
                  pdf_cache_dir=str(tmp / "pdf-cache"), pdf_process=False)
    return Settings(**(values | changes))


FAKE = object()  # the report service: the fake one's sample reports


def make_app(settings: Settings, service: object = FAKE) -> Flask:
    """The web app on ``service``: the fake one's sample reports unless given; None
    builds the real one on first use, as the served app does."""
    app = create_app(settings, default_service() if service is FAKE else service)
    app.testing = True
    return app


def make_client(settings: Settings, service: object = FAKE,
                user: str | None = None) -> FlaskClient:
    """A test client of a fresh app (``make_app``), signed in as ``user`` when given."""
    app = make_app(settings, service)
    return app.test_client() if user is None else signed_in(app, user)


def signed_in(app: Flask, user: str) -> FlaskClient:
    """A new test client of ``app`` (another browser) with a session for ``user``."""
    client = app.test_client()
    sign_in(client, user)
    return client


def sign_in(client: FlaskClient, user: str) -> None:
    """Open a valid session for ``user`` (who must be in the app's password file)."""
    app = client.application
    with app.test_request_context():
        hashed = (auth.password_entries() or {})[user]
        auth.start_session(user, hashed)
        values = dict(auth.session)
    with client.session_transaction() as sess:
        sess.update(values)
        sess.permanent = True


def csrf_in(page: str) -> str:
    """The CSRF token of the first form on ``page``."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, f"no CSRF token on the page:\n{page[:2000]}"
    return found.group(1)


def token(client: FlaskClient, path: str = "/login") -> str:
    """The CSRF token of the form at ``path``, for this client's session."""
    return csrf_in(client.get(path).get_data(as_text=True))


def login(client: FlaskClient, user: str = "alice", password: str = PASSWORD,
          next_url: str = "/", **environ):  # noqa: ANN201 - the test response
    """Post the login form as a browser does (its CSRF token, ``next``); ``environ``: the
    request's WSGI environment beyond the defaults (REMOTE_ADDR, HTTP_X_FORWARDED_FOR)."""
    return client.post("/login", data={"username": user, "password": password,
                                       "csrf_token": token(client), "next": next_url},
                       environ_base=environ)


def http_login(base: str, user: str, password: str, session: requests.Session | None = None,
               timeout: float = 10, **headers: str) -> requests.Response:
    """Post the login form of the app served at ``base`` (in ``session``, a fresh one
    unless given); the answer, its redirect not followed."""
    import requests

    s = session or requests.Session()
    page = s.get(f"{base}/login", headers=headers, timeout=timeout).text
    return s.post(f"{base}/login", data={"username": user, "password": password,
                                         "csrf_token": csrf_in(page)},
                  headers=headers, allow_redirects=False, timeout=timeout)


def pdf_of(get, url: str, limit: float = 120.0):  # noqa: ANN001, ANN201 - a response
    """The PDF at ``url`` as a browser gets it: an ended job's is built in the background,
    and its "being built" page (202, Retry-After) is reloaded until the PDF is there.
    ``get``: a requests session's or a Flask test client's ``get``."""
    def built():  # noqa: ANN202 - the response in a list (a requests error answer is false)
        resp = get(url)
        return None if resp.status_code == 202 else [resp]

    return wait_for(built, limit, f"the PDF at {url} built", every=1)[0]
