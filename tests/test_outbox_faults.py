"""The outbox under faults, against a real SMTP server on loopback (aiosmtpd): a message
that cannot be sent (a non-ASCII address, a mailbox that refuses, a row left 'sending' by
a killed run) fails alone and never holds up the messages behind it; a server down for an
hour loses nothing; staff read it all in `jobreport outbox --status` and its metrics.
A fake clock stands in for the backoff's waits."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.mail import Recorder, email_args, free_port, mail_settings, outbox_args
from tests.helpers.reports import FakeService, sample_report
from webapp.cli import mail as mail_cli
from webapp.mail import outbox as ob
from webapp.mail.owner import queue_owner_email
from webapp.mail.policy import BadAddress, address_problem, checked_address
from webapp.mail.sending import smtp_connect

JOERG = "jörg.müller@example.org"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Refusing(Recorder):
    """Accepts every recipient but those in ``refused``: 550, as a mailbox that is gone."""

    def __init__(self, *refused: str) -> None:
        super().__init__()
        self.refused = set(refused)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refused:
            return "550 5.1.1 mailbox unavailable"
        envelope.rcpt_tos.append(address)
        return "250 OK"


class Server:
    """aiosmtpd on ``port``, started and stopped by the test (the server down, then up)."""

    def __init__(self, recorder: Recorder, port: int, smtputf8: bool = False) -> None:
        self.controller = Controller(recorder, hostname="127.0.0.1", port=port,
                                     enable_SMTPUTF8=smtputf8)

    def __enter__(self) -> Server:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


def message(to: str, n: int) -> EmailMessage:
    msg = EmailMessage(policy=default)
    msg["From"], msg["To"], msg["Subject"] = "jobreport@example.org", to, f"job {n}"
    msg["Message-ID"] = f"<{n}@example.org>"
    msg["X-Jobreport-Job"] = str(n)
    msg.set_content("report")
    return msg


@pytest.fixture
def port():
    return free_port()


@pytest.fixture
def box(tmp_path):
    box = ob.Outbox(str(tmp_path / "outbox.sqlite"), clock=Clock())
    yield box
    box.close()


def queue(box: ob.Outbox, *addresses: str) -> list[str]:
    keys = []
    for n, to in enumerate(addresses, 1):
        keys.append(f"{n}:ended")
        assert box.enqueue(keys[-1], str(n), "ended", message(to, n))
    return keys


def run(box: ob.Outbox, settings) -> Counter:
    with box.lock():
        return ob.deliver(box, smtp_connect(settings), progress=False)


def statuses(box: ob.Outbox) -> list[str]:
    return [r.status for r in box.rows(("pending", "sending", "sent", "failed"))]


# -- (a) a non-ASCII address ------------------------------------------------------------------


def test_a_non_ascii_address_first_fails_alone_and_the_next_goes_in_the_same_run(
        box, tmp_path, port):
    recorder = Recorder()
    first, second = queue(box, JOERG, "support@example.org")
    with Server(recorder, port):  # no SMTPUTF8 offered (aiosmtpd's default)
        assert run(box, mail_settings(tmp_path, port)) == {"failed": 1, "sent": 1}
    assert recorder.jobs() == ["2"]
    bad = box.get(first)
    assert bad.status == "failed" and bad.attempts == 1
    assert "not ASCII" in bad.last_error and "SMTPUTF8" in bad.last_error
    assert JOERG in bad.last_error and bad.last_error_at == box.clock()
    assert box.get(second).status == "sent"


class PlainSmtplib:
    """The sender before the fix: smtplib's ``sendmail`` as it is, which raises
    UnicodeEncodeError on a non-ASCII address after MAIL FROM went out."""

    def __init__(self, settings) -> None:
        import smtplib

        self.smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=10)
        self.sessions = 1

    def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
        self.smtp.sendmail(from_addr, [to_addr], data)

    def close(self) -> None:
        self.smtp.quit()


def test_any_exception_of_one_message_is_that_messages_and_the_session_is_renewed(
        box, tmp_path, port):
    recorder = Recorder()
    settings = mail_settings(tmp_path, port)
    queue(box, "a@example.org", JOERG, "b@example.org")
    sessions = []

    def connect() -> PlainSmtplib:
        sessions.append(PlainSmtplib(settings))
        return sessions[-1]

    with Server(recorder, port), box.lock():
        assert ob.deliver(box, connect, progress=False) == {"sent": 2, "failed": 1}
    assert recorder.jobs() == ["1", "3"]
    assert len(sessions) == 2  # the one left mid-transaction was closed, a new one opened
    row = box.get("2:ended")
    assert row.status == "failed" and "cannot be encoded for SMTP" in row.last_error


def test_an_unknown_exception_is_retried_with_the_backoff_then_given_up(box):
    class Broken:
        def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
            if to_addr == "u1@example.org":
                raise KeyError("a bug of ours")

        def close(self) -> None:
            pass

    queue(box, "u1@example.org")
    waits = []
    for _ in range(ob.MAX_ATTEMPTS):
        stats = ob.deliver(box, Broken, progress=False)
        row = box.get("1:ended")
        if row.status == "failed":
            break
        assert stats == {"deferred": 1} and "KeyError" in row.last_error
        waits.append(row.next_attempt_at - box.clock())
        box.clock.now = row.next_attempt_at
    assert waits[:3] == [ob.backoff(1), ob.backoff(2), ob.backoff(3)]
    assert row.status == "failed" and row.attempts == ob.MAX_ATTEMPTS
    assert row.last_error.startswith(f"gave up after {ob.MAX_ATTEMPTS} attempts: KeyError")


def test_a_non_ascii_address_goes_out_with_smtputf8_when_the_server_offers_it(
        box, tmp_path, port):
    recorder = Recorder()
    queue(box, JOERG)
    with Server(recorder, port, smtputf8=True):
        assert run(box, mail_settings(tmp_path, port, smtp_utf8=True)) == {"sent": 1}
    ((rcpt, raw),) = recorder.messages
    assert rcpt == [JOERG]
    assert f"To: {JOERG}\r\n".encode() in raw  # UTF-8 header (RFC 6532), no encoded-word
    assert message_from_bytes(raw, policy=default)["To"] == JOERG


# -- (b) a row left 'sending' by a killed run -------------------------------------------------


def test_a_row_left_sending_goes_after_the_others_and_is_sent_again(box, tmp_path, port):
    recorder = Recorder()
    first, *_ = queue(box, "a@example.org", "b@example.org", "c@example.org")
    with sqlite3.connect(box.path) as db:  # as a run killed mid-send leaves it
        db.execute("UPDATE outbox SET status = 'sending', attempts = 1 WHERE key = ?", (first,))
    with Server(recorder, port):
        assert run(box, mail_settings(tmp_path, port)) == {"sent": 3}
    assert recorder.jobs() == ["2", "3", "1"]  # the others first: nothing waits behind it
    row = box.get(first)
    assert row.status == "sent" and row.attempts == 2 and row.last_error == ob.STOPPED


class Killing:
    """A sender whose process dies (BaseException: nothing catches it) on one address."""

    def __init__(self, inner: ob.Sender, poison: str) -> None:
        self.inner, self.poison = inner, poison

    def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
        if to_addr == self.poison:
            raise SystemExit("killed")
        self.inner.send(from_addr, to_addr, data)

    def close(self) -> None:
        self.inner.close()


def test_a_row_that_kills_every_run_is_given_up_and_never_blocks_the_queue(
        box, tmp_path, port):
    recorder = Recorder()
    settings = mail_settings(tmp_path, port)
    keys = queue(box, "poison@example.org", "a@example.org")
    connect = smtp_connect(settings)
    with Server(recorder, port):
        for n in range(ob.MAX_ATTEMPTS):
            if n == 3:  # mail queued while it keeps failing goes out all the same
                keys.append("late:ended")
                box.enqueue(keys[-1], "late", "ended", message("late@example.org", 99))
            with box.lock(), pytest.raises(SystemExit):
                ob.deliver(box, lambda: Killing(connect(), "poison@example.org"),
                           progress=False)
            assert box.get(keys[0]).status == "sending"
            box.clock.now += 60  # the next run of the timer
        assert box.get(keys[0]).attempts == ob.MAX_ATTEMPTS
        with box.lock():  # its 11th claim: given up, never sent
            assert ob.deliver(box, lambda: Killing(connect(), "poison@example.org"),
                              progress=False) == Counter()
    assert recorder.jobs() == ["2", "99"]  # each once, in the first run after queueing
    poison = box.get(keys[0])
    assert poison.status == "failed"
    assert poison.last_error == f"gave up after {ob.MAX_ATTEMPTS} attempts: {ob.STOPPED}"
    assert statuses(box) == ["failed", "sent", "sent"]


# -- (c) the server down for an hour, then up -------------------------------------------------


def test_smtp_down_for_an_hour_then_up_delivers_every_message_once(box, tmp_path, port):
    settings = mail_settings(tmp_path, port)  # nothing listens on the port
    keys = queue(box, *(f"u{n}@example.org" for n in range(1, 6)))
    for minute in range(60):  # the sync's timer, every minute for an hour
        stats = run(box, settings)
        assert stats in ({"deferred": 1}, Counter()), (minute, stats)
        if minute == 30:  # queued during the outage
            keys += queue_late(box, 6)
        box.clock.now += 60
    rows = box.rows(("pending", "sending", "sent", "failed"))
    assert {r.status for r in rows} == {"pending"}
    assert all(r.attempts < ob.MAX_ATTEMPTS for r in rows)
    assert all(r.last_error.startswith("SMTP unavailable") for r in rows if r.attempts)
    first_due = min(r.next_attempt_at for r in rows)
    recorder = Recorder()
    with Server(recorder, port):  # back: the timer's runs go on
        runs = []
        while len(runs) < 120 and "pending" in statuses(box):
            runs.append(run(box, settings))
            box.clock.now += 60
        assert run(box, settings) == Counter()
    # The first run with a row due sends them all: the rest do not wait out their backoff.
    assert runs[-1] == {"sent": 6} and not any(runs[:-1])
    assert box.clock.now - 60 - first_due < 60
    assert sorted(recorder.jobs()) == ["1", "2", "3", "4", "5", "6"]
    assert statuses(box) == ["sent"] * 6


def queue_late(box: ob.Outbox, n: int) -> list[str]:
    key = f"{n}:ended"
    assert box.enqueue(key, str(n), "ended", message(f"u{n}@example.org", n))
    return [key]


# -- (d) a mailbox that refuses ---------------------------------------------------------------


def test_a_refusing_mailbox_fails_with_its_reason_and_the_others_go_once(box, tmp_path, port):
    recorder = Refusing("gone@example.org")
    settings = mail_settings(tmp_path, port)
    keys = queue(box, "a@example.org", "gone@example.org", "b@example.org")
    with Server(recorder, port):
        assert run(box, settings) == {"sent": 2, "failed": 1}
        box.clock.now += 7 * 3600
        assert run(box, settings) == Counter()  # given up: never tried again by itself
    assert recorder.jobs() == ["1", "3"]
    refused = box.get(keys[1])
    assert refused.status == "failed" and refused.attempts == 1
    assert refused.last_error.startswith("550 ") and "mailbox unavailable" in refused.last_error


# -- (e) what staff see: the status, its JSON, the metrics ------------------------------------


def test_status_json_and_metrics_show_oldest_unsent_given_up_and_last_error(tmp_path, port,
                                                                             capsys):
    metrics = tmp_path / "textfiles"
    metrics.mkdir()
    settings = mail_settings(tmp_path, port, metrics_textfile_dir=str(metrics))
    box = ob.Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
    queue(box, "a@example.org", "gone@example.org", "b@example.org")
    with Server(Refusing("gone@example.org", "b@example.org"), port):
        stats = run(box, settings)
    assert stats == {"sent": 1, "failed": 2}
    with sqlite3.connect(box.path) as db:  # one more, queued two hours ago and not sent yet
        db.execute("UPDATE outbox SET status = 'pending', created_at = ?, last_error_at = ?"
                   " WHERE key = '3:ended'", (time.time() - 7200, time.time() - 60))
    box.close()
    prom = metrics / "jobreport_outbox.prom"
    assert prom.exists()  # the delivery wrote it

    assert mail_cli.run_outbox(outbox_args("--status", "--format", "json"), settings) == 1
    state = json.loads(capsys.readouterr().out)
    assert state["counts"] == {"pending": 1, "sent": 1, "failed": 1}
    assert 7190 < state["oldest_unsent_age_seconds"] < 7300
    (given_up,) = state["given_up"]
    assert given_up["to_addr"] == "gone@example.org" and given_up["error"].startswith("550 ")
    assert state["last_error"]["to_addr"] == "gone@example.org"  # the newest error

    assert mail_cli.run_outbox(outbox_args("--status"), settings) == 1
    text = capsys.readouterr().out
    assert "1 pending, 0 sending, 1 sent, 1 failed" in text
    assert "oldest unsent: 2h 00m old" in text
    assert "given up: 1" in text and "to gone@example.org (failed, 1 attempt(s))" in text
    assert "last error: #2 ended to gone@example.org" in text

    values = {(s.name, s.labels.get("status")): s.value
              for f in text_string_to_metric_families(prom.read_text()) for s in f.samples}
    assert values[("jobreport_outbox_messages", "failed")] == 1
    assert values[("jobreport_outbox_messages", "pending")] == 1
    assert values[("jobreport_outbox_messages", "sending")] == 0
    assert 7190 < values[("jobreport_outbox_oldest_unsent_age_seconds", None)] < 7300
    assert values[("jobreport_outbox_last_error_timestamp_seconds", None)] == \
        state["last_error"]["at"]


def test_an_empty_outbox_reads_as_nothing_wrong(tmp_path, port, capsys):
    settings = mail_settings(tmp_path, port)
    assert mail_cli.run_outbox(outbox_args("--status"), settings) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "oldest unsent: none", "last error: none", "given up: 0"]


# -- addresses checked where users are mapped to them -----------------------------------------


@pytest.mark.parametrize(("addr", "why"), [
    ("jörg.müller@example.org", "JOBREPORT_SMTP_UTF8 is off"),
    ("alice", "not an email address"),
    ("alice@example.org,bob@example.org", "not an email address"),
    ("Alice <alice@example.org>", "not an email address"),
    ("alice@", "not an email address"),
    ("al ice@example.org", "not an email address"),
])
def test_an_unusable_address_is_refused_naming_it(addr, why):
    with pytest.raises(BadAddress) as refused:
        checked_address(addr, smtputf8=False, where="--to")
    assert str(refused.value).startswith(f"--to: {addr!r} is not usable: ")
    assert why in str(refused.value)


def test_a_non_ascii_address_is_usable_only_with_smtputf8():
    assert address_problem(JOERG, smtputf8=True) is None
    assert address_problem("jörg müller@example.org", smtputf8=True).startswith("not an email")
    assert address_problem("alice@example.org", smtputf8=False) is None


def test_by_hand_to_a_non_ascii_address_is_refused_before_the_outbox(tmp_path, port, capsys):
    settings = mail_settings(tmp_path, port)
    service = FakeService({"4242": sample_report("4242", "alice")})
    assert mail_cli.run_email(email_args("4242", "--to", JOERG), settings, service) == 2
    err = capsys.readouterr().err
    assert f"--to: {JOERG!r} is not usable" in err and "JOBREPORT_SMTP_UTF8" in err
    assert not Path(settings.outbox).exists() or not ob.Outbox(settings.outbox).rows()


def test_by_hand_to_a_non_ascii_address_with_smtputf8_is_sent(tmp_path, port, fast_pdf, capsys):
    recorder = Recorder()
    settings = mail_settings(tmp_path, port, smtp_utf8=True)
    service = FakeService({"4242": sample_report("4242", "alice")})
    with Server(recorder, port, smtputf8=True):
        assert mail_cli.run_email(email_args("4242", "--to", JOERG), settings, service) == 0
    assert [rcpt for rcpt, _ in recorder.messages] == [[JOERG]]


def test_a_mapped_address_that_is_not_one_is_skipped_naming_it(tmp_path, port):
    from webapp.archive.mail_state import MailState
    from webapp.archive.store import Archive

    mail_map = tmp_path / "mail-map"
    mail_map.write_text("alice alice(at)example.org\n")
    settings = mail_settings(tmp_path, port, mail_map=str(mail_map), mail_min_runtime=0)
    report = sample_report("4242", "alice")
    box = ob.Outbox(settings.outbox)
    with Archive(settings.archive_url) as archive:
        outcome = queue_owner_email(report, "4242", 0, settings,
                                    MailState(archive.db, archive.clock), box, frozenset())
    assert outcome.startswith(f"skipped: JOBREPORT_MAIL_MAP ({mail_map}), user alice: "
                              "'alice(at)example.org' is not usable: not an email address")
    assert box.rows() == []
    box.close()
