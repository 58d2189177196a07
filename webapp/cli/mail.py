"""`jobreport email` and `jobreport outbox`: options, and what they print."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from webapp.mail.outbox import Outbox, OutboxBusy, deliver
from webapp.mail.sending import (
    Connect,
    NoAddress,
    send_batch,
    send_one,
    smtp_connect,
)
from webapp.model import InvalidJobId, JobId, JobNotFound, SourceUnavailable
from webapp.report.service import ReportService
from webapp.settings import Settings

_LOOKBACK_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*\Z")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_lookback(text: str) -> timedelta:
    """How far back --ended-since reaches: '90' or '90s', '30m', '1h', '2d', '1w'."""
    m = _LOOKBACK_RE.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 1h, 2d)")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


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


def add_outbox_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jobreport outbox`."""
    parser.add_argument("--all", action="store_true", help="list sent emails too")
    parser.add_argument("--retry", action="store_true",
                        help="make pending and failed emails due now and deliver them")


def _email_one(args: argparse.Namespace, settings: Settings, service: ReportService,
               connect: Connect | None) -> int:
    err = sys.stderr
    try:
        job_id = JobId.parse(args.job_id)
        result = send_one(job_id, settings, service, to_addr=args.to, resend=args.resend,
                          connect=connect)
    except InvalidJobId as exc:  # a usage error
        err.write(f"jobreport email: {exc}\n")
        return 2
    except JobNotFound as exc:
        err.write(f"jobreport email: job {exc.job_id} not found\n")
        return 1
    except NoAddress as exc:
        err.write(f"jobreport email: {exc}\n")
        return 2
    out = sys.stdout
    if result.status == "already sent":
        out.write(f"job {job_id} was already sent to {result.to_addr}; "
                  "--resend sends it again\n")
    elif result.status == "queued":
        out.write(f"queued for {result.to_addr}; the mailer that is running now will send it\n")
    elif result.status == "sent":
        out.write(f"sent job {job_id} report to {result.to_addr}\n")
    else:
        out.write(f"{result.status}: {result.error}; "
                  "it stays in the outbox (see `jobreport outbox`)\n")
        return 1
    return 0


def _email_batch(args: argparse.Namespace, settings: Settings, service: ReportService,
                 connect: Connect | None) -> int:
    since = datetime.now(UTC) - parse_lookback(args.ended_since)
    result = send_batch(since, settings, service, dry_run=args.dry_run, connect=connect)
    out = sys.stdout
    if result.busy:
        out.write(f"{result.busy}: another batch is running, nothing done\n")
        return 0
    for job_id, to_addr, findings in result.would_send:
        out.write(f"would send job {job_id} to {to_addr} ({findings} findings)\n")
    c, d = result.counts, result.delivery
    queued = f"{c['would send']} would be sent" if args.dry_run else f"{c['queued']} queued"
    out.write(f"{result.jobs} ended jobs: {queued}, {c['known']} already "
              f"queued, {c['skipped']} skipped, {c['errors']} errors; "
              f"{d['sent']} sent, {d['deferred']} deferred, {d['failed']} failed\n")
    return 1 if result.failed else 0


def run_email(args: argparse.Namespace, settings: Settings, service: ReportService | None = None,
              connect: Connect | None = None) -> int:
    """`jobreport email JOBID [--to ADDR] [--resend]` or `--ended-since DURATION`."""
    if bool(args.job_id) == bool(args.ended_since):
        sys.stderr.write("jobreport email: give either JOBID or --ended-since DURATION\n")
        return 2
    if args.ended_since:
        try:
            parse_lookback(args.ended_since)
        except ValueError as exc:
            sys.stderr.write(f"jobreport email: {exc}\n")
            return 2
    service = service or ReportService(settings)
    try:
        if args.job_id:
            return _email_one(args, settings, service, connect)
        return _email_batch(args, settings, service, connect)
    except SourceUnavailable as exc:
        sys.stderr.write(f"jobreport email: {exc}\n")
        return 1


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def run_outbox(args: argparse.Namespace, settings: Settings,
               connect: Connect | None = None) -> int:
    """`jobreport outbox`: list pending, sending and failed emails; --retry delivers now."""
    outbox = Outbox(settings.outbox)
    out = sys.stdout
    try:
        if args.retry:
            try:
                with outbox.lock():
                    count = outbox.retry_now()
                    stats = deliver(outbox, connect or smtp_connect(settings))
            except OutboxBusy as exc:
                out.write(f"{exc}; try again when it is done\n")
                return 1
            out.write(f"retried {count}: {stats['sent']} sent, {stats['deferred']} deferred,"
                      f" {stats['failed']} failed\n")
        statuses = ("pending", "sending", "failed", "sent") if args.all else (
            "pending", "sending", "failed")
        rows = outbox.rows(statuses)
        out.write(f"{'ID':>5}  {'STATUS':8} {'TRIES':>5}  {'NEXT ATTEMPT (UTC)':19}  "
                  f"{'JOB':12} {'TO':30} LAST ERROR\n")
        for r in rows:
            nxt = _when(r.sent_at) if r.status == "sent" else _when(r.next_attempt_at)
            out.write(f"{r.id:>5}  {r.status:8} {r.attempts:>5}  {nxt:19}  {r.job_id:12} "
                      f"{r.to_addr:30} {(r.last_error or '')[:80]}\n")
        out.write(f"{len(rows)} email(s) listed from {settings.outbox}\n")
        return 1 if any(r.status == "failed" for r in rows) else 0
    finally:
        outbox.close()
