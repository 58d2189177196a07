"""Login rate limits (Flask-Limiter) whose counters every gunicorn worker shares.

Flask-Limiter's ``memory://`` storage counts per process: with N workers an attacker
gets N times the limit, and a restart forgets it. Redis or memcached share counters but
are one more service to run, so by default the counters live in the web app's SQLite
state file, registered with ``limits`` as the ``jobreport+sqlite://`` storage (only the
fixed-window strategy is needed). Sites that serve the app from several hosts set
JOBREPORT_RATELIMIT_STORAGE to a shared ``redis://`` URI instead.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from flask_limiter import Limiter
from limits import parse_many
from limits.storage import Storage

from webapp.settings import Settings, SettingsError, env_name
from webapp.web.state import WebState

SCHEME = "jobreport+sqlite"
TOO_MANY = ("Too many failed logins {who}: logging in is paused for a while. Try again "
            "later, or ask the administrators to reset your password.")


class SqliteStorage(Storage):
    """Fixed-window counters in the ``counters`` table of a ``WebState`` file."""

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: object) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self.state = WebState(uri.removeprefix(f"{SCHEME}://"))

    @property
    def base_exceptions(self) -> type[Exception]:
        return sqlite3.Error

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        with self.state.connect() as db:
            row = db.execute("SELECT value, expires FROM counters WHERE key = ?",
                             (key,)).fetchone()
            value, expires = (row[0] + amount, row[1]) if row and row[1] > now else (
                amount, now + expiry)
            db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?, ?)",
                       (key, value, expires))
        return value

    def _row(self, key: str) -> tuple[int, float] | None:
        with self.state.connect() as db:
            row = db.execute("SELECT value, expires FROM counters WHERE key = ? AND expires > ?",
                             (key, time.time())).fetchone()
        return None if row is None else (row[0], row[1])

    def get(self, key: str) -> int:
        row = self._row(key)
        return 0 if row is None else row[0]

    def get_expiry(self, key: str) -> float:
        row = self._row(key)
        return time.time() if row is None else row[1]

    def check(self) -> bool:
        try:
            with self.state.connect() as db:
                db.execute("SELECT 1")
        except sqlite3.Error:
            return False
        return True

    def reset(self) -> int | None:
        with self.state.connect() as db:
            return db.execute("DELETE FROM counters").rowcount

    def clear(self, key: str) -> None:
        with self.state.connect() as db:
            db.execute("DELETE FROM counters WHERE key = ?", (key,))


def _address() -> str:
    return request.remote_addr or "unknown"


def _address_and_user_name() -> str:
    # Keyed by the pair, not the name alone: a name-only counter lets anyone lock anyone
    # out by failing ten times under their name. The address is the one ProxyFix set from
    # X-Forwarded-For when JOBREPORT_TRUSTED_PROXIES says a proxy is in front.
    return f"{_address()} {request.form.get('username', '').strip()}"


def _failed(response: Response) -> bool:
    # Only failed logins count: a user who types the password right is never slowed.
    return response.status_code == 401


def install(app: Flask, settings: Settings) -> Limiter:
    """Limit failed logins per (client address, user name) and per client address on
    ``auth.login``."""
    for name in ("login_limit_user", "login_limit_address"):
        try:
            parse_many(getattr(settings, name))
        except ValueError:
            raise SettingsError(f"{env_name(name)}={getattr(settings, name)!r} is not a rate "
                                "limit such as '10 per 15 minutes'") from None
    uri = settings.ratelimit_storage or f"{SCHEME}://{settings.web_state}"
    limiter = Limiter(_address, app=app, storage_uri=uri, headers_enabled=True,
                      strategy="fixed-window")
    # Any: Flask's union of view signatures would not survive the decorators' ParamSpec.
    view: Callable[..., Any] = app.view_functions["auth.login"]
    view = limiter.limit(settings.login_limit_user, key_func=_address_and_user_name,
                         methods=["POST"], deduct_when=_failed, scope="login-user",
                         error_message=TOO_MANY.format(
                             who="for this user name from your address"))(view)
    view = limiter.limit(settings.login_limit_address, methods=["POST"],
                         deduct_when=_failed, scope="login-address",
                         error_message=TOO_MANY.format(who="from your address"))(view)
    app.view_functions["auth.login"] = view
    return limiter
