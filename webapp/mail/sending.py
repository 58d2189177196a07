"""Report emails: one report to one address, or every recently ended job's owner.

Every email goes through the durable outbox (``webapp.mail.outbox``): recorded first,
marked sent only after the SMTP server accepted it. The batch holds the outbox lock for
its whole run, so two never overlap. These functions return what happened; the command
line says it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from email.utils import make_msgid

from tqdm import tqdm

from webapp.archive.opt_out_link import opt_out_url
from webapp.mail.outbox import Outbox, OutboxBusy, Sender, deliver
from webapp.mail.policy import owner_address, read_opt_out, skip_reason, usable_address
from webapp.mail.smtp import SmtpSender
from webapp.model import InvalidJobId, JobId, JobNotFound, JobReport, SourceUnavailable
from webapp.renderers import email
from webapp.report.service import ReportService
from webapp.settings import Settings

log = logging.getLogger(__name__)

Connect = Callable[[], Sender]


class NoAddress(ValueError):
    """Neither --to nor the owner's mapping gives a usable address."""


@dataclass(frozen=True)
class SendResult:
    """What became of one report email: ``sent``, ``already sent``, ``queued`` (a running
    mailer holds the outbox and will send it) or ``not sent`` (deferred or failed)."""

    job_id: str
    to_addr: str
    status: str
    error: str | None = None


@dataclass
class BatchResult:
    """Counts of a batch run; ``would_send`` lists (job, address, findings) on a dry run."""

    jobs: int = 0
    counts: Counter = field(default_factory=Counter)
    delivery: Counter = field(default_factory=Counter)
    would_send: list[tuple[str, str, int]] = field(default_factory=list)
    busy: str | None = None  # why nothing was done: another batch holds the outbox

    @property
    def failed(self) -> bool:
        return bool(self.counts["errors"] or self.delivery["failed"])


def message(report: JobReport, to_addr: str, settings: Settings) -> EmailMessage:
    domain = settings.mail_from.rpartition("@")[2] or None
    return email.render(report, to_addr, settings.mail_from, message_id=make_msgid(domain=domain),
                        unsubscribe_url=owner_opt_out_url(settings, report.cluster, report.user),
                        report_url=report_page_url(settings, report))


def report_page_url(settings: Settings, report: JobReport) -> str:
    """The report's web page as its owner reaches it (``/c/<cluster>/...`` with several
    clusters served, as ``views.job_url`` builds it)."""
    path = (f"/c/{report.cluster}/jobs/{report.job_id}" if settings.multi_cluster
            else f"/jobs/{report.job_id}")
    return settings.public_url + path


def owner_opt_out_url(settings: Settings, cluster: str, user: str | None) -> str | None:
    """The owner's one-click opt-out link (None without a user or a secret key to sign)."""
    if not user or not settings.secret_key:
        return None
    return opt_out_url(settings.public_url, settings.secret_key, cluster, user)


def smtp_connect(settings: Settings) -> Connect:
    return lambda: SmtpSender(settings)


def _deliver_locked(outbox: Outbox, connect: Connect) -> Counter | None:
    try:
        with outbox.lock():
            return deliver(outbox, connect)
    except OutboxBusy:
        return None


def send_one(job_id: JobId, settings: Settings, service: ReportService, *,
             to_addr: str | None = None, resend: bool = False,
             connect: Connect | None = None) -> SendResult:
    """Build one job's report and send it to ``to_addr`` (default: the owner).

    Raises JobNotFound, SourceUnavailable, or NoAddress."""
    report = service.build(job_id)
    to_addr = to_addr or owner_address(report, settings)
    if not usable_address(to_addr):
        raise NoAddress(f"no usable address for job {job_id} (user {report.user!r}); "
                        "pass --to ADDR")
    outbox = Outbox(settings.outbox)
    try:
        key = f"{job_id}:manual:{to_addr}"
        row = outbox.get(key)
        if row is not None and row.status == "sent" and not resend:
            return SendResult(str(job_id), to_addr, "already sent")
        if row is None:
            outbox.enqueue(key, str(job_id), "manual", message(report, to_addr, settings))
        elif resend or row.status == "failed":
            outbox.requeue(key, message(report, to_addr, settings))
        if _deliver_locked(outbox, connect or smtp_connect(settings)) is None:
            return SendResult(str(job_id), to_addr, "queued")
        row = outbox.get(key)
        if row.status == "sent":
            return SendResult(str(job_id), to_addr, "sent")
        return SendResult(str(job_id), to_addr, f"not sent ({row.status})", row.last_error)
    finally:
        outbox.close()


def _queue_job(job_id: str, key: str, service: ReportService, settings: Settings,
               opt_out: frozenset[str], outbox: Outbox, result: BatchResult,
               dry_run: bool) -> str:
    """Build, apply the policy, render and enqueue one ended job; the counter to bump."""
    report = service.build(job_id)
    reason = skip_reason(report, settings, opt_out)
    to_addr = owner_address(report, settings) if reason is None else None
    if reason is None and to_addr is None:
        reason = f"no address for user {report.user!r}"
    if reason:
        log.info("job %s skipped: %s", job_id, reason)
        return "skipped"
    if dry_run:
        result.would_send.append((job_id, to_addr, len(report.findings)))
        return "would send"
    outbox.enqueue(key, job_id, "ended", message(report, to_addr, settings))
    return "queued"


def send_batch(since: datetime, settings: Settings, service: ReportService, *,
               dry_run: bool = False, connect: Connect | None = None) -> BatchResult:
    """Queue a report for every job that ended at or after ``since``, then deliver."""
    opt_out = read_opt_out(settings.mail_opt_out)
    outbox = Outbox(settings.outbox)
    result = BatchResult()
    try:
        with outbox.lock():
            job_ids = service.ended_jobs(since)
            result.jobs = len(job_ids)
            for job_id in tqdm(job_ids, unit="job", desc="reports", disable=None):
                key = f"{job_id}:ended"
                if outbox.get(key) is not None:
                    result.counts["known"] += 1
                    continue
                try:
                    outcome = _queue_job(job_id, key, service, settings, opt_out, outbox,
                                         result, dry_run)
                except (InvalidJobId, JobNotFound, SourceUnavailable) as exc:
                    log.error("job %s: %s", job_id, exc)
                    outcome = "errors"
                except Exception:  # one broken report must not stop everybody else's
                    log.exception("job %s: report or email failed", job_id)
                    outcome = "errors"
                result.counts[outcome] += 1
            if not dry_run:
                result.delivery = deliver(outbox, connect or smtp_connect(settings))
    except OutboxBusy as exc:
        result.busy = str(exc)
    finally:
        outbox.close()
    return result
