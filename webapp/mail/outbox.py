"""Durable email outbox: a SQLite table every report email passes through.

Life of a row: ``pending`` -> (claimed) ``sending`` -> ``sent`` once the SMTP server has
answered 250 to the message data; a temporary failure goes back to ``pending`` with an
exponential backoff (``attempts``, ``next_attempt_at``); a permanent one (5xx, an
address that cannot be sent to, or too many attempts) ends in ``failed``. Any failure of
one message is that message's: ``deliver`` records it on the row and goes on with the
next, so no row can stop the ones behind it. Each row holds the finished message bytes
with its own Message-ID, rendered once, so every retry sends the identical message.

A ``sending`` row found by the next run means the sender died mid-delivery. We cannot
know whether the server accepted it, so we send it again: nothing is ever lost, and
the only duplicate possible is a kill in the window between the server's 250 reply and
our commit of ``sent`` (one SQLite commit, milliseconds). Such a duplicate carries the
same Message-ID, so mail systems that de-duplicate (and humans) see it as one message.
Such a row is claimed after every other due row and each claim counts as an attempt: a
message that kills its sender every time is given up after ``MAX_ATTEMPTS`` and never
holds up the rows behind it.
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
from email.policy import SMTPUTF8 as SMTPUTF8_POLICY
from typing import Protocol, cast

from tqdm import tqdm

from jobreport_common.filelock import held
from jobreport_common.sqlite_file import prepare
from webapp.mail.outbox_state import TEXTFILE, OutboxState, Problem, registry
from webapp.migrations import OUTBOX, ready
from webapp.ops_metrics import textfile_path, write_textfile

log = logging.getLogger(__name__)

BACKOFF_BASE = 60.0  # seconds before the first retry; doubles each attempt
BACKOFF_MAX = 6 * 3600.0
MAX_ATTEMPTS = 10
CHAT = "chat"  # the kind of a chat notice's row
UNAVAILABLE = "SMTP unavailable"  # the last error of a row deferred only for the server
# The last error of a row found 'sending': its sender died (killed, out of memory) mid-send.
STOPPED = "the sender stopped during delivery (killed?); sent again"


class OutboxBusy(RuntimeError):
    """Another process holds the delivery lock."""


class Undeliverable(Exception):
    """This message can never be sent as it is (a permanent failure of the message, not
    of the server): e.g. a non-ASCII address and a server without SMTPUTF8."""


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
    last_error_at: float | None


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

        return cls(text("From"), text("To"), text("Message-ID"), wire_bytes(msg))


def wire_bytes(msg: EmailMessage) -> bytes:
    """The message as sent. An address with non-ASCII characters can only go out with
    SMTPUTF8 (RFC 6531), whose messages carry UTF-8 headers (RFC 6532): the ASCII policy
    would write the local part as an encoded-word, which no address may hold."""
    ascii_only = all(str(msg[name] or "").isascii() for name in ("From", "To"))
    return msg.as_bytes(policy=SMTP_POLICY if ascii_only else SMTPUTF8_POLICY)


def backoff(attempts: int) -> float:
    """Seconds to wait after the given number of failed attempts: 60, 120, 240, ... 6 h."""
    return cast(float, min(BACKOFF_BASE * 2 ** max(0, attempts - 1), BACKOFF_MAX))


class Outbox:
    """The outbox table at ``path`` (parent directories are created)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time,
                 metrics_dir: str = "") -> None:
        self.path = path
        self.clock = clock
        self.metrics_dir = metrics_dir  # JOBREPORT_METRICS_TEXTFILE_DIR: after each delivery
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
            (now, msg["To"], msg["From"], msg["Message-ID"], wire_bytes(msg), key))

    def claim_next(self, chat: bool = False) -> Row | None:
        """The oldest due email (or chat notice), marked 'sending'. Call only while holding
        ``lock()``: a 'sending' row is then an orphan of a killed sender and is due again,
        after every due pending row (it may be what killed the sender), and is given up
        once its claims reach MAX_ATTEMPTS."""
        now = self.clock()
        where = f"kind {_CHANNEL[chat]} AND (status = 'sending'"
        while True:
            with self.db:  # BEGIN ... COMMIT: the claim is durable before the send starts
                self.db.execute("BEGIN IMMEDIATE")
                record = self.db.execute(
                    f"SELECT id, key, status, attempts FROM outbox WHERE {where}"  # noqa: S608
                    " OR (status = 'pending' AND next_attempt_at <= ?))"
                    " ORDER BY status = 'sending', id LIMIT 1", (CHAT, now)).fetchone()
                if record is None:
                    return None
                orphan = record["status"] == "sending"
                if orphan and record["attempts"] >= MAX_ATTEMPTS:
                    log.error("outbox row %s gave up: %s", record["key"], STOPPED)
                    self.db.execute(
                        "UPDATE outbox SET status = 'failed', last_error = ?, last_error_at = ?"
                        " WHERE id = ?",
                        (f"gave up after {record['attempts']} attempts: {STOPPED}", now,
                         record["id"]))
                    continue
                self.db.execute(
                    "UPDATE outbox SET status = 'sending', attempts = attempts + 1,"
                    " last_error = CASE WHEN ? THEN ? ELSE last_error END,"
                    " last_error_at = CASE WHEN ? THEN ? ELSE last_error_at END WHERE id = ?",
                    (orphan, STOPPED, orphan, now, record["id"]))
            return self.get(record["key"])

    def mark_sent(self, row: Row) -> None:
        """Sent; an earlier attempt's error stays on the row (`jobreport outbox --status`)."""
        self.db.execute("UPDATE outbox SET status = 'sent', sent_at = ? WHERE id = ?",
                        (self.clock(), row.id))

    def mark_retry(self, row: Row, error: str) -> None:
        """Back to pending after a temporary failure, or failed after MAX_ATTEMPTS."""
        if row.attempts >= MAX_ATTEMPTS:
            self.mark_failed(row, f"gave up after {row.attempts} attempts: {error}")
            return
        now = self.clock()
        self.db.execute("UPDATE outbox SET status = 'pending', next_attempt_at = ?,"
                        " last_error = ?, last_error_at = ? WHERE id = ?",
                        (now + backoff(row.attempts), error, now, row.id))

    def mark_failed(self, row: Row, error: str) -> None:
        self.db.execute("UPDATE outbox SET status = 'failed', last_error = ?, last_error_at = ?"
                        " WHERE id = ?", (error, self.clock(), row.id))

    def wake_unavailable(self) -> int:
        """Make due now the emails deferred only because the server was unreachable (it
        answers again): after an hour's outage they go in this run, not after their backoff
        of up to an hour more. Their attempts stay counted."""
        cur = self.db.execute(
            "UPDATE outbox SET next_attempt_at = ? WHERE status = 'pending' AND kind != ?"
            " AND next_attempt_at > ? AND last_error LIKE ?",
            (self.clock(), CHAT, self.clock(), UNAVAILABLE + ":%"))
        return cur.rowcount

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

    def state(self) -> OutboxState:
        """Counts per status, the oldest unsent row, the rows given up and the newest
        error; every query is answered from an index or from the few rows not sent."""
        problem = ("SELECT id, key, kind, to_addr, status, attempts, last_error AS error,"
                   " last_error_at AS at FROM outbox")
        counts = dict(self.db.execute("SELECT status, count(*) FROM outbox GROUP BY status"
                                      ).fetchall())
        oldest = self.db.execute("SELECT min(created_at) FROM outbox"
                                 " WHERE status IN ('pending', 'sending')").fetchone()[0]
        given_up = tuple(Problem(**dict(r)) for r in self.db.execute(
            f"{problem} WHERE status = 'failed' ORDER BY id"))  # noqa: S608
        last = self.db.execute(f"{problem} WHERE last_error_at IS NOT NULL"  # noqa: S608
                               " ORDER BY last_error_at DESC LIMIT 1").fetchone()
        return OutboxState(self.clock(), counts, oldest, given_up,
                           Problem(**dict(last)) if last else None)

    def write_metrics(self) -> None:
        """The state as ``jobreport_outbox.prom`` in ``metrics_dir`` (none when unset); a
        failure is logged, never raised: it must not undo a delivery."""
        if not self.metrics_dir:
            return
        try:
            reg = registry(self.state())
        except sqlite3.Error as exc:
            log.error("outbox metrics not written: %s", exc)
            return
        write_textfile(textfile_path(self.metrics_dir, TEXTFILE), reg)

    def due_count(self, chat: bool = False) -> int:
        where = f"kind {_CHANNEL[chat]} AND (status = 'sending'"
        return cast(int, self.db.execute(
            f"SELECT count(*) FROM outbox WHERE {where}"  # noqa: S608
            " OR (status = 'pending' AND next_attempt_at <= ?))",
            (CHAT, self.clock())).fetchone()[0])


def _smtp_code(exc: Exception) -> int | None:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return next(iter(exc.recipients.values()))[0] if exc.recipients else None
    return getattr(exc, "smtp_code", None)


@dataclass(frozen=True)
class Fault:
    """What one failed send means for its row and for the rest of the run."""

    error: str
    permanent: bool  # the row fails now: sending it again cannot succeed
    stop: bool = False  # the server is gone: end the run, the other rows wait for the next
    reconnect: bool = False  # the session's state is unknown: a new one for the next row


def fault(exc: Exception) -> Fault:
    """Classify an exception raised while sending one message (any exception)."""
    if isinstance(exc, Undeliverable):
        return Fault(str(exc), permanent=True)
    if isinstance(exc, smtplib.SMTPNotSupportedError):  # the message needs what it lacks
        return Fault(f"the server cannot take this message: {exc}", permanent=True)
    if isinstance(exc, UnicodeError):  # smtplib sends commands in ASCII: never will
        return Fault(f"cannot be encoded for SMTP: {exc}", permanent=True, reconnect=True)
    if isinstance(exc, (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused)):
        code = _smtp_code(exc) or 0
        gone = code == 421  # the server closes the connection
        return Fault(f"{code} {exc}", permanent=500 <= code < 600, stop=gone, reconnect=gone)
    if isinstance(exc, (OSError, smtplib.SMTPException)):  # down, timed out, disconnected
        return Fault(f"{UNAVAILABLE}: {exc}", permanent=False, stop=True, reconnect=True)
    # Anything else is a fault of ours or of this message: retried with the backoff like a
    # 4xx, then given up; the next row gets a new session.
    return Fault(f"{type(exc).__name__}: {exc}", permanent=False, reconnect=True)


def _close(sender: Sender) -> None:
    try:
        sender.close()
    except Exception as exc:  # a session in an unknown state: nothing more to say to it
        log.warning("closing the SMTP session: %s", exc)


def _record(outbox: Outbox, row: Row, f: Fault, stats: Counter[str]) -> None:
    if f.permanent:
        log.error("email %s to %s failed: %s", row.key, row.to_addr, f.error)
        outbox.mark_failed(row, f.error)
        stats["failed"] += 1
    else:
        log.warning("email %s to %s deferred: %s", row.key, row.to_addr, f.error)
        outbox.mark_retry(row, f.error)
        stats["failed" if row.attempts >= MAX_ATTEMPTS else "deferred"] += 1


def deliver_unless_busy(outbox: Outbox, connect: Callable[[], Sender]) -> Counter[str]:
    """``deliver`` under the outbox's lock, right after queueing; nothing (empty counts)
    when another process holds it: the running mailer sends what was queued."""
    try:
        with outbox.lock():
            return deliver(outbox, connect)
    except OutboxBusy:
        return Counter()


def deliver(outbox: Outbox, connect: Callable[[], Sender], progress: bool = True) -> Counter[str]:
    """Send every due row over one connection; call while holding ``outbox.lock()``.

    Returns counts of sent, deferred (will retry) and failed (given up) emails. Whatever
    one message raises is recorded on its row (``fault``) and the run goes on with the
    next; only a server that is gone (refused, timed out, 421: the row at hand deferred)
    ends the run, leaving the other rows due for the next. Writes the outbox's metrics
    at the end when it has a ``metrics_dir``.
    """
    stats: Counter[str] = Counter()
    sender: Sender | None = None
    bar = tqdm(total=outbox.due_count(), unit="email", desc="sending",
               disable=None if progress else True)
    try:
        while (row := outbox.claim_next()) is not None:
            try:
                if sender is None:
                    sender = connect()
            except Exception as exc:  # the server, the network or the login: not the row's
                _record(outbox, row, Fault(f"{UNAVAILABLE}: {exc}", permanent=False), stats)
                break
            try:
                sender.send(row.from_addr, row.to_addr, row.message)
            except Exception as exc:
                f = fault(exc)
                _record(outbox, row, f, stats)
                if f.reconnect:
                    _close(sender)
                    sender = None
                if f.stop:
                    break
                continue
            outbox.mark_sent(row)
            if not stats["sent"]:  # the server answers: what waited only for it goes now
                bar.total = (bar.total or 0) + outbox.wake_unavailable()
            stats["sent"] += 1
            bar.update()
    finally:
        bar.close()
        if sender is not None:
            _close(sender)
        outbox.write_metrics()
    return stats
