"""Who is asking: built-in password login or a trusted reverse proxy, plus CSRF tokens.

``password``: a login form checked against ``user:hash`` lines (werkzeug hashes) in
JOBREPORT_PASSWORD_FILE; the user name lives in the signed session cookie.
``remote-user``: the WSGI ``REMOTE_USER`` or the ``X-Remote-User`` header set by the
proxy (see deploy/nginx-jobreport.conf); only safe when the app is reachable solely
through that proxy, which must always overwrite the header.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.security import check_password_hash, generate_password_hash

from webapp.model import JobReport
from webapp.settings import Settings

bp = Blueprint("auth", __name__)
log = logging.getLogger(__name__)

PUBLIC_ENDPOINTS = frozenset({"views.healthz", "auth.login", "static"})
RAW_SUFFIXES = (".json", ".txt", ".pdf")
REMOTE_USER_HEADER = "X-Remote-User"
# Checked when the user does not exist, so a wrong name costs as long as a wrong password.
_DUMMY_HASH = generate_password_hash("not a password")


def settings() -> Settings:
    return current_app.config["JOBREPORT_SETTINGS"]


def read_password_file(path: str) -> dict[str, str]:
    """Parse lines like ``alice:scrypt:32768:8:1$salt$hash`` (the hash may hold colons)."""
    users: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, hashed = line.partition(":")
            if sep and name and hashed:
                users[name.strip()] = hashed.strip()
    return users


def check_login(username: str, password: str) -> bool:
    """True when the password file has this user with this password."""
    path = settings().password_file
    if not path:
        log.error("JOBREPORT_PASSWORD_FILE is empty: nobody can log in")
        return False
    try:
        users = read_password_file(path)
    except OSError as exc:
        log.error("cannot read password file %s: %s", path, exc)
        return False
    hashed = users.get(username)
    ok = check_password_hash(hashed or _DUMMY_HASH, password)
    return ok and hashed is not None


def is_staff(user: str | None) -> bool:
    """Staff (JOBREPORT_STAFF) may see every job."""
    return user is not None and user in settings().staff


def can_view(user: str, report: JobReport) -> bool:
    """Staff see every job; anybody else only the jobs they own."""
    return is_staff(user) or (report.user is not None and report.user == user)


def csrf_token() -> str:
    """The session's CSRF token, created on first use."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return session["csrf"]


def check_csrf() -> None:
    """Refuse (400) any POST whose form token is not the session's."""
    sent = request.form.get("csrf_token", "")
    expected = session.get("csrf", "")
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        abort(400, description="The form's security token is missing or expired. "
                               "Reload the page and try again.")


def _remote_user() -> str | None:
    user = request.environ.get("REMOTE_USER") or request.headers.get(REMOTE_USER_HEADER) or ""
    return user.strip() or None


def load_user() -> None:
    """Set g.user, check CSRF on POST and send anonymous visitors to the login page."""
    mode = settings().auth
    g.user = _remote_user() if mode == "remote-user" else session.get("user")
    if request.method == "POST":
        check_csrf()
    if g.user or request.endpoint in PUBLIC_ENDPOINTS:
        return None
    if mode == "remote-user":
        abort(401, description="No authenticated user: the proxy did not pass REMOTE_USER.")
    if request.path.endswith(RAW_SUFFIXES) or request.endpoint is None:
        abort(401, description="Log in first.")
    return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))


def _safe_next(target: str) -> str:
    r"""Only same-site paths: no open redirect.

    Browsers and Werkzeug drop tabs and newlines and read backslashes as slashes, so
    ``/\t/evil.example`` or ``/\evil.example`` would become ``//evil.example``: refuse any
    whitespace or control character, then anything that, with backslashes read as
    slashes, has a scheme or a host or does not start with exactly one ``/``.
    """
    index = url_for("views.index")
    if not target or any(ch.isspace() or unicodedata.category(ch)[0] == "C" for ch in target):
        return index
    normalised = target.strip().replace("\\", "/")
    parts = urlsplit(normalised)
    same_site = normalised.startswith("/") and not normalised.startswith("//")
    if parts.scheme or parts.netloc or not same_site:
        return index
    return target


@bp.route("/login", methods=("GET", "POST"))
def login():
    """Password login form; on success, back to the page that asked for it."""
    if settings().auth != "password":
        abort(404)
    next_url = _safe_next(request.values.get("next", ""))
    error = None
    if request.method == "POST":
        username = request.form.get("username", "").strip()
        if check_login(username, request.form.get("password", "")):
            session.clear()  # a fresh session on login: no fixation
            session["user"] = username
            csrf_token()
            log.info("login %s from %s", username, request.remote_addr)
            return redirect(next_url)
        log.warning("failed login for %r from %s", username, request.remote_addr)
        error = "Wrong user name or password."
    code = 401 if error else 200
    return render_template("login.html", error=error, next=next_url), code


@bp.post("/logout")
def logout():
    """Forget the session and go back to the login form."""
    session.clear()
    return redirect(url_for("auth.login"))
