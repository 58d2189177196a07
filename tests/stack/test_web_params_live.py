"""Bad parameters against the real stack: ``/history?name=%00`` is a 400 naming ``name``
before anything reaches sacct (it was a 500: sacct's argv cannot hold a NUL), while a
good name runs the real sacct and answers 200. No jobs of its own: the check is the
page's, not the data's."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import requests

from tests.helpers.browser import serve


@pytest.fixture(scope="module")
def site(service, settings):
    with tempfile.TemporaryDirectory() as tmp:
        yield from serve(lambda: service, Path(tmp), base=settings)


@pytest.fixture(scope="module")
def alice(site):
    http = requests.Session()
    page = http.get(f"{site}/login", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    signed_in = http.post(f"{site}/login", data={"username": "alice", "password": "pw",
                                                  "csrf_token": token}, timeout=30)
    assert signed_in.status_code == 200 and "/login" not in signed_in.url
    return http


def test_a_nul_in_the_history_name_is_a_400_naming_it(site, alice):
    answer = alice.get(f"{site}/history?name=%00", timeout=30)
    assert answer.status_code == 400
    assert "name must be printable text" in answer.text


@pytest.mark.parametrize("days", ["abc", "0", "1e3", "91"])
def test_unreadable_days_are_a_400_not_the_default(site, alice, days):
    answer = alice.get(f"{site}/history", params={"days": days}, timeout=30)
    assert answer.status_code == 400 and "days must be a whole number" in answer.text


def test_a_good_name_runs_the_real_sacct(site, alice):
    answer = alice.get(f"{site}/history?name=no-job-has-this-name&days=1", timeout=60)
    assert answer.status_code == 200
    assert "no-job-has-this-name" in answer.text
    assert "History unavailable" not in answer.text  # sacct answered
