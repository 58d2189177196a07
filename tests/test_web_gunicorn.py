"""Sessions and login limits on a real gunicorn with two worker processes; the instance for
Open OnDemand's Apache (deploy/ondemand/jobreport-web-ondemand.service) as it runs."""

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


def gunicorn(tmp: Path, **settings: str):  # noqa: ANN201 - yields the base URL
    """The app on a real gunicorn (two workers) with ``settings`` beside the password
    login's; its base URL until the module is done."""
    password_settings(tmp)  # writes the password file
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update(JOBREPORT_PASSWORD_FILE=str(tmp / "passwords"), JOBREPORT_SECRET_KEY=SECRET,
               JOBREPORT_STAFF="staffer", JOBREPORT_WEB_STATE=str(tmp / "web-state.sqlite"),
               JOBREPORT_SESSION_COOKIE_SECURE="0", **settings)
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


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from gunicorn(tmp_path_factory.mktemp("gunicorn"),
                        JOBREPORT_LOGIN_LIMIT_USER="3 per hour")


@pytest.fixture(scope="module")
def ondemand_server(tmp_path_factory):
    """As jobreport-web-ondemand.service runs it: mounted at /jobreport (gunicorn reads
    SCRIPT_NAME), one proxy in front, its host the trusted portal (loopback here)."""
    yield from gunicorn(tmp_path_factory.mktemp("gunicorn-ondemand"), SCRIPT_NAME="/jobreport",
                        JOBREPORT_TRUSTED_PROXIES="1",
                        JOBREPORT_PROMETHEUS_FRONT_PROXIES="127.0.0.1")


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


def test_the_ondemand_instance_is_mounted_and_believes_the_portal(ondemand_server):
    """The API under /jobreport, alice named by the portal's header; without it, 401."""
    api = f"{ondemand_server}/jobreport/api/v1"
    described = requests.get(f"{api}/openapi.json", timeout=10).json()
    assert described["servers"] == [{"url": "/jobreport"}]
    # A malformed id is refused before any source is asked: who asks decides 400 or 401.
    named = requests.get(f"{api}/jobs/cluster/abc", headers={"X-Remote-User": "alice"},
                         timeout=10)
    assert named.status_code == 400 and "job id" in named.json()["message"]
    nobody = requests.get(f"{api}/jobs/cluster/abc", timeout=10)
    assert nobody.status_code == 401 and nobody.json()["status"] == 401
    login = requests.get(f"{ondemand_server}/jobreport/api/v1/jobs", allow_redirects=False,
                         timeout=10)
    assert login.status_code == 401 and "Location" not in login.headers
