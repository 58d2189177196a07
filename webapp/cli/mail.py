"""`jobreport email` and `jobreport outbox`: options, and what they print."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from webapp.cli.outbox_status import status_json, status_text
from webapp.mail.by_hand import NoAddress, send_one
from webapp.mail.chat import ChatMapUnsafe, deliver_chat
from webapp.mail.outbox import Outbox, OutboxBusy, deliver
from webapp.mail.sending import Connect, smtp_connect
from webapp.model import InvalidJobId, JobId, JobNotFound, SourceUnavailable
from webapp.report.service import ReportService
from webapp.settings import Settings


def add_email_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jobreport email`."""
    parser.add_argument("job_id", nargs="?", metavar="JOBID",
                        help="send this job's report (to the owner: by the sync's policy, and "
                             "never when the sync has sent it)")
    parser.add_argument("--to", metavar="ADDR",
                        help="recipient (default: the job's owner); another address than the "
                             "owner's gets it whatever the owner's opt-out or daily cap")
    parser.add_argument("--resend", action="store_true",
                        help="send again even if this report already went to this address")
    # Gone: `jobreport sync` emails ended jobs. Kept only to say so to an old timer.
    parser.add_argument("--ended-since", metavar="DURATION", help=argparse.SUPPRESS)


def add_outbox_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jobreport outbox`."""
    parser.add_argument("--all", action="store_true", help="list sent emails too")
    parser.add_argument("--retry", action="store_true",
                        help="make pending and failed emails due now and deliver them")
    parser.add_argument("--status", action="store_true",
                        help="print the counts per status, the oldest unsent message, the last "
                             "error and the messages given up, instead of the list")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="the --status as text or JSON (json implies --status)")


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
    except ChatMapUnsafe as exc:  # a configuration error: nothing was queued
        err.write(f"jobreport email: {exc}\n")
        return 1
    out = sys.stdout
    if result.status == "already sent":
        out.write(f"job {job_id} was already sent to {result.to_addr}; "
                  "--resend sends it again\n")
    elif result.status == "queued":
        out.write(f"queued for {result.to_addr}; the run that holds the outbox now sends it\n")
    elif result.status == "sent":
        out.write(f"sent job {job_id} report to {result.to_addr}\n")
    elif not result.status.startswith("not sent"):  # the policy's choice, not a failure
        out.write(f"job {job_id} not emailed to {result.to_addr}: {result.status}\n")
    else:
        out.write(f"{result.status}: {result.error}; "
                  "it stays in the outbox (see `jobreport outbox`)\n")
        return 1
    return 0


def run_email(args: argparse.Namespace, settings: Settings, service: ReportService | None = None,
              connect: Connect | None = None) -> int:
    """`jobreport email JOBID [--to ADDR] [--resend]`."""
    if args.ended_since:
        sys.stderr.write("jobreport email: --ended-since is gone: `jobreport sync` (its "
                         "timer) emails the reports of ended jobs; `jobreport email JOBID` "
                         "sends one\n")
        return 2
    if not args.job_id:
        sys.stderr.write("jobreport email: give a JOBID\n")
        return 2
    service = service or ReportService(settings)
    try:
        return _email_one(args, settings, service, connect)
    except SourceUnavailable as exc:
        sys.stderr.write(f"jobreport email: {exc}\n")
        return 1


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def run_outbox(args: argparse.Namespace, settings: Settings,
               connect: Connect | None = None) -> int:
    """`jobreport outbox`: list pending, sending and failed emails; --retry delivers now;
    --status the state (and its metrics file). Exit 1 when a message was given up."""
    outbox = Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
    out = sys.stdout
    try:
        if args.retry:
            try:
                with outbox.lock():
                    count = outbox.retry_now()
                    stats = deliver(outbox, connect or smtp_connect(settings))
                    chat = deliver_chat(outbox)
            except OutboxBusy as exc:
                out.write(f"{exc}; try again when it is done\n")
                return 1
            out.write(f"retried {count}: {stats['sent']} sent, {stats['deferred']} deferred,"
                      f" {stats['failed']} failed\n")
            if chat:
                out.write(f"chat notices: {chat['sent']} sent, {chat['deferred']} deferred,"
                          f" {chat['failed']} failed\n")
        if args.status or args.format == "json":
            state = outbox.state()
            outbox.write_metrics()
            render = status_json if args.format == "json" else status_text
            out.write(render(state, settings.outbox))
            return 1 if state.given_up else 0
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
