"""/cluster follows the real Slurm's PrivateData: the stack's slurm.conf hides nothing, so
alice sees every holder; when scontrol cannot say, she sees only her own rows and the
totals, and staff still see everything."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path

import requests

from tests.helpers.browser import serve
from webapp.sources.slurm_config import SlurmConfigSource, parse_private_data

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "slurm" / \
    "local-scontrol-show-config.txt"


def signed_in(site: str, user: str) -> requests.Session:
    http = requests.Session()
    page = http.get(f"{site}/login", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = http.post(f"{site}/login", data={"username": user, "password": "pw",
                                              "csrf_token": token}, timeout=30)
    assert answer.status_code == 200 and "/login" not in answer.url
    return http


def cluster_pages(settings) -> dict[str, str]:
    """/cluster as alice and as a staff member, from an app on ``settings``."""
    staff = sorted(settings.staff)[0]
    with tempfile.TemporaryDirectory() as tmp:
        for site in serve(lambda: None, Path(tmp), base=settings, users=("alice", staff)):
            pages = {}
            for user in ("alice", staff):
                answer = signed_in(site, user).get(f"{site}/cluster", timeout=60)
                assert answer.status_code == 200
                pages["staff" if user == staff else user] = answer.text
            return pages
    raise AssertionError("the app did not start")


def test_the_real_scontrol_says_what_the_capture_says(settings):
    assert SlurmConfigSource(settings.scontrol).private_data() == \
        parse_private_data(CAPTURE.read_text()) == frozenset()


def test_with_private_data_none_everybody_sees_every_holder(settings):
    pages = cluster_pages(settings)
    for page in pages.values():
        assert 'id="private"' not in page
        assert "<th>account</th><th>CPUs</th>" in page and "<td>all users</td>" in page


def test_when_scontrol_cannot_say_only_staff_see_the_others(settings):
    pages = cluster_pages(dataclasses.replace(settings, scontrol="/nonexistent/scontrol"))
    assert "private on this cluster (PrivateData could not be read)" in pages["alice"]
    assert "<th>account</th><th>CPUs</th>" not in pages["alice"]
    assert "<td>all users</td>" in pages["alice"]
    assert 'id="private"' not in pages["staff"]
    assert "<th>account</th><th>CPUs</th>" in pages["staff"]
