"""Sessions end at logout, on removal from the password file and after their lifetime;
failed logins are limited per (address, user name) and per address, with counters every
worker shares."""

from __future__ import annotations

import re
import time
from dataclasses import replace

import pytest
from werkzeug.security import generate_password_hash

from tests.helpers.reports import default_service
from tests.helpers.web import login, make_client, password_settings, token
from webapp import create_app
from webapp.settings import Settings, SettingsError


@pytest.fixture
def web_settings(tmp_path) -> Settings:
    """The conftest's web settings with tight login limits (``app`` and ``client`` follow)."""
    return password_settings(tmp_path, login_limit_user="3 per 15 minutes",
                             login_limit_address="5 per 15 minutes")


def session_cookie(client) -> str:
    return client.get_cookie("session").value


def with_cookie(settings: Settings, value: str):
    """Another browser replaying a captured session cookie."""
    other = make_client(settings)
    other.set_cookie("session", value)
    return other


@pytest.mark.parametrize("secret", ["", "x", "y" * 31])
def test_short_secret_keys_are_refused(web_settings, secret):
    with pytest.raises(SettingsError, match="JOBREPORT_SECRET_KEY.*(empty|at least 32)"):
        create_app(replace(web_settings, secret_key=secret), default_service())


def test_cookie_is_secure_by_default_and_plain_only_when_asked(web_settings):
    assert Settings().session_cookie_secure is True
    assert Settings.from_env({}).session_cookie_secure is True
    header = login(make_client(web_settings)).headers["Set-Cookie"]
    assert "; Secure" in header and "HttpOnly" in header and "SameSite=Lax" in header
    demo = replace(web_settings, session_cookie_secure=False)
    assert "Secure" not in login(make_client(demo)).headers["Set-Cookie"]


def test_a_cookie_captured_before_logout_stops_working(client, web_settings):
    assert login(client).status_code == 302
    captured = session_cookie(client)
    assert with_cookie(web_settings, captured).get("/jobs/4242").status_code == 200
    client.post("/logout", data={"csrf_token": token(client, "/")})
    replay = with_cookie(web_settings, captured).get("/jobs/4242")
    assert replay.status_code == 302 and replay.location.startswith("/login")


def test_logout_is_seen_by_another_worker(web_settings):
    worker_a, worker_b = make_client(web_settings), make_client(web_settings)
    login(worker_a)
    captured = session_cookie(worker_a)
    worker_a.post("/logout", data={"csrf_token": token(worker_a, "/")})
    worker_b.set_cookie("session", captured)
    assert worker_b.get("/jobs/4242").status_code == 302


def test_removing_a_user_ends_their_sessions_at_once(client, web_settings):
    login(client)
    assert client.get("/jobs/4242").status_code == 200
    path = web_settings.password_file
    lines = open(path).read().splitlines()
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines if not line.startswith("alice:")))
    assert client.get("/jobs/4242").status_code == 302
    assert client.get("/jobs/4242.json").status_code == 401


def test_a_new_password_ends_the_old_sessions(client, web_settings):
    login(client)
    text = open(web_settings.password_file).read()
    new = generate_password_hash("another password")
    text = re.sub(r"^alice:.*$", f"alice:{new}", text, flags=re.M)
    open(web_settings.password_file, "w").write(text)
    assert client.get("/jobs/4242").status_code == 302


def test_sessions_end_after_their_lifetime(client, web_settings):
    login(client)
    assert client.get("/jobs/4242").status_code == 200
    with client.session_transaction() as sess:  # re-signed: only the login time is old
        sess["since"] = time.time() - web_settings.session_lifetime - 1
    assert client.get("/jobs/4242").status_code == 302
    login(client)  # the browser drops the cookie when the login's lifetime is over
    left = client.get_cookie("session").expires.timestamp() - time.time()
    assert web_settings.session_lifetime - 60 < left <= web_settings.session_lifetime


def test_a_cookie_without_the_new_fields_is_refused(client):
    with client.session_transaction() as sess:  # what a pre-upgrade cookie held
        sess["user"] = "alice"
    assert client.get("/jobs/4242").status_code == 302


def test_failed_logins_are_limited_per_user(client):
    for _ in range(3):
        assert login(client, password="wrong").status_code == 401
    refused = login(client)  # the right password, but too late
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert "Too many failed logins for this user name" in refused.get_data(as_text=True)
    assert login(client, "bob").status_code == 302  # other users are not locked out


def test_failures_from_one_address_do_not_lock_the_user_out_elsewhere(client):
    """The counter is per (address, user name): an attacker failing under alice's name
    pauses only their own tries, not alice's logins from her own address."""
    attacker = {"REMOTE_ADDR": "198.51.100.66"}
    for _ in range(3):
        assert login(client, password="wrong", **attacker).status_code == 401
    assert login(client, **attacker).status_code == 429
    assert login(client, REMOTE_ADDR="192.0.2.7").status_code == 302


def test_a_trusted_proxy_keys_the_user_counter_by_the_forwarded_address(web_settings):
    """Behind nginx every request comes from the proxy: the pair must use the address
    ProxyFix takes from X-Forwarded-For, or one attacker locks everyone out again."""
    proxied = make_client(replace(web_settings, trusted_proxies=1))
    for _ in range(3):
        login(proxied, password="wrong", HTTP_X_FORWARDED_FOR="198.51.100.66")
    assert login(proxied, HTTP_X_FORWARDED_FOR="198.51.100.66").status_code == 429
    assert login(proxied, HTTP_X_FORWARDED_FOR="192.0.2.7").status_code == 302


def test_successful_logins_do_not_count(client):
    for _ in range(6):
        assert login(client).status_code == 302


def test_failed_logins_are_limited_per_address(client):
    for user in ("u1", "u2", "u3", "u4", "u5"):
        assert login(client, user, "wrong").status_code == 401
    assert login(client, "carol").status_code == 429
    assert login(client, "carol", REMOTE_ADDR="192.0.2.7").status_code == 302


def test_limits_are_shared_by_the_workers(web_settings):
    """Two app instances on one state file, as gunicorn's workers are: memory:// would
    give each worker its own three tries."""
    worker_a, worker_b = make_client(web_settings), make_client(web_settings)
    for worker in (worker_a, worker_b, worker_a):
        assert login(worker, password="wrong").status_code == 401
    assert login(worker_b).status_code == 429


def test_forwarded_for_counts_only_behind_a_trusted_proxy(web_settings):
    direct = make_client(web_settings)
    for n in range(5):  # a client cannot dodge the limit by inventing addresses
        login(direct, f"u{n}", "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    assert login(direct, "carol", HTTP_X_FORWARDED_FOR="198.51.100.99").status_code == 429

    proxied = make_client(replace(web_settings, trusted_proxies=1,
                                  web_state=web_settings.web_state + ".2"))
    for n in range(5):
        login(proxied, f"u{n}", "wrong", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert login(proxied, "carol", HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429
    assert login(proxied, "carol", HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 302


def test_bad_limit_settings_are_refused(web_settings):
    with pytest.raises(SettingsError, match="JOBREPORT_LOGIN_LIMIT_USER"):
        create_app(replace(web_settings, login_limit_user="often"), default_service())


def test_the_state_file_is_private(web_settings):
    import os
    import stat

    make_client(web_settings)
    assert stat.S_IMODE(os.stat(web_settings.web_state).st_mode) == 0o600
