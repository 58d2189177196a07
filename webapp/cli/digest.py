"""`jobreport digest`: the weekly digest, queued and sent; options and what a run prints."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TextIO

from webapp.archive.store import Archive
from webapp.cli.arguments import user_name
from webapp.mail.digest_queue import RENDER_PROCESSES, WEEK, last_week, send_digests
from webapp.mail.outbox import Outbox
from webapp.mail.sending import smtp_connect
from webapp.renderers.digest import day
from webapp.settings import Settings


def _date(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError("use YYYY-MM-DD") from None


def add_digest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--week-starting", type=_date, metavar="YYYY-MM-DD",
                        help="the first day (UTC) of the week (default: last full week, "
                        "Monday to Sunday)")
    parser.add_argument("--user", type=user_name, action="append", default=[],
                        help="only this user (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="list who would get a digest and their totals; queue nothing")
    parser.add_argument("--no-deliver", action="store_true",
                        help="queue the digests; the next run that delivers (the sync) sends them")


def run_digest(args: argparse.Namespace, settings: Settings,
               out: TextIO = sys.stdout) -> int:
    if args.week_starting:
        since = int(args.week_starting.timestamp())
        until = int((args.week_starting + WEEK).timestamp())
    else:
        since, until = last_week(datetime.now(UTC))
    with Archive(settings.archive_url) as archive:
        outbox = Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
        try:
            run = send_digests(settings, archive, outbox, smtp_connect(settings), since, until,
                               frozenset(args.user), args.dry_run, args.no_deliver,
                               processes=1 if args.user else RENDER_PROCESSES)
        finally:
            outbox.close()
    for d in run.digests:
        out.write(f"{d.user} <{d.to_addr}>: {d.jobs} jobs, {d.cpu_hours:.2f} CPU-h, "
                  f"{d.gpu_hours:.2f} GPU-h, {d.memory_gib_hours:.2f} GiB-h unused; "
                  f"top finding {d.top_finding or 'none'}\n")
    counts = ", ".join(f"{n} {what}" for what, n in sorted(run.counts.items())) or "nothing"
    out.write(f"week {day(since)} to {day(until - 1)}: {counts}\n")
    if run.delivery:
        sent = run.delivery
        out.write(f"emails: {sent['sent']} sent, {sent['deferred']} deferred, "
                  f"{sent['failed']} failed\n")
    return 1 if run.delivery["failed"] else 0
