"""Durable email outbox: a SQLite table every report email passes through.

Life of a row: ``pending`` -> (claimed) ``sending`` -> ``sent`` once the SMTP server has
answered 250 to the message data; a temporary failure goes back to ``pending`` with an
exponential backoff (``attempts``, ``next_attempt_at``); a permanent one (5xx, or too
many attempts) ends in ``failed``. Each row holds the finished message bytes with its
own Message-ID, rendered once, so every retry sends the identical message.

A ``sending`` row found by the next run means the sender died mid-delivery. We cannot
know whether the server accepted it, so we send it again: nothing is ever lost, and
the only duplicate possible is a kill in the window between the server's 250 reply and
our commit of ``sent`` (one SQLite commit, milliseconds). Such a duplicate carries the
same Message-ID, so mail systems that de-duplicate (and humans) see it as one message.
Only one process delivers at a time: ``lock()`` takes an fcntl lock on
``<outbox>.lock``, released by the kernel even when the holder is killed.

Chat notices (``webapp.mail.chat``) share the table, its states and its backoff: kind
``chat``, the message a small JSON document. ``deliver`` sends the emails, never those;
``claim_next(chat=True)`` hands them to the chat sender.
"""

from __future__ import annotations

import logging
import os
import smtplib
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from typing import Protocol

from tqdm import tqdm

from jobreport_common.filelock import held
from jobreport_common.sqlite_file import prepare
from webapp.migrations import OUTBOX, ready

log = logging.getLogger(__name__)

BACKOFF_BASE = 60.0  # seconds before the first retry; doubles each attempt
BACKOFF_MAX = 6 * 3600.0
MAX_ATTEMPTS = 10
CHAT = "chat"  # the kind of a chat notice's row

class OutboxBusy(RuntimeError):
    """Another process holds the delivery lock."""


class Sender(Protocol):
    def send(self, from_addr: str, to_addr: str, data: bytes) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class Row:
    id: int
    key: str
    job_id: str
    kind: str
    from_addr: str
    to_addr: str
    message_id: str
    message: bytes
    status: str
    attempts: int
    next_attempt_at: float
    last_error: str | None
    created_at: float
    sent_at: float | None


_CHANNEL = {False: "!= ?", True: "= ?"}  # emails, chat notices: the one SQL that differs


@dataclass(frozen=True)
class Rendered:
    """What the outbox records of a message: its envelope and its bytes, as sent. A
    process rendering messages for another hands them over so (the weekly digests are
    rendered by worker processes: an ``EmailMessage`` does not pickle)."""

    from_addr: str | None
    to_addr: str | None
    message_id: str | None
    data: bytes

    @classmethod
    def of(cls, msg: EmailMessage) -> Rendered:
        def text(name: str) -> str | None:
            value = msg[name]
            return None if value is None else str(value)

        return cls(text("From"), text("To"), text("Message-ID"),
                   msg.as_bytes(policy=SMTP_POLICY))


def backoff(attempts: int) -> float:
    """Seconds to wait after the given number of failed attempts: 60, 120, 240, ... 6 h."""
    return min(BACKOFF_BASE * 2 ** max(0, attempts - 1), BACKOFF_MAX)


class Outbox:
    """The outbox table at ``path`` (parent directories are created)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, mode=0o700, exist_ok=True)
        # Whole emails with their PDFs: readable by the service user only. SQLite gives its
        # -wal and -shm files the database file's mode.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        prepare(path)
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            ready(OUTBOX, self.db, "sqlite", path)  # its tables: webapp/migrations/outbox
        except BaseException:
            self.db.close()
            raise
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA synchronous=FULL")  # a 'sent' mark survives power loss

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the delivery lock (non-blocking; OutboxBusy when another process has it)."""
        with held(self.path + ".lock", OutboxBusy(f"another mailer holds {self.path}.lock")):
            yield

    def _row(self, record: sqlite3.Row | None) -> Row | None:
        return Row(**dict(record)) if record is not None else None

    def get(self, key: str) -> Row | None:
        return self._row(self.db.execute("SELECT * FROM outbox WHERE key = ?", (key,)).fetchone())

    def enqueue(self, key: str, job_id: str, kind: str, msg: EmailMessage | Rendered) -> bool:
        """Record the message before any send; False when the key is already there."""
        now = self.clock()
        out = msg if isinstance(msg, Rendered) else Rendered.of(msg)
        cur = self.db.execute(
            "INSERT OR IGNORE INTO outbox (key, job_id, kind, from_addr, to_addr, message_id,"
            " message, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key, job_id, kind, out.from_addr, out.to_addr, out.message_id, out.data, now,
             now))
        return cur.rowcount == 1

    def enqueue_many(self, items: list[tuple[str, str, str, EmailMessage | Rendered]]
                     ) -> list[bool]:
        """``enqueue`` each of ``items`` in one transaction: one sync to disk, not one
        a message (5,000 digests: 29 s of fsyncs on their own here)."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            return [self.enqueue(*item) for item in items]

    def enqueue_notice(self, key: str, job_id: str, to: str, data: bytes) -> bool:
        """Record a chat notice (``to`` names its recipient for listings; the URL, which
        may hold a token, stays in ``data``); False when the key is already there."""
        now = self.clock()
        cur = self.db.execute(
            "INSERT OR IGNORE INTO outbox (key, job_id, kind, from_addr, to_addr, message_id,"
            " message, next_attempt_at, created_at) VALUES (?, ?, ?, '', ?, ?, ?, ?, ?)",
            (key, job_id, CHAT, to, key, data, now, now))
        return cur.rowcount == 1

    def requeue(self, key: str, msg: EmailMessage) -> None:
        """Replace a row's message and make it due now (an explicit resend)."""
        now = self.clock()
        self.db.execute(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = ?,"
            " to_addr = ?, from_addr = ?, message_id = ?, message = ?, last_error = NULL,"
            " sent_at = NULL WHERE key = ?",
            (now, msg["To"], msg["From"], msg["Message-ID"], msg.as_bytes(policy=SMTP_POLICY),
             key))

    def claim_next(self, chat: bool = False) -> Row | None:
        """The oldest due email (or chat notice), marked 'sending'. Call only while holding
        ``lock()``: a 'sending' row is then an orphan of a killed sender and is due again."""
        now = self.clock()
        with self.db:  # BEGIN ... COMMIT: the claim is durable before the send starts
            self.db.execute("BEGIN IMMEDIATE")
            where = f"kind {_CHANNEL[chat]} AND (status = 'sending'"
            record = self.db.execute(
                f"SELECT * FROM outbox WHERE {where}"  # noqa: S608
                " OR (status = 'pending' AND next_attempt_at <= ?)) ORDER BY id LIMIT 1",
                (CHAT, now)).fetchone()
            if record is None:
                return None
            self.db.execute("UPDATE outbox SET status = 'sending', attempts = attempts + 1"
                            " WHERE id = ?", (record["id"],))
        return self.get(record["key"])

    def mark_sent(self, row: Row) -> None:
        self.db.execute("UPDATE outbox SET status = 'sent', sent_at = ?, last_error = NULL"
                        " WHERE id = ?", (self.clock(), row.id))

    def mark_retry(self, row: Row, error: str) -> None:
        """Back to pending after a temporary failure, or failed after MAX_ATTEMPTS."""
        if row.attempts >= MAX_ATTEMPTS:
            self.mark_failed(row, f"gave up after {row.attempts} attempts: {error}")
            return
        self.db.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ?,"
                        " last_error = ? WHERE id = ?",
                        (self.clock() + backoff(row.attempts), error, row.id))

    def mark_failed(self, row: Row, error: str) -> None:
        self.db.execute("UPDATE outbox SET status = 'failed', last_error = ? WHERE id = ?",
                        (error, row.id))

    def retry_now(self) -> int:
        """Make every pending and failed row due now (failed ones start counting again)."""
        cur = self.db.execute(
            "UPDATE outbox SET next_attempt_at = ?,"
            " attempts = CASE status WHEN 'failed' THEN 0 ELSE attempts END,"
            " status = CASE status WHEN 'failed' THEN 'pending' ELSE status END"
            " WHERE status IN ('pending', 'failed')", (self.clock(),))
        return cur.rowcount

    def rows(self, statuses: tuple[str, ...] = ("pending", "sending", "failed")) -> list[Row]:
        marks = ",".join("?" * len(statuses))
        sql = f"SELECT * FROM outbox WHERE status IN ({marks}) ORDER BY id"  # noqa: S608
        return [Row(**dict(r)) for r in self.db.execute(sql, statuses)]

    def due_count(self, chat: bool = False) -> int:
        where = f"kind {_CHANNEL[chat]} AND (status = 'sending'"
        return self.db.execute(
            f"SELECT count(*) FROM outbox WHERE {where}"  # noqa: S608
            " OR (status = 'pending' AND next_attempt_at <= ?))",
            (CHAT, self.clock())).fetchone()[0]


def _smtp_code(exc: Exception) -> int | None:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return next(iter(exc.recipients.values()))[0] if exc.recipients else None
    return getattr(exc, "smtp_code", None)


def deliver(outbox: Outbox, connect: Callable[[], Sender], progress: bool = True) -> Counter:
    """Send every due row over one connection; call while holding ``outbox.lock()``.

    Returns counts of sent, deferred (will retry) and failed (permanent) emails. A
    connection-level failure (server down) defers the row at hand and ends the run;
    the other rows stay due for the next run.
    """
    stats: Counter = Counter()
    sender: Sender | None = None
    bar = tqdm(total=outbox.due_count(), unit="email", desc="sending",
               disable=None if progress else True)
    try:
        while (row := outbox.claim_next()) is not None:
            try:
                if sender is None:
                    sender = connect()
                sender.send(row.from_addr, row.to_addr, row.message)
            except (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused) as exc:
                code = _smtp_code(exc) or 0
                error = f"{code} {exc}"
                if 500 <= code < 600:
                    log.error("email %s to %s refused: %s", row.key, row.to_addr, error)
                    outbox.mark_failed(row, error)
                    stats["failed"] += 1
                else:
                    log.warning("email %s deferred: %s", row.key, error)
                    outbox.mark_retry(row, error)
                    stats["deferred"] += 1
                if code == 421 or isinstance(exc, smtplib.SMTPServerDisconnected):
                    break
                continue
            except (OSError, smtplib.SMTPException) as exc:
                log.warning("SMTP unavailable, email %s deferred: %s", row.key, exc)
                outbox.mark_retry(row, f"SMTP unavailable: {exc}")
                stats["deferred"] += 1
                break
            outbox.mark_sent(row)
            stats["sent"] += 1
            bar.update()
    finally:
        bar.close()
        if sender is not None:
            sender.close()
    return stats
