"""Emails by policy, the parts without the stack: the signed opt-out token and its max age,
the opt-out page (no sign-in, GET changes nothing, POST records; an expired link changes
nothing and offers sign-in to /emails), the minimum severity, the digest's
arithmetic and week."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime

import pytest
from itsdangerous import URLSafeSerializer

from tests.helpers.web import login, make_client, password_file
from webapp.archive.mail_state import MailState
from webapp.archive.record import ArchivedJob
from webapp.archive.store import Archive
from webapp.archive.week_sums import build_digest
from webapp.mail.digest_queue import last_week
from webapp.mail.policy import skip_reason
from webapp.model import Finding, JobReport, Severity
from webapp.opt_out_token import SALT, OptOutToken, make_token, opt_out_url, read_token
from webapp.renderers import digest as digest_renderer
from webapp.settings import Settings

SECRET = "s" * 40


DAY = 86400.0
NOW = 1_790_000_000.0


def test_token_round_trip_and_forgery():
    token = make_token(SECRET, "demo", "bob")
    assert read_token(SECRET, token, 90) == OptOutToken("demo", "bob", expired=False)
    assert read_token("t" * 40, token, 90) is None  # another site's key
    assert read_token(SECRET, token[:-2], 90) is None
    eve = make_token("t" * 40, "demo", "eve").split(".")[0]
    assert read_token(SECRET, f"{eve}.{token.split('.', 1)[1]}", 90) is None  # bob's signature
    assert opt_out_url("https://x.org/", SECRET, "demo", "bob") == \
        f"https://x.org/unsubscribe/{token}"


def test_token_expires_after_its_max_age():
    token = make_token(SECRET, "demo", "bob", clock=lambda: NOW)
    assert not read_token(SECRET, token, 90, clock=lambda: NOW + 90 * DAY).expired
    assert read_token(SECRET, token, 90, clock=lambda: NOW + 90 * DAY + 1).expired
    assert read_token(SECRET, token, 30, clock=lambda: NOW + 31 * DAY) == \
        OptOutToken("demo", "bob", expired=True)
    # A forged token stays forged however old: only a valid signature can be "expired".
    assert read_token(SECRET, token[:-2], 90, clock=lambda: NOW + 999 * DAY) is None


def test_link_without_an_issue_time_reads_as_expired():
    # The form every email carried before links had a max age: signed, no timestamp.
    legacy = URLSafeSerializer(SECRET, salt=SALT).dumps(["demo", "bob"])
    assert read_token(SECRET, legacy, 90) == OptOutToken("demo", "bob", expired=True)
    assert read_token("t" * 40, legacy, 90) is None


def _settings(tmp_path, **env) -> Settings:
    return Settings.from_env({"JOBREPORT_SECRET_KEY": SECRET, "JOBREPORT_CLUSTER": "demo",
                              "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
                              "JOBREPORT_WEB_STATE": str(tmp_path / "w.sqlite"), **env})


def test_opt_out_page_needs_no_sign_in_and_records_on_post(tmp_path):
    settings = _settings(tmp_path)
    client = make_client(settings)
    path = f"/unsubscribe/{make_token(SECRET, 'demo', 'bob')}"
    page = client.get(path)
    assert page.status_code == 200 and b"Stop these emails" in page.data
    with Archive(settings.archive_url) as archive:
        assert MailState(archive.db).opted_out("demo") == {}
    assert client.post(path).status_code == 200  # no session, no CSRF token: one click
    assert client.post(path).status_code == 200  # twice is fine
    assert client.get("/unsubscribe/nonsense").status_code == 404
    assert client.get("/jobs/1").status_code == 302  # everything else still needs sign-in
    with Archive(settings.archive_url) as archive:
        assert list(MailState(archive.db).opted_out("demo")) == ["bob"]


def test_expired_link_changes_nothing_and_offers_sign_in(tmp_path):
    settings = _settings(tmp_path, JOBREPORT_OPT_OUT_LINK_DAYS="30")
    client = make_client(settings)
    old = make_token(SECRET, "demo", "bob", clock=lambda: time.time() - 31 * DAY)
    for response in (client.get(f"/unsubscribe/{old}"), client.post(f"/unsubscribe/{old}")):
        assert response.status_code == 410
        text = response.get_data(as_text=True)
        assert "This link has expired" in text and "30" in text
        assert 'href="/emails?cluster=demo"' in text and "Stop these emails" not in text
    with Archive(settings.archive_url) as archive:
        assert MailState(archive.db).opted_out("demo") == {}
    # ... and signing in there stops (and resumes) the user's own emails.
    assert client.get("/emails?cluster=demo").status_code == 302  # to the login page
    client = make_client(dataclasses.replace(settings, password_file=password_file(tmp_path)))
    login(client, "bob")
    with client.session_transaction() as session:
        csrf = session["csrf"]  # a login starts a fresh session
    page = client.get("/emails?cluster=demo")
    assert page.status_code == 200 and b"gets job report and weekly" in page.data
    stopped = client.post("/emails?cluster=demo", data={"emails": "stop", "csrf_token": csrf})
    assert b"gets no job report" in stopped.data
    with Archive(settings.archive_url) as archive:
        assert MailState(archive.db).opted_out("demo")["bob"][1] == "web"
    assert client.post("/emails", data={"emails": "resume"}).status_code == 400  # no CSRF
    client.post("/emails", data={"emails": "resume", "csrf_token": csrf})
    with Archive(settings.archive_url) as archive:
        assert MailState(archive.db).opted_out("demo") == {}
    assert client.get("/emails?cluster=elsewhere").status_code == 400


def test_minimum_severity(tmp_path):
    info = Finding("short_job", Severity.INFO, "m", "a")
    report = JobReport(job_id="1", cluster="demo", user="bob", state="COMPLETED",
                       elapsed_seconds=9999, findings=(info,))
    assert skip_reason(report, _settings(tmp_path), frozenset()) is None
    warned = _settings(tmp_path, JOBREPORT_MAIL_MIN_SEVERITY="warning")
    assert skip_reason(report, warned, frozenset()) == "no finding at or above warning"
    worse = dataclasses.replace(info, severity=Severity.CRITICAL)
    assert skip_reason(dataclasses.replace(report, findings=(worse,)), warned,
                       frozenset()) is None


def _job(job_id: str, end: int, **summary) -> ArchivedJob:
    return ArchivedJob("demo", job_id, 1, end, "alice", "COMPLETED", 5.0,
                       {"findings": [], **summary},
                       {"gpu_utilization": summary.pop("_gpu", [])}, 0.0)


def test_digest_totals_and_most_common_finding():
    f = {"name": "cpu_efficiency_low", "message": "m", "advice": "ask for fewer"}
    jobs = [
        _job("1", 100, cpus=4, elapsed_seconds=3600, cpu_seconds=3600,
             memory_requested_bytes=4 * 2**30, memory_peak_bytes=2**30, findings=[f]),
        _job("2", 200, cpus=2, elapsed_seconds=1800, cpu_seconds=None, gpus=1,
             memory_requested_bytes=2 * 2**30, memory_peak_bytes=None, findings=[f]),
        _job("3", 900, cpus=1, elapsed_seconds=60, cpu_seconds=60),  # outside the week
    ]
    jobs[1].series["gpu_utilization"] = [{"label": "n/0", "points": [[0, 0.25], [5, 0.75]]}]
    d = build_digest("demo", "alice", 0, 500, jobs, {("2", 1)})
    assert [j.job_id for j in d.jobs] == ["1", "2"]
    assert d.cpu_hours == 3.0  # 4 CPU-h asked, 1 used; job 2 has no CPU time
    assert d.gpu_hours == 0.25  # 1 GPU x 0.5 h x (1 - 0.5)
    assert d.memory_gib_hours == 3.0  # (4 - 1) GiB x 1 h; job 2 has no peak
    assert (d.top_finding, d.top_count, d.top_advice) == ("cpu_efficiency_low", 2,
                                                          "ask for fewer")
    assert d.folded == 1 and d.jobs[1].folded


def test_last_week_is_monday_to_monday_utc():
    since, until = last_week(datetime(2026, 11, 25, 13, 0, tzinfo=UTC))  # a Wednesday
    assert datetime.fromtimestamp(since, UTC) == datetime(2026, 11, 16, tzinfo=UTC)
    assert datetime.fromtimestamp(until, UTC) == datetime(2026, 11, 23, tzinfo=UTC)


def test_digest_energy_per_account():
    kwh = 3.6e6
    jobs = [_job("1", 100, account="physics", usage={"energy_joules": 1.5 * kwh}),
            _job("2", 200, account="chem", usage={"energy_joules": 0.5 * kwh}),
            _job("3", 300, account="physics", usage={"energy_joules": 0.25 * kwh}),
            _job("4", 400, account="chem", usage={"energy_joules": None})]  # no energy source
    d = build_digest("demo", "alice", 0, 500, jobs)
    assert d.energy_kwh == pytest.approx(2.25)
    assert d.energy_by_account == [("physics", pytest.approx(1.75)), ("chem", pytest.approx(0.5))]
    message = digest_renderer.render(d, "alice@example.org", "jobreport@example.org", "<id@x>")
    text = message.get_body(("plain",)).get_content()
    assert "Energy used" in text and "1.75 kWh" in text
    html = message.get_body(("html",)).get_content()
    assert "1.75 kWh" in html
    assert build_digest("demo", "alice", 0, 500, jobs[3:]).energy_kwh is None
