"""`jobreport email JOBID`: one job's report, sent by hand.

To the owner it takes the sync's path (``webapp.mail.owner``): the same outbox key, so a
job the sync emailed is not emailed again (and the sync finds this one queued), and the
same opt-outs and daily cap. There is no override: an opt-out is the user's own choice.
``--to`` another address sends to that address whatever the owner chose: a person named
it (staff sending themselves a copy), and it is keyed apart from the owner's email.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from webapp.archive.mail_state import MailState
from webapp.archive.store import Archive
from webapp.mail.chat import Notify, apprise_notify, deliver_chat
from webapp.mail.outbox import Outbox, OutboxBusy, deliver
from webapp.mail.owner import (
    ALREADY_QUEUED,
    QUEUED,
    email_key,
    file_opt_outs,
    queue_owner_email,
    submit_seconds,
)
from webapp.mail.policy import BadAddress, checked_address, mapped_address
from webapp.mail.sending import Connect, message, smtp_connect
from webapp.model import JobId, JobReport
from webapp.report.service import ReportService
from webapp.settings import Settings


class NoAddress(ValueError):
    """Neither --to nor the owner's mapping gives a usable address (the message names the
    address and why)."""


@dataclass(frozen=True)
class SendResult:
    """What became of one report email: ``sent``, ``already sent``, ``queued`` (a running
    mailer holds the outbox and will send it), ``not sent (<status>)`` (deferred or
    failed), or the policy's ``skipped: <why>`` / ``folded into digest``."""

    job_id: str
    to_addr: str
    status: str
    error: str | None = None


def _deliver_locked(outbox: Outbox, connect: Connect, notify: Notify) -> Counter[str] | None:
    """Deliver the due emails, then the chat notices (the owner's among them); the email
    counts, or None when another process holds the outbox (it sends ours too)."""
    try:
        with outbox.lock():
            stats = deliver(outbox, connect)
            deliver_chat(outbox, notify)
            return stats
    except OutboxBusy:
        return None


def _queue_for_owner(report: JobReport, submit: int, settings: Settings, outbox: Outbox) -> str:
    with Archive(settings.archive_url) as archive:
        return queue_owner_email(report, report.job_id, submit, settings,
                                 MailState(archive.db, archive.clock), outbox,
                                 file_opt_outs(settings))


def send_one(job_id: JobId, settings: Settings, service: ReportService, *,
             to_addr: str | None = None, resend: bool = False,
             connect: Connect | None = None,
             notify: Notify = apprise_notify) -> SendResult:
    """Build one job's report and send it to ``to_addr`` (default: the owner, by policy).

    Raises JobNotFound, SourceUnavailable, or NoAddress."""
    report = service.build(job_id)
    try:  # refused here, naming it: never queued to fail later
        if to_addr:
            checked_address(to_addr, settings.smtp_utf8, "--to")
    except BadAddress as exc:
        raise NoAddress(str(exc)) from None
    try:
        owner = mapped_address(report, settings)
    except BadAddress as exc:
        if not to_addr:
            raise NoAddress(f"{exc}; pass --to ADDR") from None
        owner = None  # a copy to another address does not need the owner's
    to_addr = to_addr or owner
    if not to_addr:
        raise NoAddress(f"no usable address for job {job_id} (user {report.user!r}); "
                        "pass --to ADDR")
    submit = submit_seconds(report)
    outbox = Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
    try:
        if to_addr == owner:
            key = email_key(settings.cluster, report.job_id, submit)
            outcome = _queue_for_owner(report, submit, settings, outbox)
            if outcome not in (QUEUED, ALREADY_QUEUED):
                return SendResult(str(job_id), to_addr, outcome)
        else:
            key = f"{settings.cluster}:{report.job_id}:{submit}:manual:{to_addr}"
            if outbox.get(key) is None:
                outbox.enqueue(key, report.job_id, "manual", message(report, to_addr, settings))
        row = outbox.get(key)
        assert row is not None  # queued above, or before
        if row.status == "sent" and not resend:
            return SendResult(str(job_id), to_addr, "already sent")
        if row.status == "failed" or (resend and row.status == "sent"):
            outbox.requeue(key, message(report, to_addr, settings))
        if _deliver_locked(outbox, connect or smtp_connect(settings), notify) is None:
            return SendResult(str(job_id), to_addr, "queued")
        row = outbox.get(key)
        assert row is not None  # sending keeps the row
        if row.status == "sent":
            return SendResult(str(job_id), to_addr, "sent")
        return SendResult(str(job_id), to_addr, f"not sent ({row.status})", row.last_error)
    finally:
        outbox.close()
