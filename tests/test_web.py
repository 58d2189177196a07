"""Flask client tests of every route, login, CSRF, ownership and error pages."""

from __future__ import annotations

import json

import pytest

from tests.helpers.reports import HTML_PAYLOAD, FakeService, sample_report
from tests.helpers.web import PASSWORD, login, make_client, token
from webapp import create_app
from webapp.renderers import html
from webapp.settings import SettingsError
from webapp.web.reports import ReportCache


def test_secret_key_required(web_settings):
    from dataclasses import replace

    with pytest.raises(SettingsError, match="JOBREPORT_SECRET_KEY"):
        create_app(replace(web_settings, secret_key=""), FakeService())


def test_healthz_needs_no_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


@pytest.mark.parametrize("path", ["/", "/jobs/4242"])
def test_pages_redirect_to_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response.location.startswith("/login?next=")
    assert path in response.location


@pytest.mark.parametrize("path", ["/jobs/4242.json", "/jobs/4242.txt", "/jobs/4242.pdf"])
def test_raw_formats_answer_401(client, path):
    assert client.get(path).status_code == 401


def test_login_then_back_to_the_page(client):
    response = login(client, next_url="/jobs/4242")
    assert response.status_code == 302 and response.location == "/jobs/4242"
    page = client.get("/jobs/4242")
    assert page.status_code == 200
    assert "Signed in as alice" in page.get_data(as_text=True)


def test_wrong_password_and_unknown_user(client):
    for user, password in (("alice", "nope"), ("mallory", PASSWORD)):
        response = login(client, user, password)
        assert response.status_code == 401
        assert "Wrong user name or password" in response.get_data(as_text=True)
    assert client.get("/").status_code == 302


@pytest.mark.parametrize("next_url", [
    "//evil.example/", "https://evil.example/", "/\t/evil.example", "/\\evil.example",
    "\\\\evil.example", "/\n/evil.example", " /x", "/x ", "javascript:alert(1)",
    "evil.example", "/%09/x\u200b", ""])
def test_login_refuses_open_redirect(client, next_url):
    response = login(client, next_url=next_url)
    assert response.status_code == 302 and response.location == "/"


def test_login_keeps_a_same_site_next(client):
    assert login(client, next_url="/jobs/4242.json?x=1").location == "/jobs/4242.json?x=1"


def test_login_form_does_not_echo_an_unsafe_next(client):
    page = client.get("/login", query_string={"next": "/\t/evil.example"})
    assert "evil.example" not in page.get_data(as_text=True)


def test_logout(client):
    login(client)
    response = client.post("/logout", data={"csrf_token": token(client, "/")})
    assert response.status_code == 302 and response.location == "/login"
    assert client.get("/jobs/4242").status_code == 302


def test_csrf_login_without_token_is_400(client):
    client.get("/login")
    response = client.post("/login", data={"username": "alice", "password": PASSWORD})
    assert response.status_code == 400
    assert "security token" in response.get_data(as_text=True)


def test_csrf_logout_with_wrong_token_is_400(client):
    login(client)
    assert client.post("/logout").status_code == 400
    assert client.post("/logout", data={"csrf_token": "forged"}).status_code == 400
    assert client.get("/jobs/4242").status_code == 200  # still logged in


def test_lookup_form_and_redirect(client):
    login(client)
    page = client.get("/").get_data(as_text=True)
    assert '<form class="lookup" method="get"' in page and 'name="job"' in page
    response = client.get("/?job=4242")
    assert response.status_code == 302 and response.location == "/jobs/4242"
    assert client.get("/?job=6002%2B1").location in ("/jobs/6002+1", "/jobs/6002%2B1")
    assert client.get("/?job=42;drop").status_code == 400


def test_job_page(client):
    login(client)
    response = client.get("/jobs/4242")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "train-model" in page
    for text in ("GPU gpu1 was idle for the whole job.", "Request --gres=gpu:1.",
                 "Ask for --mem=4G next time.", "The job used 21% of its 8 allocated CPUs."):
        assert text in page
    findings = page.split('<section id="findings">', 1)[1]
    assert findings.index("GPU gpu1 was idle") < findings.index("21% of its 8")  # critical first
    for plot in ("cpu", "cpu-cores", "memory", "gpu", "io"):
        assert f'id="plot-{plot}"' in page
        # Each plot an image of its own, loaded when the details are opened.
        assert f'<img src="/jobs/4242/plots/{plot}.svg" alt="' in page
        svg = client.get(f"/jobs/4242/plots/{plot}.svg")
        assert svg.status_code == 200 and svg.mimetype == "image/svg+xml"
        assert svg.get_data(as_text=True).startswith("<svg") and "xmlns=" in svg.get_data(
            as_text=True)
    assert "<svg" not in page and 'loading="lazy"' in page
    missing = client.get("/jobs/4242/plots/nope.svg")
    assert missing.status_code == 404 and "No such plot" in missing.get_data(as_text=True)
    assert "<script" not in page  # works with JavaScript off: there is none
    for fmt in ("pdf", "json", "txt"):
        assert f'href="/jobs/4242.{fmt}"' in page
    assert "default-src 'none'" in response.headers["Content-Security-Policy"]


def test_het_and_array_ids(client):
    login(client)
    assert client.get("/jobs/6002+1").status_code == 200
    assert client.get("/jobs/6000_1").status_code == 200


def test_other_users_job_is_403(client):
    login(client, "alice")
    response = client.get("/jobs/5000")
    assert response.status_code == 403
    assert "belongs to another user" in response.get_data(as_text=True)
    assert client.get("/jobs/5000.json").status_code == 403
    assert client.get("/jobs/5000.pdf").status_code == 403


def test_other_users_job_is_refused_before_any_report_is_built(client, web_service):
    service = web_service
    login(client, "alice")
    for path in ("/jobs/5000", "/jobs/5000.json", "/jobs/5000.txt", "/jobs/5000.pdf"):
        assert client.get(path).status_code == 403
    assert service.owners == ["5000"] * 4
    assert service.built == []  # no Prometheus or sacct query for somebody else's job
    assert client.get("/jobs/4242").status_code == 200
    assert service.built == ["4242"]


def test_job_without_owner_is_403_for_users(web_settings):
    service = FakeService({"4242": sample_report(user=None)})
    client = make_client(web_settings, service)
    login(client, "alice")
    assert client.get("/jobs/4242").status_code == 403
    assert service.built == []


def test_staff_see_every_job(client, web_service):
    service = web_service
    login(client, "staffer")
    assert client.get("/jobs/5000").status_code == 200
    assert client.get("/jobs/4242").status_code == 200
    assert service.owners == []  # staff skip the owner lookup


@pytest.mark.parametrize("user", ["alice", "staffer"])
def test_unknown_job_is_404_naming_the_id(client, user):
    login(client, user)
    response = client.get("/jobs/987654")
    assert response.status_code == 404
    assert "No job 987654" in response.get_data(as_text=True)
    assert client.get("/jobs/987654.json").get_json()["status"] == 404


@pytest.mark.parametrize("job", ["abc", "12x", "1_2_3", "99999999999"])
def test_malformed_id_is_400(client, job):
    login(client)
    response = client.get(f"/jobs/{job}")
    assert response.status_code == 400
    assert "invalid job id" in response.get_data(as_text=True)
    assert client.get(f"/jobs/{job}.txt").status_code == 400


@pytest.mark.parametrize("user", ["alice", "staffer"])
def test_accounting_down_is_503(web_settings, user):
    client = make_client(web_settings, FakeService(down=True))
    login(client, user)
    response = client.get("/jobs/4242")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "60"
    assert "The accounting database is unavailable" in response.get_data(as_text=True)
    assert client.get("/jobs/4242.json").get_json()["status"] == 503


def test_prometheus_gap_still_renders_with_a_note(client):
    login(client)
    response = client.get("/jobs/4243")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Metrics unavailable (Prometheus): connection refused" in page
    assert "<svg" not in page
    assert "No time series recorded" in page


def test_html_in_job_name_is_escaped(client):
    login(client)
    page = client.get("/jobs/6000_1").get_data(as_text=True)
    assert HTML_PAYLOAD not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_json_route(client):
    login(client)
    response = client.get("/jobs/4242.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert "4242" in json.dumps(json.loads(response.get_data(as_text=True)))


def test_txt_route(client):
    login(client)
    response = client.get("/jobs/4242.txt")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    assert "4242" in response.get_data(as_text=True)


@pytest.mark.needs("pdflatex")
def test_pdf_route(client):
    login(client)
    response = client.get("/jobs/4243.pdf")
    assert response.status_code == 200 and response.mimetype == "application/pdf"
    assert response.data.startswith(b"%PDF")
    assert 'filename="job-4243.pdf"' in response.headers["Content-Disposition"]


@pytest.fixture
def proxy_client(web_settings):
    from dataclasses import replace

    return make_client(replace(web_settings, auth="remote-user"))


def test_remote_user_header(proxy_client):
    response = proxy_client.get("/jobs/4242", headers={"X-Remote-User": "alice"})
    assert response.status_code == 200
    assert "Log out" not in response.get_data(as_text=True)
    assert proxy_client.get("/jobs/5000", headers={"X-Remote-User": "alice"}).status_code == 403


def test_remote_user_environ(proxy_client):
    environ = {"REMOTE_USER": "bob"}
    assert proxy_client.get("/jobs/5000", environ_base=environ).status_code == 200
    assert proxy_client.get("/jobs/4242", environ_base=environ).status_code == 403


def test_remote_user_missing_is_401(proxy_client):
    assert proxy_client.get("/jobs/4242").status_code == 401
    assert proxy_client.get("/healthz").status_code == 200
    assert proxy_client.get("/login").status_code == 404


def test_service_built_lazily(web_settings, monkeypatch):
    import webapp.web.reports

    made = []

    class Service(FakeService):
        def __init__(self, s):
            made.append(s)
            super().__init__({"4242": sample_report()})

    monkeypatch.setattr(webapp.web.reports, "ReportService", Service)
    client = make_client(web_settings, None)
    assert made == []
    login(client)
    assert client.get("/jobs/4242").status_code == 200
    assert made == [web_settings]


def test_standalone_render():
    page = html.render(sample_report(name=HTML_PAYLOAD))
    assert page.startswith("<!doctype html>")
    assert "Log out" not in page and "<svg" in page
    assert HTML_PAYLOAD not in page


def test_reports_reused_briefly_but_access_checked_each_time(app, web_service):
    service = web_service
    staff, alice = app.test_client(), app.test_client()
    login(staff, "staffer")
    login(alice, "alice")
    assert staff.get("/jobs/5000").status_code == 200
    assert staff.get("/jobs/5000").status_code == 200
    assert alice.get("/jobs/5000").status_code == 403
    assert service.built == ["5000"]
    app.extensions["jobreport.reports"] = ReportCache(ttl=0)  # as if 30 s had passed
    assert staff.get("/jobs/5000").status_code == 200
    assert service.built == ["5000", "5000"]


def test_serve_binds_loopback_by_default(web_settings, monkeypatch):
    import argparse
    from dataclasses import replace

    from flask import Flask

    from webapp.cli.serve import run_serve

    calls = []
    monkeypatch.setattr(Flask, "run", lambda self, **kw: calls.append(kw))
    run_serve(argparse.Namespace(host=None, port=None), web_settings)
    run_serve(argparse.Namespace(host="0.0.0.0", port=9000), web_settings)
    run_serve(argparse.Namespace(host=None, port=None), replace(web_settings, bind="[::1]:8080"))
    assert calls == [{"host": "127.0.0.1", "port": 8000, "threaded": True},
                     {"host": "0.0.0.0", "port": 9000, "threaded": True},
                     {"host": "::1", "port": 8080, "threaded": True}]


def test_json_compact_pretty_and_full_resolution(app, client):
    login(client, "staffer")
    compact = client.get("/jobs/4242.json").get_data(as_text=True)
    pretty = client.get("/jobs/4242.json?pretty=1").get_data(as_text=True)
    assert compact.count("\n") == 1 and pretty.startswith('{\n  "schema_version"')
    assert json.loads(compact) == json.loads(pretty)
    assert client.get("/jobs/4242.json?resolution=full").status_code == 200
    assert app.extensions["jobreport.service"].resolutions[-1] == "full"
    bad = client.get("/jobs/4242.json?resolution=raw")
    assert bad.status_code == 400 and "plot, full" in bad.get_json()["message"]
