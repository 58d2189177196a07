"""Email: MIME structure, owner address, policy, header injection, the one-click opt-out
headers as the SMTP server received them, and a send by hand through a real SMTP server on
loopback (aiosmtpd): the sync's policy and outbox key, so never a second email."""

from __future__ import annotations

import re
from collections import Counter
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.policy import default

import pytest
from aiosmtpd.controller import Controller

from tests.helpers.mail import (
    FAKE_PDF,
    Recorder,
    email_args,
    free_port,
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
from tests.helpers.sync import email_step
from webapp.archive.mail_state import MailState
from webapp.archive.record import ArchivedJob
from webapp.archive.store import Archive
from webapp.cli import mail as mail_cli
from webapp.cli.arguments import parse_lookback
from webapp.cli.mail import run_outbox
from webapp.mail import policy
from webapp.mail.digest_queue import send_digests
from webapp.mail.outbox import Outbox, deliver
from webapp.mail.owner import email_key, submit_seconds
from webapp.mail.sending import smtp_connect
from webapp.opt_out_token import OptOutToken, read_token
from webapp.renderers import email as email_renderer
from webapp.settings import Settings
from webapp.sync.run import Syncer


@pytest.mark.needs("pdflatex")
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
    assert parse_lookback(text).total_seconds() == seconds


@pytest.mark.needs("pdflatex")
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




# -- one mail path: a send by hand is the sync's email step for one job ---------------------

def _owner_key(report) -> str:
    return email_key("demo", report.job_id, submit_seconds(report))


def _sync_email(settings: Settings, service: FakeService, job_ids: list[str]) -> Counter:
    """The sync's email step for these jobs (as `jobreport sync --direction email` runs
    it once it has selected them), then its delivery."""
    syncer = Syncer(settings, service=service, archive=Archive(settings.archive_url),
                    connect=smtp_connect(settings))
    outbox = Outbox(settings.outbox)
    try:
        outcomes = email_step(syncer, service.reports, job_ids, outbox, frozenset())
        with outbox.lock():
            deliver(outbox, smtp_connect(settings))
    finally:
        outbox.close()
        syncer.close()
    return outcomes


def test_by_hand_and_sync_email_each_job_once_whichever_runs_first(smtp, tmp_path, fast_pdf,
                                                                   capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port, mail_daily_cap=0)
    service = FakeService({j: sample_report(j, "alice") for j in ("8001", "8002")})
    assert mail_cli.run_email(email_args("8001"), settings, service) == 0  # by hand first
    assert _sync_email(settings, service, ["8001", "8002"]) == Counter(
        {"already queued": 1, "queued": 1})
    assert mail_cli.run_email(email_args("8002"), settings, service) == 0  # the sync's first
    assert "job 8002 was already sent to alice@example.org" in capsys.readouterr().out
    assert sorted(recorder.jobs()) == ["8001", "8002"]
    outbox = Outbox(settings.outbox)
    assert [r.key for r in outbox.rows(("sent",))] == [
        _owner_key(service.reports["8001"]), _owner_key(service.reports["8002"])]
    outbox.close()


def test_by_hand_honours_opt_outs_and_the_daily_cap(smtp, tmp_path, fast_pdf, capsys):
    recorder, port = smtp
    (tmp_path / "optout").write_text("carol\n")
    settings = mail_settings(tmp_path, port, mail_opt_out=str(tmp_path / "optout"),
                             mail_daily_cap=1)
    reports = [sample_report("9001", "carol"), sample_report("9002", "dave"),
               sample_report("9003", "alice"), sample_report("9004", "alice"),
               sample_report("9005", "erin", elapsed_seconds=60.0)]
    service = FakeService({r.job_id: r for r in reports})
    with Archive(settings.archive_url) as archive:
        MailState(archive.db).opt_out("demo", "dave", "link")
    outcomes = {}
    for job_id in service.reports:
        assert mail_cli.run_email(email_args(job_id), settings, service) == 0
        outcomes[job_id] = capsys.readouterr().out.strip()
    assert outcomes == {
        "9001": "job 9001 not emailed to carol@example.org: skipped: user opted out",
        "9002": "job 9002 not emailed to dave@example.org: skipped: user opted out",
        "9003": "sent job 9003 report to alice@example.org",
        "9004": "job 9004 not emailed to alice@example.org: folded into digest",
        "9005": "job 9005 not emailed to erin@example.org: skipped: ran under 600 s",
    }
    assert recorder.jobs() == ["9003"]
    # The cap's decision is the sync's too: it folds 9004 and sends 9003 no second time.
    assert _sync_email(settings, service, ["9003", "9004"]) == Counter(
        {"already queued": 1, "folded into digest": 1})
    assert recorder.jobs() == ["9003"]


def test_to_another_address_is_a_copy_outside_the_owners_policy(smtp, tmp_path, fast_pdf,
                                                                 capsys):
    recorder, port = smtp
    (tmp_path / "optout").write_text("alice\n")
    settings = mail_settings(tmp_path, port, mail_opt_out=str(tmp_path / "optout"))
    service = FakeService({"4242": sample_report("4242", "alice")})
    assert mail_cli.run_email(email_args("4242", "--to", "alice@example.org"), settings,
                              service) == 0  # the owner's own address: the policy applies
    assert "skipped: user opted out" in capsys.readouterr().out
    assert mail_cli.run_email(email_args("4242", "--to", "staff@example.org"), settings,
                              service) == 0
    assert [rcpt for rcpt, _ in recorder.messages] == [["staff@example.org"]]


def test_ended_since_is_gone_and_says_where_it_went(tmp_path, capsys):
    settings = mail_settings(tmp_path, free_port())
    assert mail_cli.run_email(email_args("--ended-since", "1h"), settings, FakeService()) == 2
    assert "`jobreport sync`" in capsys.readouterr().err
    assert mail_cli.run_email(email_args(), settings, FakeService()) == 2


def test_smtp_down_then_up_sends_the_by_hand_email_once(tmp_path, fast_pdf, capsys):
    port = free_port()  # nothing listens yet: connection refused
    settings = mail_settings(tmp_path, port)
    service = FakeService({"4242": sample_report("4242", "alice")})
    assert mail_cli.run_email(email_args("4242"), settings, service) == 1
    assert "it stays in the outbox" in capsys.readouterr().out
    outbox = Outbox(settings.outbox)
    (row,) = outbox.rows()
    assert row.status == "pending" and "SMTP unavailable" in row.last_error
    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        assert run_outbox(outbox_args("--retry"), settings) == 0
        assert mail_cli.run_email(email_args("4242"), settings, service) == 0
        assert "already sent" in capsys.readouterr().out
    finally:
        controller.stop()
        outbox.close()
    assert recorder.jobs() == ["4242"]


def test_by_hand_leaves_its_email_to_the_run_holding_the_outbox(smtp, tmp_path, fast_pdf,
                                                                capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port)
    service = FakeService({"4242": sample_report("4242", "alice")})
    outbox = Outbox(settings.outbox)
    with outbox.lock():
        assert mail_cli.run_email(email_args("4242"), settings, service) == 0
    assert "the run that holds the outbox now sends it" in capsys.readouterr().out
    assert recorder.messages == [] and [r.status for r in outbox.rows()] == ["pending"]
    outbox.close()


# -- List-Unsubscribe: a <URL> as RFC 2369 / 8058 want it, never an encoded-word -------------

LONG_PUBLIC_URL = "https://jobreport.cluster-support.example.org/a/path/that/runs/long"


def _head(raw: bytes) -> bytes:
    return raw.split(b"\r\n\r\n", 1)[0] + b"\r\n"


def _assert_one_click_headers(raw: bytes, user: str) -> None:
    head = _head(raw)
    url = re.search(rb"\r\nList-Unsubscribe: <(https://[^>\r\n ]+)>\r\n", head)
    assert url, head
    assert url.group(1).startswith(f"{LONG_PUBLIC_URL}/unsubscribe/".encode())
    assert read_token(SECRET, url.group(1).rsplit(b"/", 1)[1].decode(), 90) == \
        OptOutToken("demo", user)
    assert b"\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in head
    assert b"=?" not in head.split(b"List-Unsubscribe")[1]
    assert max(len(line) for line in head.split(b"\r\n")) <= 998


SECRET = "s" * 40


def test_report_email_carries_a_plain_one_click_url(smtp, tmp_path, fast_pdf):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port, secret_key=SECRET, public_url=LONG_PUBLIC_URL)
    service = FakeService({"4242": sample_report("4242", "alice")})
    assert mail_cli.run_email(email_args("4242"), settings, service) == 0
    (_, raw), = recorder.messages
    assert len(_head(raw).split(b"\r\nList-Unsubscribe: ")[1].split(b"\r\n")[0]) > 78
    _assert_one_click_headers(raw, "alice")


def test_digest_email_carries_a_plain_one_click_url(smtp, tmp_path):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port, secret_key=SECRET, public_url=LONG_PUBLIC_URL,
                             cluster="demo")
    job = ArchivedJob("demo", "4242", 1, 150, "alice", "COMPLETED", 5.0,
                      {"findings": [], "cpus": 2, "elapsed_seconds": 3600,
                       "cpu_seconds": 3600}, {}, 0.0)
    with Archive(settings.archive_url) as archive:
        archive.put(job)
        outbox = Outbox(settings.outbox)
        run = send_digests(settings, archive, outbox, smtp_connect(settings), 0, 500)
        outbox.close()
    assert run.counts["queued"] == 1
    (_, raw), = recorder.messages
    assert b"\r\nX-Jobreport-Digest: alice " in _head(raw)
    _assert_one_click_headers(raw, "alice")


def test_a_url_past_the_line_limit_is_folded_inside_the_brackets_not_encoded():
    url = "https://x.example.org/unsubscribe/" + "A" * 1200
    msg = EmailMessage(policy=default)
    email_renderer.list_unsubscribe(msg, url)
    head = msg.as_bytes(policy=SMTP_POLICY)
    lines = head.split(b"\r\n")
    assert lines[0].startswith(b"List-Unsubscribe: <https://x.example.org/")
    assert all(len(line) <= 78 for line in lines) and b"=?" not in head
    # RFC 2369: whitespace inside the brackets is ignored, so the URL reads back whole.
    value = str(message_from_bytes(head, policy=default)["List-Unsubscribe"])
    assert re.sub(r"\s", "", value) == f"<{url}>"
    with pytest.raises(ValueError):
        email_renderer.list_unsubscribe(msg, "https://x.org/a>\r\nBcc: evil@example.org")


def test_an_unusable_pdf_store_still_sends_the_pdf_and_a_usable_one_keeps_it(
        smtp, tmp_path, fast_pdf):
    """The attachment is the web page's PDF, kept in the host's store; a caller who cannot
    write there (staff sending by hand on another host) still sends it."""
    from webapp.renderers.pdf_store import pdf_key, pdf_store

    recorder, port = smtp
    (tmp_path / "a-file").write_text("")
    broken = mail_settings(tmp_path, port, pdf_cache_dir=str(tmp_path / "a-file" / "pdf"))
    service = FakeService({"4242": sample_report("4242")})
    assert mail_cli.run_email(email_args("4242"), broken, service) == 0
    raw = recorder.messages[-1][1]
    attachment = next(message_from_bytes(raw, policy=default).iter_attachments())
    assert attachment.get_content() == FAKE_PDF
    kept = mail_settings(tmp_path, port, pdf_cache_dir=str(tmp_path / "pdf"))
    assert mail_cli.run_email(email_args("4242", "--resend"), kept, service) == 0
    assert pdf_store(kept).get(pdf_key("demo", "4242")) == FAKE_PDF
