"""The one policy path of a job's report email to its owner. The sync's email step and
`jobreport email JOBID` both queue through ``queue_owner_email``, under one outbox key per
(cluster, job id, submit time): whichever comes first queues it, the other finds it, so a
job's owner gets its report once. Opt-outs and the daily cap apply to both alike, and to
the chat notices (``webapp.mail.chat``) queued beside the email under keys of their own."""

from __future__ import annotations

import time

from webapp.archive.mail_state import FOLDED, REPORT, MailState
from webapp.mail.chat import queue_owner_chat
from webapp.mail.outbox import Outbox
from webapp.mail.policy import BadAddress, mapped_address, read_opt_out, skip_reason
from webapp.mail.sending import message
from webapp.model import JobReport
from webapp.settings import Settings

QUEUED = "queued"
ALREADY_QUEUED = "already queued"
FOLDED_INTO_DIGEST = "folded into digest"


def email_key(cluster: str, job_id: str, submit_time: int) -> str:
    """The outbox key of a job's report email to its owner (ids repeat after a reset)."""
    return f"{cluster}:{job_id}:{submit_time}:ended"


def submit_seconds(report: JobReport) -> int:
    """The submit time in the key: Unix seconds, 0 when accounting has none (as the sync)."""
    return int(report.submit_time.timestamp()) if report.submit_time else 0


def file_opt_outs(settings: Settings) -> frozenset[str]:
    """JOBREPORT_MAIL_OPT_OUT, the list staff keep (read once per run)."""
    return read_opt_out(settings.mail_opt_out)


def within_cap(settings: Settings, mail: MailState, job_id: str, submit_time: int,
               user: str) -> bool:
    """Decide once per job whether it is emailed or, past the user's daily cap, left for
    the weekly digest (a later run, or a send by hand, keeps the first decision)."""
    decided = mail.decision(settings.cluster, job_id, submit_time)
    if decided is None:
        day = time.strftime("%Y-%m-%d", time.gmtime(mail.clock()))
        cap = settings.mail_daily_cap
        full = cap > 0 and mail.sent_on(settings.cluster, user, day) >= cap
        decided = FOLDED if full else REPORT
        mail.decide(settings.cluster, job_id, submit_time, user, day, decided)
    return decided == REPORT


def queue_owner_email(report: JobReport, job_id: str, submit_time: int, settings: Settings,
                      mail: MailState, outbox: Outbox, file_opt_out: frozenset[str]) -> str:
    """Apply the policy to one ended job and queue its email: the outcome, one of
    ``queued``, ``already queued``, ``folded into digest`` or ``skipped: <why>``."""
    key = email_key(settings.cluster, job_id, submit_time)
    # Opt-outs: the file staff keep, and the choices made by link or `jobreport opt-out`.
    opt_out = file_opt_out | mail.opted_out(settings.cluster).keys()
    reason = skip_reason(report, settings, opt_out)
    to_addr = None
    if reason is None:
        try:  # an address that cannot be sent to never enters the outbox: named here
            to_addr = mapped_address(report, settings)
        except BadAddress as exc:
            reason = str(exc)
    if reason is None and to_addr is None:
        reason = "no address"
    if reason:
        return f"skipped: {reason}"
    assert to_addr is not None  # else the reason is "no address"
    if not within_cap(settings, mail, job_id, submit_time, report.user or ""):
        return FOLDED_INTO_DIGEST
    queue_owner_chat(report, job_id, submit_time, settings, outbox)  # each URL's row once
    if outbox.get(key) is not None:  # queued before: no PDF to render again
        return ALREADY_QUEUED
    queued = outbox.enqueue(key, job_id, "ended", message(report, to_addr, settings))
    return QUEUED if queued else ALREADY_QUEUED
