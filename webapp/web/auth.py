"""Who is asking: built-in password login or a trusted reverse proxy, plus CSRF tokens.

``password``: a login form checked against ``user:hash`` lines (werkzeug hashes) in
JOBREPORT_PASSWORD_FILE; the user name lives in the signed session cookie, with a session
id, the login time and a fingerprint of the user's password line. Every request checks
all three, so a session ends at logout (its id is recorded as ended in the shared state
file), after JOBREPORT_SESSION_LIFETIME, and as soon as the user is removed from the
password file or given a new password.
``remote-user``: the WSGI ``REMOTE_USER`` or the ``X-Remote-User`` header set by the
proxy (see deploy/nginx-jobreport.conf); only safe when the app is reachable solely
through that proxy, which must always overwrite the header.
With either, a portal's proxy (Open OnDemand's Apache, Grafana) whose own address is in
JOBREPORT_PROMETHEUS_FRONT_PROXIES names the user in the same header: its requests are
that user's, everybody else's are the session's (docs/api.md).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import threading
import time
import unicodedata
from pathlib import Path
from typing import cast
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
from flask.typing import ResponseReturnValue
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response as WerkzeugResponse

from webapp.model import JobReport
from webapp.settings import Settings
from webapp.web.state import WebState

bp = Blueprint("auth", __name__)
log = logging.getLogger(__name__)

# The Prometheus front (webapp/web/prometheus_front.py) says itself who asks (a session,
# or a trusted peer's header) and answers in Prometheus' format, never with a login page.
PROMETHEUS_FRONT = frozenset({"prometheus_front.api", "prometheus_front.label_values",
                              "prometheus_front.not_found"})
PUBLIC_ENDPOINTS = frozenset({"views.healthz", "auth.login", "static", "unsubscribe.page",
                              "unsubscribe.record", "api.openapi", *PROMETHEUS_FRONT})
# The opt-out link's signed token is its own proof; mail clients' one-click POST carries
# no session, so no CSRF token either. Grafana's POSTs to the Prometheus front carry none
# and change nothing (queries only); a cross-site POST carries no Lax session cookie.
CSRF_EXEMPT = frozenset({"unsubscribe.record", *PROMETHEUS_FRONT})
RAW_SUFFIXES = (".json", ".txt", ".pdf")
API_PREFIX = "/api/v1/"  # the JSON API (webapp.web.api): 401 and errors in JSON, no page
REMOTE_USER_HEADER = "X-Remote-User"
# Checked when the user does not exist, so a wrong name costs as long as a wrong password.
_DUMMY_HASH = generate_password_hash("not a password")
# The password file parsed, per path, with the stat it was read at: re-read when it changes.
_FILES: dict[str, tuple[tuple[int, int, int], dict[str, str]]] = {}
_FILES_LOCK = threading.Lock()


def settings() -> Settings:
    return cast(Settings, current_app.config["JOBREPORT_SETTINGS"])


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


def password_entries() -> dict[str, str] | None:
    """The password file's users and hashes (None when unreadable), re-read on change."""
    path = settings().password_file
    if not path:
        log.error("JOBREPORT_PASSWORD_FILE is empty: nobody can log in")
        return None
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with _FILES_LOCK:
            cached = _FILES.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        users = read_password_file(path)
    except OSError as exc:
        log.error("cannot read password file %s: %s", path, exc)
        return None
    with _FILES_LOCK:
        _FILES[path] = (stamp, users)
    return users


def check_login(username: str, password: str) -> str | None:
    """The user's password hash when the password file has this user with this password."""
    users = password_entries()
    if users is None:
        return None
    hashed = users.get(username)
    ok = check_password_hash(hashed or _DUMMY_HASH, password)
    return hashed if ok and hashed is not None else None


def fingerprint(hashed: str) -> str:
    """Names the password line a session was opened with, without revealing it."""
    key = current_app.config["SECRET_KEY"].encode()
    return hmac.new(key, hashed.encode(), hashlib.sha256).hexdigest()[:32]


def start_session(username: str, hashed: str) -> None:
    """A fresh session (no fixation) for a user who just gave the right password."""
    session.clear()
    session.permanent = True
    session.update(user=username, sid=secrets.token_urlsafe(24), since=time.time(),
                   pw=fingerprint(hashed))
    csrf_token()


def session_user() -> str | None:
    """The session's user while the session is still valid; otherwise it is cleared."""
    user = cast("str | None", session.get("user"))
    if not user:
        return None
    since = session.get("since")
    fresh = isinstance(since, float) and time.time() < since + settings().session_lifetime
    entries = password_entries() or {}
    hashed = entries.get(user)
    same_password = hashed is not None and hmac.compare_digest(
        fingerprint(hashed), str(session.get("pw", "")))
    if fresh and same_password and not web_state().session_ended(str(session.get("sid"))):
        return user
    log.info("session of %s ended (expired, logged out, or removed from the password file)",
             user)
    session.clear()
    return None


def end_session() -> None:
    """Logout: this session's id is refused from now on, by every worker."""
    sid, since = session.get("sid"), session.get("since")
    if sid and isinstance(since, float):
        web_state().end_session(str(sid), since + settings().session_lifetime)
    session.clear()


def web_state() -> WebState:
    return cast(WebState, current_app.extensions["jobreport.state"])


def is_staff(user: str | None) -> bool:
    """Staff (JOBREPORT_STAFF) may see every job."""
    return user is not None and user in settings().staff


def can_view(user: str, report: JobReport) -> bool:
    """Staff see every job; anybody else the jobs they own and those of the accounts they
    coordinate in Slurm."""
    return (is_staff(user) or (report.user is not None and report.user == user)
            or (report.account is not None and coordinates(user, report.account)))


_COORDINATORS_TTL = 60.0  # sacctmgr is asked at most once a minute per process
# sacctmgr command -> (when asked, account -> its coordinators)
_coordinators: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {}
_coordinators_lock = threading.Lock()


def coordinates(user: str | None, account: str) -> bool:
    """Whether ``user`` coordinates ``account`` in Slurm (``sacctmgr``'s coordinators, kept
    a minute); no when sacctmgr cannot say: its failure must not open a page."""
    from webapp.model import SourceUnavailable
    from webapp.sources.coordinators import Coordinators

    if not user:
        return False
    sacctmgr = settings().sacctmgr
    with _coordinators_lock:
        at, by_account = _coordinators.get(sacctmgr, (float("-inf"), {}))
        if time.monotonic() - at > _COORDINATORS_TTL:
            try:
                by_account = Coordinators(sacctmgr).by_account()
            except SourceUnavailable as exc:
                log.warning("account coordinators: %s (%s)", exc.reason, exc.detail)
                return False
            _coordinators[sacctmgr] = (time.monotonic(), by_account)
    return user in by_account.get(account, ())


def csrf_token() -> str:
    """The session's CSRF token, created on first use."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return cast(str, session["csrf"])


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


def peer_address() -> str:
    """The address of whoever opened the connection: before ProxyFix read
    ``X-Forwarded-For`` (JOBREPORT_TRUSTED_PROXIES), which a client may write itself."""
    orig = request.environ.get("werkzeug.proxy_fix.orig") or {}
    return orig.get("REMOTE_ADDR") or request.environ.get("REMOTE_ADDR") or ""


def from_trusted_proxy() -> bool:
    """The connection comes from an address of JOBREPORT_PROMETHEUS_FRONT_PROXIES (a
    portal's or Grafana's proxy), whose user header is believed."""
    trusted = settings().prometheus_front_proxies
    if not trusted:
        return False
    try:
        peer = ipaddress.ip_address(peer_address())
    except ValueError:
        return False
    if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
        peer = peer.ipv4_mapped  # a dual-stack listener's view of an IPv4 peer
    return any(peer in net for net in trusted)


def portal_user() -> str | None:
    """The user a trusted proxy names; None from any other peer, whatever it sends."""
    return _remote_user() if from_trusted_proxy() else None


def load_user() -> WerkzeugResponse | None:
    """Set g.user, check CSRF on POST and send anonymous visitors to the login page."""
    mode = settings().auth
    g.user = _remote_user() if mode == "remote-user" else portal_user() or session_user()
    if request.method == "POST" and request.endpoint not in CSRF_EXEMPT:
        check_csrf()
    if g.user or request.endpoint in PUBLIC_ENDPOINTS:
        return None
    if mode == "remote-user":
        abort(401, description="No authenticated user: the proxy did not pass REMOTE_USER.")
    if (request.path.endswith(RAW_SUFFIXES) or request.path.startswith(API_PREFIX)
            or request.endpoint is None):
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
def login() -> ResponseReturnValue:
    """Password login form; on success, back to the page that asked for it."""
    if settings().auth != "password":
        abort(404)
    next_url = _safe_next(request.values.get("next", ""))
    error = None
    if request.method == "POST":
        username = request.form.get("username", "").strip()
        hashed = check_login(username, request.form.get("password", ""))
        if hashed is not None:
            start_session(username, hashed)
            log.info("login %s from %s", username, request.remote_addr)
            return redirect(next_url)
        log.warning("failed login for %r from %s", username, request.remote_addr)
        error = "Wrong user name or password."
    code = 401 if error else 200
    return render_template("login.html", error=error, next=next_url), code


@bp.post("/logout")
def logout() -> WerkzeugResponse:
    """End the session (its cookie stops working everywhere) and go back to the login form."""
    end_session()
    return redirect(url_for("auth.login"))
