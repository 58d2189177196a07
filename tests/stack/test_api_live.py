"""The JSON API against the real stack: alice's jobs of the session, from the real
accounting view, sacct, Prometheus and archive, are the rows her home page lists, in its
order, and each answer is what the OpenAPI description says; an ended job's report through
the API is the document its .json URL gives; carol, research's Slurm coordinator
(scripts/dev-stack, the real sacctmgr), gets research's jobs, the rows of its page, where
alice gets 403."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import requests

from tests.helpers.api import checked_http
from tests.helpers.browser import serve
from tests.helpers.wait import wait_for


@pytest.fixture(scope="module")
def site(service, settings):
    with tempfile.TemporaryDirectory() as tmp:
        yield from serve(lambda: service, Path(tmp), base=settings, users=("alice", "carol"))


def _signed_in(site: str, user: str) -> requests.Session:
    http = requests.Session()
    page = http.get(f"{site}/login", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    signed_in = http.post(f"{site}/login", data={"username": user, "password": "pw",
                                                  "csrf_token": token}, timeout=30)
    assert signed_in.status_code == 200 and "/login" not in signed_in.url
    return http


@pytest.fixture(scope="module")
def alice(site):
    return _signed_in(site, "alice")


def test_alices_jobs_are_her_home_pages_rows(site, alice, stack_jobs):
    query = "days=1&sort=job&order=asc"

    def agree():  # noqa: ANN202 - (API rows, page ids) once two reads agree
        body = checked_http(alice.get(f"{site}/api/v1/jobs?{query}", timeout=120)).json()
        page = alice.get(f"{site}/?{query}", timeout=120).text
        ids = re.findall(r'<tr class="job" data-job="([^"]+)"', page)
        # Other tests' jobs may end between the two reads: read again until they agree.
        return (body, ids) if [j["job_id"] for j in body["jobs"]] == ids else None

    body, _ = wait_for(agree, 300, "the API and the page list the same jobs", every=5)
    assert body["user"] == "alice" and {j["user"] for j in body["jobs"]} == {"alice"}
    assert body["next"] is None  # sorted by job: the list is read whole, one page
    busy = next(j for j in body["jobs"] if j["job_id"] == stack_jobs["busy"])
    assert busy["state"] == "COMPLETED" and busy["cpu_efficiency"] is not None


def test_an_ended_jobs_report_is_its_json_document(site, alice, stack_jobs, settings):
    job = stack_jobs["busy"]
    api = checked_http(alice.get(f"{site}/api/v1/jobs/{settings.cluster}/{job}", timeout=120))
    page = alice.get(f"{site}/c/{settings.cluster}/jobs/{job}.json", timeout=120)
    assert api.status_code == page.status_code == 200
    assert api.json()["job_id"] == job and api.json() == page.json()


def test_nobody_signed_in_is_401_in_json(site):
    answer = checked_http(requests.get(f"{site}/api/v1/jobs", timeout=30,
                                       allow_redirects=False))
    assert answer.status_code == 401 and answer.json()["status"] == 401


def test_researchs_coordinator_gets_its_jobs_as_its_page_lists_them(site, alice, stack_jobs):
    carol = _signed_in(site, "carol")
    query = "days=1&sort=job&order=asc"

    def agree():  # noqa: ANN202 - (API rows, page ids) once two reads agree
        body = checked_http(carol.get(f"{site}/api/v1/accounts/research/jobs?{query}",
                                      timeout=120)).json()
        page = carol.get(f"{site}/accounts/research?{query}", timeout=120).text
        ids = re.findall(r'<tr class="job" data-job="([^"]+)"', page)
        return (body, ids) if [j["job_id"] for j in body["jobs"]] == ids else None

    body, _ = wait_for(agree, 300, "the API and the account's page list the same jobs",
                       every=5)
    assert body["account"] == "research"
    assert stack_jobs["busy"] in {j["job_id"] for j in body["jobs"]}  # alice's, research's
    refused = checked_http(alice.get(f"{site}/api/v1/accounts/research/jobs", timeout=30))
    assert refused.status_code == 403 and "research" in refused.json()["message"]
