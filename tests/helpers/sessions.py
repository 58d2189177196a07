"""A signed-in session for Flask test clients, as the login form would open it."""

from __future__ import annotations

from pathlib import Path

from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from webapp.settings import Settings
from webapp.web import auth

PASSWORD = "correct horse"
SECRET = "sessions-test-secret-of-32-bytes-or-more"


def password_settings(tmp: Path, **changes) -> Settings:
    """Password login for alice, bob, carol and staffer (staff), state under ``tmp``."""
    hashed = generate_password_hash(PASSWORD)
    (tmp / "passwords").write_text(
        "".join(f"{u}:{hashed}\n" for u in ("alice", "bob", "carol", "staffer")))
    values = dict(secret_key=SECRET, password_file=str(tmp / "passwords"),
                  staff=frozenset({"staffer"}), web_state=str(tmp / "web-state.sqlite"),
                  pdf_cache_dir=str(tmp / "pdf-cache"), pdf_process=False)
    return Settings(**(values | changes))


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


def pdf_of(get, url: str, limit: float = 120.0):  # noqa: ANN001, ANN201 - a response
    """The PDF at ``url`` as a browser gets it: an ended job's is built in the background,
    and its "being built" page (202, Retry-After) is reloaded until the PDF is there.
    ``get``: a requests session's or a Flask test client's ``get``."""
    import time

    deadline = time.monotonic() + limit
    while True:
        resp = get(url)
        if resp.status_code != 202 or time.monotonic() > deadline:
            return resp
        time.sleep(float(resp.headers.get("Retry-After", "3")))
