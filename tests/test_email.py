"""Email: MIME structure, owner address, policy, header injection, and delivery through a
real SMTP server on loopback (aiosmtpd) across outages and a killed batch."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from email import message_from_bytes
from email.policy import default

import pytest
from aiosmtpd.controller import Controller

from tests.helpers.mail import (
    FAKE_PDF,
    Recorder,
    batch_service,
    email_args,
    free_port,
    kill_while_held,
    mail_settings,
    outbox_args,
)
from tests.helpers.reports import (
    ENCODED_WORD_PAYLOAD,
    HEADER_PAYLOAD,
    HTML_PAYLOAD,
    FakeService,
    gap_report,
    sample_report,
)
from webapp.cli import mail as mail_cli
from webapp.cli.mail import run_outbox
from webapp.mail import policy
from webapp.mail.outbox import Outbox
from webapp.renderers import email as email_renderer
from webapp.settings import Settings

# batch_service() jobs that get an email when nobody opted out
EXPECTED_JOBS = ["4242", "7003", "7004", "7005", "7006"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_render_mime_parts_with_real_pdf():
    msg = email_renderer.render(gap_report(), "alice@example.org", "jobreport@example.org")
    assert msg.get_content_type() == "multipart/mixed"
    assert [p.get_content_type() for p in msg.walk()] == [
        "multipart/mixed", "multipart/alternative", "text/plain", "text/html", "application/pdf"]
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    for body in (text, html):
        assert "GPU gpu1 was idle for the whole job." in body
        assert "Metrics unavailable (Prometheus)" in body
    attachment = next(msg.iter_attachments())
    assert attachment.get_filename() == "job-4243.pdf"
    assert attachment.get_content().startswith(b"%PDF")
    assert msg["To"] == "alice@example.org" and msg["Auto-Submitted"] == "auto-generated"
    assert msg["Subject"] == "Job 4243 (train-model) on demo: 2 problems to fix (1 note)"


def test_header_injection_is_inert():
    msg = email_renderer.render(sample_report(name=HEADER_PAYLOAD), "alice@example.org",
                                "jobreport@example.org", pdf=FAKE_PDF)
    parsed = message_from_bytes(msg.as_bytes(), policy=default)
    assert parsed["Bcc"] is None
    assert sorted(parsed.keys()) == sorted(["From", "To", "Subject", "Date", "Message-ID",
                                            "Auto-Submitted", "X-Jobreport-Job",
                                            "MIME-Version", "Content-Type"])
    # (a subject the email package folds before its first word reads back with one space)
    assert parsed["Subject"].strip() == ("Job 4242 (x\\r\\nBcc: evil@example.org) on demo: "
                                 "2 problems to fix (1 note)")
    with pytest.raises(ValueError):
        email_renderer.render(sample_report(), "a@b\r\nBcc: evil@example.org", "j@x", pdf=b"")


def test_html_part_is_escaped():
    msg = email_renderer.render(sample_report(name=HTML_PAYLOAD), "alice@example.org",
                                "jobreport@example.org", pdf=FAKE_PDF)
    html = msg.get_body(("html",)).get_content()
    assert HTML_PAYLOAD not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_owner_address(tmp_path):
    mail_map = tmp_path / "map"
    mail_map.write_text("# user address\nbob bob@lab.example\n")
    settings = Settings(mail_to="{user}@example.org", mail_map=str(mail_map))
    assert policy.owner_address(sample_report(user="alice"), settings) == "alice@example.org"
    assert policy.owner_address(sample_report(user="bob"), settings) == "bob@lab.example"
    for hostile in ("a@evil.example,b", "x\r\nBcc: evil@example.org", "", None):
        assert policy.owner_address(sample_report(user=hostile), settings) is None


def test_policy():
    settings = Settings(mail_min_runtime=600)
    assert policy.skip_reason(sample_report(), settings, frozenset()) is None
    assert policy.skip_reason(sample_report(elapsed_seconds=10.0), settings, frozenset())
    assert policy.skip_reason(sample_report(findings=()), settings, frozenset())
    assert policy.skip_reason(sample_report(state="RUNNING"), settings, frozenset())
    assert policy.skip_reason(sample_report(), settings, frozenset({"alice"})) == "user opted out"


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("30m", 1800), ("1h", 3600),
                                               ("2d", 172800), ("1.5h", 5400)])
def test_parse_duration(text, seconds):
    assert mail_cli.parse_lookback(text).total_seconds() == seconds


def test_send_one_to_owner_over_smtp(smtp, tmp_path, capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    service = FakeService({"4243": gap_report()})
    assert mail_cli.run_email(email_args("4243"), settings, service) == 0
    assert len(recorder.messages) == 1
    rcpt, raw = recorder.messages[0]
    assert rcpt == ["alice@example.org"]
    msg = message_from_bytes(raw, policy=default)
    assert [p.get_content_type() for p in msg.walk()][2:] == [
        "text/plain", "text/html", "application/pdf"]
    assert next(msg.iter_attachments()).get_content().startswith(b"%PDF")
    # the same command again sends nothing; --resend sends a new message
    assert mail_cli.run_email(email_args("4243"), settings, service) == 0
    assert "already sent" in capsys.readouterr().out
    assert len(recorder.messages) == 1
    assert mail_cli.run_email(email_args("4243", "--resend"), settings, service) == 0
    assert len(set(recorder.message_ids())) == 2


def test_encoded_word_in_a_job_name_adds_no_header(smtp, tmp_path, fast_pdf):
    # The DATA the real SMTP server received holds one Subject and no Reply-To; a reader
    # sees the job's name as it was submitted.
    recorder, port = smtp
    report = sample_report("6003", "alice", name=ENCODED_WORD_PAYLOAD)
    assert len(ENCODED_WORD_PAYLOAD) == 50
    settings = mail_settings(tmp_path, port)
    assert mail_cli.run_email(email_args("6003"), settings, FakeService({"6003": report})) == 0
    _, raw = recorder.messages[0]
    head = raw.split(b"\r\n\r\n", 1)[0]
    assert b"Reply-To" not in head.replace(b"\r\n ", b" ").split(b"Subject:")[0]
    received = message_from_bytes(raw, policy=default)
    assert received["Reply-To"] is None and len(received.get_all("Subject")) == 1
    assert [k for k in received.keys() if k.lower() == "reply-to"] == []
    shown = str(received["Subject"]).replace("\N{WORD JOINER}", "")
    assert ENCODED_WORD_PAYLOAD in shown and "\r" not in shown and "\n" not in shown


def test_send_one_unknown_or_invalid_job(tmp_path, capsys):
    settings = mail_settings(tmp_path, free_port())
    assert mail_cli.run_email(email_args("99999999"), settings, FakeService()) == 1
    assert capsys.readouterr().err == "jobreport email: job 99999999 not found\n"
    assert mail_cli.run_email(email_args("12x"), settings, FakeService()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "12x" in err


def test_send_one_with_to_and_injection(smtp, tmp_path, fast_pdf):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    service = FakeService({"6002+1": sample_report("6002+1", name=HEADER_PAYLOAD)})
    assert mail_cli.run_email(email_args("6002+1", "--to", "staff@example.org"),
                            settings, service) == 0
    rcpt, raw = recorder.messages[0]
    assert rcpt == ["staff@example.org"]
    assert b"\r\nBcc:" not in raw.split(b"\r\n\r\n")[0]
    assert mail_cli.run_email(email_args("6002+1", "--to", "a@b, evil@example.org"),
                            settings, service) == 2


def test_batch_applies_policy_and_is_idempotent(smtp, tmp_path, fast_pdf, capsys):
    recorder, port = smtp
    (tmp_path / "map").write_text("bob bob@lab.example\n")
    (tmp_path / "optout").write_text("carol\n")
    settings = mail_settings(tmp_path, port, mail_map=str(tmp_path / "map"),
                             mail_opt_out=str(tmp_path / "optout"))
    assert mail_cli.run_email(email_args("--ended-since", "1h"), settings, batch_service()) == 0
    assert sorted(r[0][0] for r in recorder.messages) == [
        "alice@example.org", "bob@lab.example", "dave@example.org", "erin@example.org"]
    assert "4 queued" in capsys.readouterr().out
    assert mail_cli.run_email(email_args("--ended-since", "1h"), settings, batch_service()) == 0
    assert len(recorder.messages) == 4
    assert "4 already queued" in capsys.readouterr().out


def test_batch_dry_run_sends_and_records_nothing(smtp, tmp_path, fast_pdf, capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    assert mail_cli.run_email(email_args("--ended-since", "1h", "--dry-run"), settings,
                            batch_service()) == 0
    assert "would send job 4242 to alice@example.org" in capsys.readouterr().out
    assert recorder.messages == []
    outbox = Outbox(settings.outbox)
    assert outbox.rows(("pending", "sent")) == []
    outbox.close()


def test_smtp_down_then_up_delivers_each_once(tmp_path, fast_pdf, capsys):
    port = free_port()  # nothing listens yet: connection refused
    settings = mail_settings(tmp_path, port)
    assert mail_cli.run_email(email_args("--ended-since", "1h"), settings, batch_service()) == 0
    assert "5 queued" in capsys.readouterr().out
    outbox = Outbox(settings.outbox)
    assert [r.status for r in outbox.rows()] == ["pending"] * 5
    assert outbox.rows()[0].attempts == 1 and "SMTP unavailable" in outbox.rows()[0].last_error
    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        assert run_outbox(outbox_args("--retry"), settings) == 0
        assert "5 sent" in capsys.readouterr().out
        mail_cli.run_email(email_args("--ended-since", "1h"), settings, batch_service())
        run_outbox(outbox_args("--retry"), settings)
    finally:
        controller.stop()
        outbox.close()
    assert sorted(recorder.jobs()) == EXPECTED_JOBS
    assert len(set(recorder.message_ids())) == 5


def test_temporary_refusal_mid_batch_is_retried_once(smtp, tmp_path, fast_pdf):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    recorder.refuse = True
    mail_cli.run_email(email_args("--ended-since", "1h"), settings, batch_service())
    assert recorder.messages == []
    outbox = Outbox(settings.outbox)
    rows = outbox.rows()
    outbox.close()
    assert {r.status for r in rows} == {"pending"} and all(r.last_error for r in rows)
    recorder.refuse = False
    assert run_outbox(outbox_args(), settings) == 0  # listing only: nothing due yet
    assert recorder.messages == []
    run_outbox(outbox_args("--retry"), settings)
    assert sorted(recorder.jobs()) == EXPECTED_JOBS


def test_batch_waits_for_no_one_when_locked(smtp, tmp_path, fast_pdf, capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    outbox = Outbox(settings.outbox)
    with outbox.lock():
        assert mail_cli.run_email(email_args("--ended-since", "1h"), settings,
                                batch_service()) == 0
    outbox.close()
    assert "another batch is running" in capsys.readouterr().out
    assert recorder.messages == []


BATCH_SCRIPT = """
import json, os, sys
from dataclasses import replace
import webapp.renderers.pdf
webapp.renderers.pdf.render = lambda report: b"%PDF-1.4 test"
from tests.helpers.mail import batch_service, email_args
from webapp.cli.mail import run_email
from webapp.settings import Settings
settings = Settings(**json.loads(os.environ["TEST_SETTINGS"]))
sys.exit(run_email(email_args("--ended-since", "1h"), settings, batch_service()))
"""


def run_batch_process(settings: Settings) -> subprocess.Popen:
    fields = {k: getattr(settings, k) for k in ("smtp_host", "smtp_port", "mail_from",
                                                "mail_to", "outbox", "mail_min_runtime")}
    env = {**os.environ, "TEST_SETTINGS": json.dumps(fields), "PYTHONPATH": ROOT}
    return subprocess.Popen([sys.executable, "-c", BATCH_SCRIPT], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_killed_batch_restarted_loses_and_duplicates_nothing(smtp, tmp_path):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    recorder.hold_after = 1  # accept the first email, then hold the second in DATA
    proc = run_batch_process(settings)
    try:
        kill_while_held(proc, recorder, 60,
                        lambda: proc.stdout.read().decode() if proc.poll() else "slow")
    finally:
        proc.stdout.close()
    recorder.release.set()
    assert len(recorder.messages) == 1
    db = sqlite3.connect(settings.outbox)
    assert sorted(s for (s,) in db.execute("SELECT status FROM outbox")) == [
        "pending", "pending", "pending", "sending", "sent"]
    db.close()
    restarted = run_batch_process(settings)
    out = restarted.communicate(timeout=60)[0].decode()
    assert restarted.returncode == 0, out
    assert sorted(recorder.jobs()) == EXPECTED_JOBS
    assert len(set(recorder.message_ids())) == 5
    db = sqlite3.connect(settings.outbox)
    assert {s for (s,) in db.execute("SELECT status FROM outbox")} == {"sent"}
    db.close()


def test_one_broken_report_does_not_stop_the_batch(smtp, tmp_path, fast_pdf, capsys):
    recorder, port = smtp

    class Flaky(FakeService):
        def build(self, job_id):
            if job_id == "7005":
                raise RuntimeError("detector bug")
            return super().build(job_id)

    service = Flaky(batch_service().reports)
    settings = mail_settings(tmp_path, port)
    assert mail_cli.run_email(email_args("--ended-since", "1h"), settings, service) == 1
    assert "1 errors" in capsys.readouterr().out
    assert sorted(recorder.jobs()) == ["4242", "7003", "7004", "7006"]
