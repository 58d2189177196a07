"""`jobreport account-report`: one account's report over a month or a period, printed
(text, JSON or PDF); `--email` queues it to the account's coordinators instead."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TextIO

from webapp.archive.account_sums import AccountSums
from webapp.archive.store import Archive
from webapp.mail.account_queue import last_month, month_period, send_account_reports
from webapp.mail.outbox import Outbox
from webapp.mail.sending import smtp_connect
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource
from webapp.sources.coordinators import Coordinators
from webapp.staff.account_render import day, render_json, render_pdf, render_text
from webapp.staff.account_report import Recent, build_account_report

ACCOUNTING_LIMIT = 10_000_000  # the period's whole job list, not a page


def _month(text: str) -> tuple[int, int]:
    try:
        return month_period(datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC))
    except ValueError:
        raise argparse.ArgumentTypeError("use YYYY-MM") from None


def _when(text: str) -> int:
    if text == "now":
        return int(datetime.now(UTC).timestamp())
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("use YYYY-MM-DD[THH:MM[:SS]] or now") from None
    return int((t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp())


def add_account_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--account", action="append", default=[],
                        help="the account (repeatable; with --email: default every "
                        "account with a coordinator)")
    parser.add_argument("--month", type=_month, metavar="YYYY-MM",
                        help="the calendar month, UTC (default: the last full month)")
    parser.add_argument("--since", type=_when, help="start of the period (UTC), instead "
                        "of --month")
    parser.add_argument("--until", type=_when, help="end of the period (UTC, or now)")
    parser.add_argument("--format", choices=("text", "json", "pdf"), default="text")
    parser.add_argument("--email", action="store_true",
                        help="queue each account's report (text and PDF) to its "
                        "coordinators through the outbox, once per account and period")
    parser.add_argument("--no-deliver", action="store_true",
                        help="with --email: queue only; the next delivering run sends")


def _period(args: argparse.Namespace) -> tuple[int, int]:
    if args.since is not None or args.until is not None:
        now = int(datetime.now(UTC).timestamp())
        until = args.until if args.until is not None else now
        if args.since is None or args.since >= until:
            raise ValueError("give --since before --until")
        return args.since, until
    return args.month or last_month(datetime.now(UTC))


def accounting_recent(settings: Settings) -> Recent | None:
    """The accounting view's account job list, when the settings name the view."""
    if not settings.db_url:
        return None
    source = AccountingSource(settings.db_url, settings.cluster)
    return lambda since, account: source.recent(since, account=account,
                                                limit=ACCOUNTING_LIMIT)


def run_account_report(args: argparse.Namespace, settings: Settings,
                       out: TextIO = sys.stdout) -> int:
    since, until = _period(args)
    coordinators = Coordinators(settings.sacctmgr)
    with Archive(settings.archive_url) as archive:
        sums = AccountSums(archive.db)
        recent = accounting_recent(settings)
        if args.email:
            outbox = Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
            try:
                run = send_account_reports(settings, sums, recent, coordinators, outbox,
                                           smtp_connect(settings), since, until,
                                           args.account, no_deliver=args.no_deliver)
            finally:
                outbox.close()
            counts = ", ".join(f"{n} {what}" for what, n in sorted(run.counts.items()))
            out.write(f"account reports {day(since)} to {day(until)}: {counts or 'nothing'}\n")
            return 1 if run.delivery["failed"] else 0
        if not args.account:
            raise ValueError("give --account (or --email for every coordinated account)")
        for account in args.account:
            r = build_account_report(sums, settings.cluster, account, since, until, recent,
                                     settings.carbon_intensity, settings.carbon_country,
                                     coordinators.of(account))
            if args.format == "pdf":
                out.flush()
                out.buffer.write(render_pdf(r))  # bytes: to a file or a pipe
            else:
                out.write(render_json(r) + "\n" if args.format == "json" else render_text(r))
    return 0
