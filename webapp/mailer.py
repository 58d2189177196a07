"""`jobreport email`: one report to one address, or every recently ended job's owner.

Every email goes through the durable outbox (webapp/outbox.py): recorded first, marked
sent only after the SMTP server accepted it. The batch (`--ended-since`, for cron or the
systemd timer) holds the outbox lock for its whole run, so two never overlap.
"""

from __future__ import annotations

import argparse
import logging
import re
import smtplib
import ssl
import sys
from datetime import UTC, datetime, timedelta
from email.utils import make_msgid
from pathlib import Path

from tqdm import tqdm

from webapp.model import InvalidJobId, JobId, JobNotFound, JobReport, SourceUnavailable
from webapp.outbox import Outbox, OutboxBusy, deliver
from webapp.settings import Settings

log = logging.getLogger(__name__)

SMTP_TIMEOUT = 30.0
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")  # safe inside an address
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class SmtpSender:
    """One SMTP connection (STARTTLS and login when configured)."""

    def __init__(self, settings: Settings) -> None:
        self.smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=SMTP_TIMEOUT)
        try:
            self.smtp.ehlo()
            if settings.smtp_starttls:
                self.smtp.starttls(context=ssl.create_default_context())
                self.smtp.ehlo()
            if settings.smtp_user:
                self.smtp.login(settings.smtp_user, settings.smtp_password)
        except BaseException:
            self.smtp.close()
            raise

    def send(self, from_addr: str, to_addr: str, data: bytes) -> None:
        """Returns only once the server has accepted the message (250 after DATA)."""
        self.smtp.sendmail(from_addr, [to_addr], data)

    def close(self) -> None:
        try:
            self.smtp.quit()
        except (OSError, smtplib.SMTPException):
            self.smtp.close()


def parse_duration(text: str) -> timedelta:
    """'90' or '90s', '30m', '1h', '2d', '1w'."""
    m = _DURATION_RE.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 1h, 2d)")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def _read_pairs(path: str) -> dict[str, str]:
    pairs = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2:
            pairs[parts[0]] = parts[1]
    return pairs


def read_opt_out(path: str) -> frozenset[str]:
    """User names, one per line ('#' comments allowed); an empty path means nobody."""
    if not path:
        return frozenset()
    return frozenset(w for line in Path(path).read_text().splitlines()
                     for w in line.split("#", 1)[0].split()[:1])


def owner_address(report: JobReport, settings: Settings) -> str | None:
    """JOBREPORT_MAIL_MAP's line for the user, else JOBREPORT_MAIL_TO with {user} filled.

    The template is only used for plain user names, so a hostile name cannot add
    recipients or headers."""
    user = report.user
    if not user:
        return None
    if settings.mail_map:
        mapped = _read_pairs(settings.mail_map).get(user)
        if mapped:
            return mapped
    if not USER_RE.match(user):
        log.warning("user name %r of job %s is not usable in an address", user, report.job_id)
        return None
    return settings.mail_to.replace("{user}", user)


def skip_reason(report: JobReport, settings: Settings, opt_out: frozenset[str]) -> str | None:
    """Why the batch sends nothing for this job, or None to send."""
    if report.running:
        return "still running"
    if report.user in opt_out:
        return "user opted out"
    if (report.elapsed_seconds or 0.0) < settings.mail_min_runtime:
        return f"ran under {settings.mail_min_runtime:.0f} s"
    if not report.findings:
        return "no findings"
    return None


def add_email_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jobreport email`."""
    parser.add_argument("job_id", nargs="?", metavar="JOBID", help="send this job's report")
    parser.add_argument("--to", metavar="ADDR", help="recipient (default: the job's owner)")
    parser.add_argument("--resend", action="store_true",
                        help="send again even if this report already went to this address")
    parser.add_argument("--ended-since", metavar="DURATION",
                        help="batch: every job that ended in the last DURATION (30m, 1h, 2d)")
    parser.add_argument("--dry-run", action="store_true",
                        help="batch: print who would get what, send nothing")


def _message(report: JobReport, to_addr: str, settings: Settings):
    from webapp.renderers import email

    domain = settings.mail_from.rpartition("@")[2] or None
    return email.render(report, to_addr, settings.mail_from, message_id=make_msgid(domain=domain))


def _deliver_locked(outbox: Outbox, settings: Settings, connect) -> dict | None:
    try:
        with outbox.lock():
            return deliver(outbox, connect or (lambda: SmtpSender(settings)))
    except OutboxBusy:
        return None


def send_one(args: argparse.Namespace, settings: Settings, service, connect=None) -> int:
    """`jobreport email JOBID [--to ADDR] [--resend]`."""
    out = sys.stdout
    try:
        job_id = str(JobId.parse(args.job_id))
        report = service.build(job_id)
    except InvalidJobId as exc:  # a usage error
        sys.stderr.write(f"jobreport email: {exc}\n")
        return 2
    except JobNotFound as exc:
        sys.stderr.write(f"jobreport email: job {exc.job_id} not found\n")
        return 1
    to_addr = args.to or owner_address(report, settings)
    if not to_addr or "@" not in to_addr or re.search(r"[\s,;<>]", to_addr):
        sys.stderr.write(f"jobreport email: no usable address for job {job_id} "
                         f"(user {report.user!r}); pass --to ADDR\n")
        return 2
    outbox = Outbox(settings.outbox)
    try:
        key = f"{job_id}:manual:{to_addr}"
        row = outbox.get(key)
        if row is not None and row.status == "sent" and not args.resend:
            out.write(f"job {job_id} was already sent to {to_addr}; --resend sends it again\n")
            return 0
        if row is None:
            outbox.enqueue(key, job_id, "manual", _message(report, to_addr, settings))
        elif args.resend or row.status == "failed":
            outbox.requeue(key, _message(report, to_addr, settings))
        if _deliver_locked(outbox, settings, connect) is None:
            out.write(f"queued for {to_addr}; the mailer that is running now will send it\n")
            return 0
        row = outbox.get(key)
        if row.status == "sent":
            out.write(f"sent job {job_id} report to {to_addr}\n")
            return 0
        out.write(f"not sent yet ({row.status}): {row.last_error}; "
                  "it stays in the outbox (see `jobreport outbox`)\n")
        return 1
    finally:
        outbox.close()


def _queue_job(job_id: str, key: str, service, settings: Settings, opt_out: frozenset[str],
               outbox: Outbox, dry_run: bool) -> str:
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
        sys.stdout.write(f"would send job {job_id} to {to_addr} "
                         f"({len(report.findings)} findings)\n")
        return "would send"
    outbox.enqueue(key, job_id, "ended", _message(report, to_addr, settings))
    return "queued"


def send_batch(args: argparse.Namespace, settings: Settings, service, connect=None) -> int:
    """`jobreport email --ended-since DURATION [--dry-run]`."""
    out = sys.stdout
    since = datetime.now(UTC) - parse_duration(args.ended_since)
    opt_out = read_opt_out(settings.mail_opt_out)
    outbox = Outbox(settings.outbox)
    counts = {"queued": 0, "would send": 0, "known": 0, "skipped": 0, "errors": 0}
    try:
        with outbox.lock():
            job_ids = service.ended_jobs(since)
            for job_id in tqdm(job_ids, unit="job", desc="reports", disable=None):
                key = f"{job_id}:ended"
                if outbox.get(key) is not None:
                    counts["known"] += 1
                    continue
                try:
                    outcome = _queue_job(job_id, key, service, settings, opt_out, outbox,
                                         args.dry_run)
                except (InvalidJobId, JobNotFound, SourceUnavailable) as exc:
                    log.error("job %s: %s", job_id, exc)
                    outcome = "errors"
                except Exception:  # one broken report must not stop everybody else's
                    log.exception("job %s: report or email failed", job_id)
                    outcome = "errors"
                counts[outcome] += 1
            stats = {} if args.dry_run else deliver(
                outbox, connect or (lambda: SmtpSender(settings)))
    except OutboxBusy as exc:
        out.write(f"{exc}: another batch is running, nothing done\n")
        return 0
    finally:
        outbox.close()
    queued = f"{counts['would send']} would be sent" if args.dry_run else \
        f"{counts['queued']} queued"
    out.write(f"{len(job_ids)} ended jobs: {queued}, {counts['known']} already "
              f"queued, {counts['skipped']} skipped, {counts['errors']} errors; "
              f"{stats.get('sent', 0)} sent, {stats.get('deferred', 0)} deferred, "
              f"{stats.get('failed', 0)} failed\n")
    return 1 if counts["errors"] or stats.get("failed") else 0


def run_email(args: argparse.Namespace, settings: Settings, service=None, connect=None) -> int:
    """Entry point of `jobreport email` (the report service is built unless given)."""
    if bool(args.job_id) == bool(args.ended_since):
        sys.stderr.write("jobreport email: give either JOBID or --ended-since DURATION\n")
        return 2
    if args.ended_since:
        try:
            parse_duration(args.ended_since)
        except ValueError as exc:
            sys.stderr.write(f"jobreport email: {exc}\n")
            return 2
    if service is None:
        from webapp.build import ReportService

        service = ReportService(settings)
    try:
        if args.job_id:
            return send_one(args, settings, service, connect)
        return send_batch(args, settings, service, connect)
    except SourceUnavailable as exc:
        sys.stderr.write(f"jobreport email: {exc}\n")
        return 1
