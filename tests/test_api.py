"""The JSON API (``/api/v1``) through the Flask test client, on the fake service's sample
reports: the rows of "My jobs", a job's report, who may ask, and errors as JSON. Every
answer of a described path is checked against the OpenAPI description the app serves
(``tests/helpers/api.py``). The pages of the list the archive pages:
tests/test_web_my_jobs_paged.py."""

from __future__ import annotations

import dataclasses
import ipaddress
import re

import pytest

from tests.helpers.api import SPEC, checked
from tests.helpers.web import make_client, password_settings, signed_in
from webapp.lists.job_list import MAX_DAYS, MAX_NAME, MAX_PAGE, SORT_KEYS, STATES
from webapp.renderers.presentation import sorted_findings
from webapp.web.query_params import NAME_RE


def _page_ids(page: str) -> list[str]:
    """The job ids of "My jobs", top to bottom."""
    return re.findall(r'<tr class="job" data-job="([^"]+)"', page)


def test_my_jobs_as_json_are_the_rows_of_my_jobs(app):
    alice = signed_in(app, "alice")
    body = checked(alice.get("/api/v1/jobs")).get_json()
    assert body["api_version"] == 1 and body["user"] == "alice"
    html = alice.get("/").get_data(as_text=True)
    assert [j["job_id"] for j in body["jobs"]] == _page_ids(html)
    assert {j["user"] for j in body["jobs"]} == {"alice"}
    assert body["next"] is None and body["pages"] == 1  # the fake's list is read whole
    first = next(j for j in body["jobs"] if j["job_id"] == "4242")
    report = app.extensions["jobreport.service"].reports["4242"]
    top = sorted_findings(report)[0]  # the first finding the report page shows
    assert first["top_finding"] == {"name": top.name, "severity": top.severity.value,
                                    "message": top.message}
    assert first["findings"] == len(report.findings)
    assert first["cpu_efficiency"] == pytest.approx(report.cpu_efficiency)
    assert first["end"] == report.end_time.isoformat()
    assert alice.get(first["report_url"]).status_code == 200
    assert checked(alice.get(first["json_url"])).get_json()["job_id"] == "4242"


@pytest.mark.parametrize("query", ["sort=name&order=asc", "sort=job&state=COMPLETED",
                                   "name=train&days=30", "findings=1&sort=cpu_eff"])
def test_the_lists_parameters_give_the_lists_rows(app, query):
    alice = signed_in(app, "alice")
    body = checked(alice.get(f"/api/v1/jobs?{query}")).get_json()
    ids = [j["job_id"] for j in body["jobs"]]
    assert ids == _page_ids(alice.get(f"/?{query}").get_data(as_text=True))
    assert _page_ids(alice.get(body["list_url"]).get_data(as_text=True)) == ids


@pytest.mark.parametrize(("query", "named"), [("days=0", "days"), ("sort=nope", "sort"),
                                              ("page=abc", "page"), ("user=a%20b", "user")])
def test_a_bad_parameter_is_400_naming_it(app, query, named):
    resp = checked(signed_in(app, "alice").get(f"/api/v1/jobs?{query}"))
    assert resp.status_code == 400 and resp.get_json()["message"].startswith(named)


def test_staff_may_ask_for_another_users_jobs_nobody_else(app):
    staff = checked(signed_in(app, "staffer").get("/api/v1/jobs?user=bob")).get_json()
    assert staff["user"] == "bob" and [j["job_id"] for j in staff["jobs"]] == ["5000"]
    assert staff["list_url"].startswith("/users/bob?")
    alice = signed_in(app, "alice")
    refused = checked(alice.get("/api/v1/jobs?user=bob"))
    assert refused.status_code == 403
    assert refused.get_json() == {"error": "Forbidden", "status": 403,
                                  "message": "Only support staff may list another user's "
                                             "jobs."}
    assert checked(alice.get("/api/v1/jobs?user=alice")).status_code == 200


def test_a_jobs_report_is_the_json_renderers_document(app):
    alice = signed_in(app, "alice")
    for query in ("", "?pretty=1", "?resolution=full"):
        api = checked(alice.get(f"/api/v1/jobs/demo/4242{query}"))
        assert api.status_code == 200 and api.mimetype == "application/json"
        assert api.get_data() == alice.get(f"/jobs/4242.json{query}").get_data()


@pytest.mark.parametrize(("user", "job", "status"), [
    ("alice", "abc", 400), ("alice", "999", 404), ("alice", "5000", 403),
    ("staffer", "5000", 200), ("bob", "5000", 200), ("alice", "6002+1", 200)])
def test_a_report_is_refused_as_its_page_is_but_in_json(app, user, job, status):
    client = signed_in(app, user)
    resp = checked(client.get(f"/api/v1/jobs/demo/{job}"))
    assert resp.status_code == client.get(f"/jobs/{job}").status_code == status
    if status != 200:
        body = resp.get_json()
        assert body["status"] == status and body["error"] and resp.mimetype == \
            "application/json"
    if status == 404:
        assert "999" in resp.get_json()["message"]


def test_a_cluster_not_served_is_404_in_json(app):
    resp = checked(signed_in(app, "alice").get("/api/v1/jobs/elsewhere/4242"))
    assert resp.status_code == 404 and "elsewhere" in resp.get_json()["message"]


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/jobs/demo/4242",
                                  "/api/v1/jobs?user=bob", "/api/v1/nope"])
def test_nobody_signed_in_is_401_in_json_never_the_login_page(client, path):
    resp = client.get(path)
    assert resp.status_code == 401 and "Location" not in resp.headers
    assert resp.get_json() == {"error": "Unauthorized", "message": "Log in first.",
                               "status": 401}
    if path.startswith("/api/v1/jobs"):
        checked(resp)


def test_an_unknown_api_path_is_404_in_json(app):
    resp = signed_in(app, "alice").get("/api/v1/nope")
    assert resp.status_code == 404 and resp.get_json()["status"] == 404


def test_the_description_is_public_and_names_where_the_app_is_mounted(client):
    served = checked(client.get("/api/v1/openapi.json")).get_json()
    assert served["servers"] == [{"url": "/"}]
    assert {k: v for k, v in served.items() if k != "servers"} == \
        {k: v for k, v in SPEC.items() if k != "servers"}
    mounted = client.get("/api/v1/openapi.json", environ_overrides={"SCRIPT_NAME": "/jr"})
    assert mounted.get_json()["servers"] == [{"url": "/jr"}]


def test_behind_a_prefix_every_link_carries_it(app):
    alice = signed_in(app, "alice")
    body = alice.get("/api/v1/jobs", environ_overrides={"SCRIPT_NAME": "/jobreport"}).get_json()
    job = body["jobs"][0]
    assert job["report_url"] == f"/jobreport/jobs/{job['job_id']}"
    assert job["json_url"] == f"/jobreport/api/v1/jobs/demo/{job['job_id']}"
    assert body["list_url"].startswith("/jobreport/?")


def test_the_descriptions_parameters_are_the_lists_own():
    """The described parameters cannot drift from what the list takes."""
    params = SPEC["components"]["parameters"]
    assert params["sort"]["schema"]["enum"] == list(SORT_KEYS)
    assert params["state"]["schema"]["enum"] == list(STATES)
    assert params["days"]["schema"]["maximum"] == MAX_DAYS
    assert params["page"]["schema"]["maximum"] == MAX_PAGE
    assert params["name"]["schema"]["maxLength"] == MAX_NAME
    assert params["user"]["schema"]["pattern"] == f"^{NAME_RE.pattern}$"
    row = SPEC["components"]["schemas"]["Job"]
    assert set(row["required"]) == set(row["properties"])


# -- who asks: a session, the proxy in front (remote-user), or a trusted portal's proxy --
def test_remote_user_mode_takes_the_proxys_header(web_settings):
    client = make_client(dataclasses.replace(web_settings, auth="remote-user"))
    mine = checked(client.get("/api/v1/jobs", headers={"X-Remote-User": "alice"}))
    assert mine.get_json()["user"] == "alice"
    nobody = checked(client.get("/api/v1/jobs"))
    assert nobody.status_code == 401 and nobody.get_json()["status"] == 401


PORTAL = "10.1.2.3"


@pytest.fixture
def portal_client(tmp_path):
    """The app trusting the user header of one portal proxy, at ``PORTAL``, behind one
    proxy of its own (JOBREPORT_TRUSTED_PROXIES=1, so X-Forwarded-For is read)."""
    trusted = (ipaddress.ip_network(PORTAL),)
    return make_client(password_settings(tmp_path, prometheus_front_proxies=trusted,
                                         trusted_proxies=1))


def test_a_trusted_portals_proxy_names_the_user(portal_client):
    alice = {"headers": {"X-Remote-User": "alice"}, "environ_base": {"REMOTE_ADDR": PORTAL}}
    body = checked(portal_client.get("/api/v1/jobs", **alice)).get_json()
    assert body["user"] == "alice" and body["jobs"]
    assert portal_client.get("/jobs/4242", **alice).status_code == 200  # the pages too
    assert portal_client.get("/jobs/5000", **alice).status_code == 403  # and their rules


@pytest.mark.parametrize("environ", [
    {"REMOTE_ADDR": "10.1.2.4"},  # any other peer
    {"REMOTE_ADDR": "10.1.2.4", "HTTP_X_FORWARDED_FOR": PORTAL},  # claiming to be it
])
def test_the_header_from_anybody_else_is_ignored(portal_client, environ):
    resp = portal_client.get("/api/v1/jobs", headers={"X-Remote-User": "alice"},
                             environ_base=environ)
    assert resp.status_code == 401 and resp.get_json()["status"] == 401
