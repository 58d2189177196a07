"""Outbox state machine with a fake sender and a fake clock."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

import pytest

from webapp.mail import outbox as ob


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class FakeSender:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.sent: list[str] = []

    def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append(to_addr)

    def close(self) -> None:
        pass


def message(n: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "j@example.org", f"u{n}@example.org", f"job {n}"
    msg["Message-ID"] = f"<{n}@example.org>"
    msg.set_content("report")
    return msg


@pytest.fixture
def box(tmp_path):
    clock = Clock()
    box = ob.Outbox(str(tmp_path / "deep" / "dir" / "outbox.sqlite"), clock=clock)
    yield box
    box.close()


def test_parent_directory_created_and_key_unique(box):
    assert box.enqueue("1:ended", "1", "ended", message(1))
    assert not box.enqueue("1:ended", "1", "ended", message(99))
    assert [r.to_addr for r in box.rows()] == ["u1@example.org"]


def test_enqueue_many_records_all_in_one_transaction_each_key_once(box):
    assert box.enqueue("1:ended", "1", "ended", message(1))
    assert box.enqueue_many([("1:ended", "1", "ended", message(9)),
                             ("2:ended", "2", "ended", message(2)),
                             ("3:ended", "3", "ended", message(3))]) == [False, True, True]
    assert [r.to_addr for r in box.rows()] == [f"u{n}@example.org" for n in (1, 2, 3)]
    assert box.enqueue_many([]) == []


def test_sent_only_after_the_server_accepts(box):
    box.enqueue("1:ended", "1", "ended", message(1))
    sender = FakeSender()
    assert ob.deliver(box, lambda: sender, progress=False)["sent"] == 1
    row = box.get("1:ended")
    assert row.status == "sent" and row.attempts == 1 and sender.sent == ["u1@example.org"]
    assert ob.deliver(box, lambda: sender, progress=False)["sent"] == 0


def test_exponential_backoff_then_failed(box):
    box.enqueue("1:ended", "1", "ended", message(1))
    sender = FakeSender(ConnectionRefusedError("refused"))
    waits = []
    for _ in range(ob.MAX_ATTEMPTS):
        stats = ob.deliver(box, lambda: sender, progress=False)
        row = box.get("1:ended")
        if row.status == "failed":
            assert stats == {"failed": 1}  # the last attempt gives it up
            break
        assert stats == {"deferred": 1}
        waits.append(row.next_attempt_at - box.clock())
        assert ob.deliver(box, lambda: sender, progress=False)["deferred"] == 0  # not due
        box.clock.now = row.next_attempt_at
    assert waits[:4] == [60, 120, 240, 480]
    assert all(b == min(2 * a, ob.BACKOFF_MAX) for a, b in zip(waits, waits[1:], strict=False))
    assert len(waits) == ob.MAX_ATTEMPTS - 1
    assert row.status == "failed" and "gave up after" in row.last_error


def test_permanent_refusal_fails_at_once(box):
    box.enqueue("1:ended", "1", "ended", message(1))
    refused = smtplib.SMTPRecipientsRefused({"u1@example.org": (550, b"no such user")})
    assert ob.deliver(box, lambda: FakeSender(refused), progress=False)["failed"] == 1
    assert box.get("1:ended").status == "failed"
    assert box.retry_now() == 1
    assert box.get("1:ended").status == "pending" and box.get("1:ended").attempts == 0


def test_connection_failure_stops_the_run(box):
    for n in range(3):
        box.enqueue(f"{n}:ended", str(n), "ended", message(n))
    stats = ob.deliver(box, lambda: FakeSender(OSError("down")), progress=False)
    assert stats == {"deferred": 1}
    assert [r.attempts for r in box.rows()] == [1, 0, 0]


def test_orphaned_sending_row_is_sent_again(box):
    box.enqueue("1:ended", "1", "ended", message(1))
    assert box.claim_next().status == "sending"  # then the process died
    sender = FakeSender()
    with box.lock():
        assert ob.deliver(box, lambda: sender, progress=False)["sent"] == 1
    assert box.get("1:ended").attempts == 2 and sender.sent == ["u1@example.org"]


def test_lock_is_exclusive(box):
    with box.lock():
        with pytest.raises(ob.OutboxBusy):
            with ob.Outbox(box.path).lock():
                pass
    with box.lock():
        pass


def test_outbox_command_lists_pending_and_failed(box, capsys):
    import argparse

    from webapp.cli.mail import add_outbox_arguments, run_outbox
    from webapp.settings import Settings

    box.enqueue("1:ended", "1", "ended", message(1))
    box.enqueue("2:ended", "2", "ended", message(2))
    refused = smtplib.SMTPDataError(554, b"rejected")
    ob.deliver(box, lambda: FakeSender(refused), progress=False)
    parser = argparse.ArgumentParser()
    add_outbox_arguments(parser)
    assert run_outbox(parser.parse_args([]), Settings(outbox=box.path)) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "554" in out and "2 email(s) listed" in out


def test_outbox_files_are_private(tmp_path):
    import os
    import stat

    old = os.umask(0o022)  # a usual umask would make new files world-readable
    try:
        path = tmp_path / "var" / "outbox.sqlite"
        box = ob.Outbox(str(path))
        box.enqueue("1:ended", "1", "ended", message(1))
        with box.lock():
            pass
        box.close()
    finally:
        os.umask(old)
    files = [p for p in path.parent.iterdir()]
    assert {p.name for p in files} >= {"outbox.sqlite", "outbox.sqlite.lock"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p
