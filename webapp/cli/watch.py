"""`jobreport watch`: options, and what a run prints."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from webapp.model import JobId
from webapp.settings import Settings
from webapp.watch.run import Watcher, WatchResult


def _job_id(text: str) -> str:
    return str(JobId.parse(text))


def add_watch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print the alerts and cancellations a run would make; "
                        "send, record and cancel nothing")
    parser.add_argument("-j", "--jobid", type=_job_id, action="append", default=[],
                        metavar="JOBID", help="watch only this running job (repeatable)")
    parser.add_argument("--no-deliver", action="store_true",
                        help="queue emails in the outbox; the next run that delivers sends them")


def print_result(result: WatchResult, out: TextIO = sys.stdout) -> None:
    if result.busy:
        out.write(f"{result.busy}: another mailer or watch is running, nothing done\n")
        return
    for alert, outcome in result.alerts:
        job = alert.job
        out.write(f"job {job.job_id} ({job.user}, {job.account}, {job.partition}) "
                  f"{alert.rule}: {outcome}\n")
    for d in result.decisions:
        out.write(f"enforce: job {d.alert.job.job_id} rule {d.alert.rule}: {d.outcome}\n")
    for error in result.errors:
        out.write(f"error: {error}\n")
    if result.delivery:
        sent = result.delivery
        out.write(f"emails: {sent['sent']} sent, {sent['deferred']} deferred, "
                  f"{sent['failed']} failed\n")
    policy = "enforcing" if result.enforcing else "enforcement off"
    out.write(f"{result.jobs} running jobs watched, {len(result.alerts)} alerts ({policy})\n")


def run_watch(args: argparse.Namespace, settings: Settings) -> int:
    """`jobreport watch [--dry-run] [--jobid ID ...] [--no-deliver]`."""
    result = Watcher(settings).run(dry_run=args.dry_run, job_ids=args.jobid,
                                   deliver_now=not args.no_deliver)
    print_result(result)
    failed = any(d.outcome.startswith("failed") for d in result.decisions)
    return 1 if result.errors or failed or result.delivery["failed"] else 0
