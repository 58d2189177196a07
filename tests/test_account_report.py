"""The account report on a real SQLite archive (``scale_archive``'s jobs, written as
archived reports and as staff rows): its figures are the staff rows' per-job figures,
clipped to the period as ``sacct -T`` clips; jobs the archive lacks come from the
accounting view; the monthly email goes once per account, coordinator and month."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default

import pytest

from tests.helpers import scale_archive
from tests.helpers.mail import mail_settings
from tests.helpers.sacctmgr import fake_sacctmgr
from tests.helpers.web import make_client, password_settings
from webapp.archive.account_sums import AccountSums
from webapp.archive.mail_state import MailState
from webapp.archive.staff_rows import StaffRows, Window
from webapp.archive.store import Archive
from webapp.formatting import JOULES_PER_KWH
from webapp.mail.account_queue import last_month, month_period, send_account_reports
from webapp.mail.outbox import Outbox
from webapp.mail.sending import smtp_connect
from webapp.model import AccountingJob
from webapp.sources.coordinators import Coordinators, parse
from webapp.staff.account_render import render_json, render_pdf, render_text
from webapp.staff.account_report import build_account_report

UNTIL = 1_800_000_000
DAYS = 7
SINCE = UNTIL - DAYS * 86400
ACCOUNT = "acct01"  # user0001 and user0051's account (scale_archive: user number % 50)


@pytest.fixture(scope="module")
def archive_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("account") / "archive.sqlite")
    scale_archive.fill_reports(url, 600, 60, progress=False, until=UNTIL, heavy=0)
    scale_archive.fill(url, 600, 60, progress=False, until=UNTIL, heavy=0)
    return url


def _jobs():
    return [j for j in scale_archive.staff_jobs(600, 60, until=UNTIL, heavy=0)
            if j.account == ACCOUNT]


def _clipped(j, since: float, until: float) -> float:
    return max(0.0, min(j.end, until) - max(j.start, since))


def test_cpu_hours_are_elapsed_times_cpus_clipped_to_the_period(archive_url):
    # a period cutting the week in half: jobs running across its start count their part
    since, until = SINCE + DAYS * 86400 / 2, UNTIL + 1
    with Archive(archive_url) as archive:
        r = build_account_report(AccountSums(archive.db), scale_archive.CLUSTER, ACCOUNT,
                                 int(since), int(until))
    want = sum(_clipped(j, since, until) * j.cpus for j in _jobs()) / 3600
    assert want > 0 and r.totals["cpu_hours"] == pytest.approx(want, rel=1e-9)
    assert {m.user for m in r.members} == {j.user for j in _jobs() if j.end > since}
    assert r.from_accounting == 0
    assert r.totals["jobs"] == sum(1 for j in _jobs() if _clipped(j, since, until) > 0)
    # the previous half-week: the rest of each straddling job, nothing twice
    whole = sum(j.elapsed * j.cpus for j in _jobs()) / 3600
    assert r.totals["cpu_hours"] + r.previous["cpu_hours"] == \
        pytest.approx(whole, rel=1e-9)


def test_the_sums_are_the_staff_reports_figures_over_a_whole_window(archive_url):
    with Archive(archive_url) as archive:
        r = build_account_report(AccountSums(archive.db), scale_archive.CLUSTER, ACCOUNT,
                                 SINCE - 86400 * 30, UNTIL + 1, carbon_country="World")
        staff = {u["user"]: u for u in StaffRows(archive.db).user_totals(
            Window(scale_archive.CLUSTER, SINCE - 86400 * 30, UNTIL + 1))}
    for m in r.members:  # each of acct01's members has no other account
        s = staff[m.user]
        assert m.figures["cpu_hours_used"] == pytest.approx(s["cpu_seconds"] / 3600)
        assert m.figures["gpu_hours"] == pytest.approx(s["gpu_seconds"] / 3600)
        assert m.figures["memory_gib_hours_asked"] == pytest.approx(s["memory_requested"])
        assert m.figures["memory_gib_hours_idle"] == pytest.approx(s["memory_unused"])
        assert m.figures["energy_kwh"] == pytest.approx(s["energy_joules"] / JOULES_PER_KWH)
    assert r.totals["cpu_hours_idle"] > 0 and r.totals["co2e_kg"] > 0
    assert r.findings and r.findings[0]["cpu_hours_idle"] >= r.findings[-1]["cpu_hours_idle"]


def _acct(job_id: str, user: str, start: float, end: float | None, cpus: int,
          gpus: int = 0) -> AccountingJob:
    t = datetime.fromtimestamp
    return AccountingJob(
        cluster=scale_archive.CLUSTER, job_id=job_id, job=int(job_id), array_job=None,
        array_task=None, het_job=None, het_offset=None, uid=1000, user=user,
        account=ACCOUNT, partition="cpu", job_name="x", state="RUNNING", exit_code="0:0",
        submit_time=t(start, UTC), start_time=t(start, UTC),
        end_time=None if end is None else t(end, UTC), cpus=cpus,
        memory_requested_bytes=None, time_limit_seconds=None, nodes=(), node_list="",
        work_dir=None, gpus=gpus)


def test_jobs_the_archive_lacks_come_from_the_accounting_view_and_are_marked(archive_url):
    archived = _jobs()[0]
    listed = [_acct(archived.job_id, archived.user, archived.start, archived.end, 99),
              _acct("9000001", "newbie", UNTIL - 3600, None, 4, gpus=2),  # running
              _acct("9000002", "newbie", SINCE - 7200, SINCE + 3600, 2)]  # straddles
    asked = []

    def recent(since, account):
        asked.append((since, account))
        return listed

    with Archive(archive_url) as archive:
        sums = AccountSums(archive.db)
        plain = build_account_report(sums, scale_archive.CLUSTER, ACCOUNT, SINCE, UNTIL)
        r = build_account_report(sums, scale_archive.CLUSTER, ACCOUNT, SINCE, UNTIL, recent)
    assert asked[0] == (datetime.fromtimestamp(SINCE, UTC), ACCOUNT)
    newbie = next(m for m in r.members if m.user == "newbie")
    assert newbie.from_accounting == 2 and r.from_accounting == 2
    assert newbie.figures["cpu_hours"] == pytest.approx(4 + 2)  # 1 h x 4, 1 h x 2
    assert newbie.figures["gpu_hours"] == pytest.approx(2)
    assert r.totals["cpu_hours"] == pytest.approx(
        plain.totals["cpu_hours"] + 6)  # the archived job not counted twice
    assert "newbie*" in render_text(r) and '"from_accounting": 2' in render_json(r)


def test_months():
    assert month_period(datetime(2026, 12, 6, tzinfo=UTC)) == (
        int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()),
        int(datetime(2027, 1, 1, tzinfo=UTC).timestamp()))
    assert last_month(datetime(2027, 1, 3, tzinfo=UTC))[0] == \
        int(datetime(2026, 12, 1, tzinfo=UTC).timestamp())


def test_coordinators_parse_and_run(tmp_path):
    assert parse("research|carol,dave|\nteaching|\n") == {"research": ("carol", "dave"),
                                                          "teaching": ()}
    c = Coordinators(fake_sacctmgr(tmp_path, "research|carol\nteaching|\n"))
    assert c.of("research") == ("carol",) and c.of("nope") == ()
    assert c.coordinates("carol", "research") and not c.coordinates("alice", "research")


def test_the_monthly_email_goes_once_to_each_coordinator(archive_url, smtp, tmp_path):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port, cluster=scale_archive.CLUSTER,
                             archive_url=archive_url, mail_to="{user}@example.org")
    os.makedirs(os.path.dirname(settings.outbox), exist_ok=True)
    coordinators = Coordinators(fake_sacctmgr(
        tmp_path, f"{ACCOUNT}|carol,dave\nacct02|erin\nacct03|\n"))
    with Archive(archive_url) as archive:
        sums = AccountSums(archive.db)
        MailState(archive.db).opt_out(scale_archive.CLUSTER, "erin", "test")
        outbox = Outbox(settings.outbox)
        try:
            first = send_account_reports(settings, sums, None, coordinators, outbox,
                                         smtp_connect(settings), SINCE, UNTIL)
            again = send_account_reports(settings, sums, None, coordinators, outbox,
                                         smtp_connect(settings), SINCE, UNTIL)
        finally:
            outbox.close()
            MailState(archive.db).opt_in(scale_archive.CLUSTER, "erin")
    assert first.counts == {"queued": 2, "opted out": 1}
    assert again.counts == {"already queued": 2, "opted out": 1}
    assert sorted(to for _, raw in recorder.messages
                  for to in [message_from_bytes(raw, policy=default)["To"]]) == \
        ["carol@example.org", "dave@example.org"]
    msg = message_from_bytes(recorder.messages[0][1], policy=default)
    assert ACCOUNT in msg["Subject"]
    body = msg.get_body(("plain",)).get_content()
    assert "CPU-h allocated" in body
    pdf = next(p for p in msg.iter_attachments())
    assert pdf.get_content_type() == "application/pdf"
    assert pdf.get_content()[:5] == b"%PDF-"


def test_pdf_of_an_empty_account_compiles(archive_url):
    with Archive(archive_url) as archive:
        r = build_account_report(AccountSums(archive.db), scale_archive.CLUSTER, "nobody",
                                 SINCE, UNTIL)
    assert not r.members and render_pdf(r)[:5] == b"%PDF-"


def test_a_coordinator_sees_the_account_page_others_do_not(tmp_path):
    settings = password_settings(tmp_path, sacctmgr=fake_sacctmgr(
        tmp_path, "research|carol\nteaching|\n"))
    assert make_client(settings, user="carol").get("/accounts/research").status_code == 200
    assert make_client(settings, user="carol").get("/accounts/teaching").status_code == 403
    assert make_client(settings, user="alice").get("/accounts/research").status_code == 403
    broken = password_settings(tmp_path, sacctmgr=str(tmp_path / "no-such-sacctmgr"))
    assert make_client(broken, user="carol").get("/accounts/research").status_code == 403


def test_a_coordinator_sees_the_reports_of_their_accounts_jobs(tmp_path):
    """carol coordinates research: alice's job (account research) opens for her, page and
    JSON API; as a coordinator of another account only, it does not."""
    settings = password_settings(tmp_path, sacctmgr=fake_sacctmgr(
        tmp_path, "research|carol\nteaching|\n"))
    carol = make_client(settings, user="carol")
    assert carol.get("/jobs/4242").status_code == 200
    assert carol.get("/api/v1/jobs/demo/4242").status_code == 200
    (tmp_path / "other").mkdir()  # another sacctmgr: its answer is kept a minute
    other = password_settings(tmp_path, sacctmgr=fake_sacctmgr(
        tmp_path / "other", "research|\nteaching|carol\n"))
    assert make_client(other, user="carol").get("/jobs/4242").status_code == 403


def test_the_monthly_units_run_the_email_run_on_the_first():
    import configparser
    from pathlib import Path

    from webapp.cli import build_parser

    deploy = Path(__file__).resolve().parent.parent / "deploy"
    units = {}
    for name in ("jobreport-account-report.service", "jobreport-account-report.timer"):
        units[name] = configparser.ConfigParser(strict=False, interpolation=None)
        units[name].read_string((deploy / name).read_text())
    assert units["jobreport-account-report.timer"]["Timer"]["OnCalendar"] == "*-*-01 07:30:00"
    service = units["jobreport-account-report.service"]["Service"]
    assert service["Type"] == "oneshot"
    argv = service["ExecStart"].split()[1:]
    args = build_parser().parse_args(argv)
    assert args.command == "account-report" and args.email and not args.account


def test_the_command_prints_text_json_and_pdf(archive_url, tmp_path):
    import io
    import json

    from webapp.cli import build_parser
    from webapp.cli.account_report import run_account_report
    from webapp.settings import Settings

    settings = Settings(cluster=scale_archive.CLUSTER, archive_url=archive_url, db_url="",
                        sacctmgr=fake_sacctmgr(tmp_path, f"{ACCOUNT}|carol\n"))
    when = ["--since", datetime.fromtimestamp(SINCE, UTC).isoformat(), "--until",
            datetime.fromtimestamp(UNTIL, UTC).isoformat()]

    def run(*argv: str) -> bytes:
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8")
        args = build_parser().parse_args(["account-report", "--account", ACCOUNT, *when,
                                          *argv])
        assert run_account_report(args, settings, out) == 0
        out.flush()
        return raw.getvalue()

    doc = json.loads(run("--format", "json"))
    with Archive(archive_url) as archive:
        r = build_account_report(AccountSums(archive.db), scale_archive.CLUSTER, ACCOUNT,
                                 SINCE, UNTIL)
    assert doc["totals"]["cpu_hours"] == pytest.approx(
        r.totals["cpu_hours"]) and doc["coordinators"] == ["carol"]
    assert b"CPU-h allocated" in run()
    assert run("--format", "pdf")[:5] == b"%PDF-"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["account-report", "--month", "2026-13"])
