"""`jobreport staff-report`: options, and what a run prints."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime

from jobreport_common.settings import flag_type
from webapp.mail.staff import send_staff_report
from webapp.settings import Settings
from webapp.staff.render import render_json, render_text
from webapp.staff.service import record_window, staff_report
from webapp.thresholds import STAFF_DAYS


def _until(text: str) -> float:
    try:
        return float(text) if text.replace(".", "", 1).isdigit() else \
            datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError("use Unix seconds or an ISO date/time") from None


def add_staff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--days", type=flag_type(STAFF_DAYS, "--days"), metavar="N",
                        help="window length in days (default: the settings block, 7)")
    parser.add_argument("--until", type=_until, metavar="TIME",
                        help="end of the window (Unix seconds or ISO time; default now)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    parser.add_argument("--record", action="store_true",
                        help="first store the window's jobs' figures in the archive (the "
                        "sync stores each job's as it archives it: for older jobs)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-archive", dest="from_archive", action="store_true",
                        default=None,
                        help="rank the jobs recorded in the archive, summed by the database "
                        "(large sites: nothing read into memory); the default when the "
                        "archive holds the window (synced to its end, from its start)")
    source.add_argument("--from-sacct", dest="from_archive", action="store_false",
                        help="read the window's jobs from sacct and Prometheus into memory "
                        "(the default when the archive does not hold the window)")
    parser.add_argument("--email", action="store_true",
                        help="also email it to JOBREPORT_STAFF_MAIL_TO through the outbox")


def run_staff_report(args: argparse.Namespace, settings: Settings) -> int:
    if args.record:
        until = time.time() if args.until is None else args.until
        days = args.days if args.days is not None else settings.staff_report.days
        n = record_window(settings, until - days * 86400, until)
        print(f"recorded {n} jobs in the archive", file=sys.stderr)
    report = staff_report(settings, days=args.days, until=args.until,
                          from_archive=args.from_archive)
    out = render_json(report) if args.format == "json" else render_text(report)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(out + "\n")
    else:
        sys.stdout.write(out + "\n")
    if args.email:
        queued, d = send_staff_report(report, settings)
        print(f"staff emails: {queued} queued, {d['sent']} sent, {d['deferred']} deferred, "
              f"{d['failed']} failed", file=sys.stderr)
        return 1 if d["failed"] else 0
    return 0
