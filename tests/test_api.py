"""The JSON API (``/api/v1``) through the Flask test client, on the fake service's sample
reports: the rows of "My jobs", a job's report, who may ask, and errors as JSON. Every
answer of a described path is checked against the OpenAPI description the app serves
(``tests/helpers/api.py``). An account's jobs for its Slurm coordinators (a stand-in
sacctmgr) and the staff. The pages of the lists the archive pages:
tests/test_web_my_jobs_paged.py."""

from __future__ import annotations

import dataclasses
import ipaddress
import re

import pytest

from tests.helpers.api import SPEC, checked
from tests.helpers.sacctmgr import fake_sacctmgr
from tests.helpers.web import make_app, make_client, password_settings, signed_in
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
                                  "/api/v1/jobs?user=bob", "/api/v1/accounts/research/jobs",
                                  "/api/v1/nope"])
def test_nobody_signed_in_is_401_in_json_never_the_login_page(client, path):
    resp = client.get(path)
    assert resp.status_code == 401 and "Location" not in resp.headers
    assert resp.get_json() == {"error": "Unauthorized", "message": "Log in first.",
                               "status": 401}
    if path != "/api/v1/nope":
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
    assert params["account"]["schema"]["pattern"] == f"^{NAME_RE.pattern}$"
    row = SPEC["components"]["schemas"]["Job"]
    assert set(row["required"]) == set(row["properties"])


def test_an_accounts_list_is_described_as_a_users_but_for_whose():
    """The account's list has the user's list's fields, ``account`` for ``user``."""
    schemas = SPEC["components"]["schemas"]
    mine, account = schemas["JobList"], schemas["AccountJobList"]
    assert set(account["properties"]) == set(mine["properties"]) - {"user"} | {"account"}
    assert set(account["required"]) == set(account["properties"])
    for field in set(mine["properties"]) - {"user", "list_url"}:
        assert account["properties"][field] == mine["properties"][field], field
    listed = SPEC["paths"]["/api/v1/jobs"]["get"]["parameters"]
    described = SPEC["paths"]["/api/v1/accounts/{account}/jobs"]["get"]["parameters"]
    assert described == [{"$ref": "#/components/parameters/account"},
                         *(p for p in listed if p["$ref"] != "#/components/parameters/user")]



# -- an account's jobs: the staff and the account's Slurm coordinators --------------------
@pytest.fixture
def coordinated(tmp_path):
    """The app on the fake service (every job of account research) where sacctmgr names
    carol research's coordinator, and nobody teaching's."""
    sacctmgr = fake_sacctmgr(tmp_path, "research|carol\nteaching|\n")
    return make_app(password_settings(tmp_path, sacctmgr=sacctmgr))


@pytest.mark.parametrize("who", ["staffer", "carol"])
def test_an_accounts_jobs_are_the_rows_of_its_page(coordinated, who):
    client = signed_in(coordinated, who)
    query = "sort=user&order=asc"
    body = checked(client.get(f"/api/v1/accounts/research/jobs?{query}")).get_json()
    assert body["account"] == "research" and body["api_version"] == 1
    ids = [j["job_id"] for j in body["jobs"]]
    assert ids == _page_ids(client.get(f"/accounts/research?{query}").get_data(as_text=True))
    assert {j["user"] for j in body["jobs"]} == {"alice", "bob"}
    assert body["next"] is None and body["pages"] == 1 and body["total"] == len(ids)
    assert body["list_url"].startswith("/accounts/research?")
    assert _page_ids(client.get(body["list_url"]).get_data(as_text=True)) == ids


def test_an_accounts_rows_are_its_members_rows_of_my_jobs(coordinated):
    """Row for row what the job's owner gets from ``/api/v1/jobs``: one shape, one
    computation of every figure."""
    account = checked(signed_in(coordinated, "carol").get(
        "/api/v1/accounts/research/jobs")).get_json()["jobs"]
    mine = checked(signed_in(coordinated, "alice").get("/api/v1/jobs")).get_json()["jobs"]
    assert [j for j in account if j["user"] == "alice"] == mine


@pytest.mark.parametrize(("who", "account"), [("alice", "research"), ("carol", "teaching"),
                                              ("bob", "research")])
def test_anybody_else_is_403_naming_the_account(coordinated, who, account):
    client = signed_in(coordinated, who)
    resp = checked(client.get(f"/api/v1/accounts/{account}/jobs"))
    assert resp.status_code == 403 == client.get(f"/accounts/{account}").status_code
    assert resp.get_json() == {"error": "Forbidden", "status": 403, "message":
                               f"Only support staff and the coordinators of account "
                               f"{account} may see its jobs."}


def test_sacctmgr_failing_opens_no_account(tmp_path):
    broken = password_settings(tmp_path, sacctmgr=str(tmp_path / "no-such-sacctmgr"))
    resp = checked(make_client(broken, user="carol").get("/api/v1/accounts/research/jobs"))
    assert resp.status_code == 403


@pytest.mark.parametrize("name", ["a%20b", "-x", "a" * 65, "r%00"])
def test_a_malformed_account_is_400_naming_it_before_who_may_see(coordinated, name):
    """400 for anybody, alice too: the name is checked before sacctmgr is asked."""
    for who in ("staffer", "carol", "alice"):
        resp = checked(signed_in(coordinated, who).get(f"/api/v1/accounts/{name}/jobs"))
        assert resp.status_code == 400 and resp.get_json()["message"].startswith("account")


@pytest.mark.parametrize(("query", "named"), [("days=0", "days"), ("sort=nope", "sort"),
                                              ("page=abc", "page")])
def test_a_bad_parameter_of_an_accounts_list_is_400_naming_it(coordinated, query, named):
    resp = checked(signed_in(coordinated, "carol").get(
        f"/api/v1/accounts/research/jobs?{query}"))
    assert resp.status_code == 400 and resp.get_json()["message"].startswith(named)

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
