"""Sessions and login limits on a real gunicorn with two worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.helpers.mail import free_port
from tests.helpers.wait import wait_for
from tests.helpers.web import PASSWORD, SECRET, csrf_in, http_login, password_settings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gunicorn")
    password_settings(tmp)  # writes the password file
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update(JOBREPORT_PASSWORD_FILE=str(tmp / "passwords"), JOBREPORT_SECRET_KEY=SECRET,
               JOBREPORT_STAFF="staffer", JOBREPORT_WEB_STATE=str(tmp / "web-state.sqlite"),
               JOBREPORT_SESSION_COOKIE_SECURE="0", JOBREPORT_LOGIN_LIMIT_USER="3 per hour")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", "2", "-b",
                             f"127.0.0.1:{port}", "--log-level", "warning", "webapp:create_app()"],
                            cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            requests.get(f"{base}/healthz", timeout=2)
            return True
        except requests.RequestException:  # not listening yet, or the workers still booting
            assert proc.poll() is None, "gunicorn exited"
            return False

    wait_for(answers, 30, "gunicorn answering", every=0.2)
    yield base
    proc.terminate()
    proc.wait(10)


def login(base: str, user: str, password: str, session: requests.Session | None = None):
    """A login on a fresh connection each time, so both workers take turns."""
    return http_login(base, user, password, session, Connection="close")


def test_failed_logins_count_across_workers(server):
    for _ in range(3):
        assert login(server, "alice", "wrong").status_code == 401
    answers = [login(server, "alice", PASSWORD) for _ in range(6)]
    assert {a.status_code for a in answers} == {429}
    assert all(int(a.headers["Retry-After"]) > 0 for a in answers)


def test_logout_ends_a_copied_cookie_on_every_worker(server):
    bob = requests.Session()
    assert login(server, "bob", PASSWORD, bob).status_code == 302
    copied = bob.cookies.get("session")
    page = bob.get(f"{server}/", timeout=10).text
    csrf = csrf_in(page)
    bob.post(f"{server}/logout", data={"csrf_token": csrf}, timeout=10)
    for _ in range(4):
        replay = requests.get(f"{server}/", cookies={"session": copied},
                              headers={"Connection": "close"}, allow_redirects=False,
                              timeout=10)
        assert replay.status_code == 302 and "/login" in replay.headers["Location"]
