"""`jobreport sync`: options, and what a run prints."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TextIO

from jobreport_common.settings import flag_type, ranged
from jobreport_common.sqlite_file import disk_full
from webapp.cli.arguments import add_cluster_argument, parse_lookback, settings_for
from webapp.cli.sync_status import print_status
from webapp.detectors.policy_in_force import reload_on_sighup
from webapp.model import JobId
from webapp.settings import Settings
from webapp.sync.options import DEFAULT_LIMIT, DIRECTIONS, SyncOptions
from webapp.sync.run import ERROR_SHOWN, Syncer, SyncResult, sync_files


def _span(text: str) -> float:
    try:
        return parse_lookback(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _job_id(text: str) -> str:
    return str(JobId.parse(text))


def add_sync_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-j", "--jobid", type=_job_id, metavar="JOBID",
                        help="process this one job again (any end time; the watermark stays)")
    parser.add_argument("-l", "--limit", type=flag_type(ranged(at_least=1, kind=int), "--limit"),
                        default=DEFAULT_LIMIT, metavar="N",
                        help=f"at most N jobs per direction, then exit (default {DEFAULT_LIMIT})")
    parser.add_argument("--direction", choices=tuple(DIRECTIONS), default="both",
                        help="archive reports, queue emails, or both (default both)")
    parser.add_argument("--max-span", type=_span, default=_span("7d"), metavar="DURATION",
                        help="how far back a first run reaches (default 7d)")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the jobs a run would process; change nothing")
    add_cluster_argument(parser, "the cluster whose ended jobs to walk, into the one archive")
    parser.add_argument("--no-deliver", action="store_true",
                        help="queue emails in the outbox; the next run that delivers sends them")
    parser.add_argument("--status", action="store_true",
                        help="print where the sync stands (watermarks, last run, jobs failing"
                        " and given up) and change nothing")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="--status as text (default) or JSON")


def _when(ts: int | None) -> str:
    if ts is None:
        return "none"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_result(result: SyncResult, dry_run: bool, out: TextIO = sys.stdout) -> None:
    if result.busy:
        out.write(f"{result.busy}: another sync is running, nothing done\n")
        return
    if dry_run:
        for job in result.selected:
            out.write(f"would process job {job.job_id} (submitted {job.submit_time}, "
                      f"ended {_when(job.end_time)})\n")
    for stream, counts in result.outcomes.items():
        parts = ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing"
        out.write(f"{stream}: {parts}; watermark {_when(result.watermarks.get(stream))}\n")
    if result.delivery:
        d = result.delivery
        out.write(f"emails: {d['sent']} sent, {d['deferred']} deferred, {d['failed']} failed\n")
    if result.chat:
        c = result.chat
        out.write(f"chat notices: {c['sent']} sent, {c['deferred']} deferred,"
                  f" {c['failed']} failed\n")
    if result.pruned:
        out.write(f"retention: {result.pruned} archived jobs dropped\n")
    for failure in result.failed:
        if failure.given_up:
            then = (f"given up after {failure.attempts} failed runs; `jobreport sync --jobid"
                    f" {failure.job_id}` tries it again")
        elif failure.attempts:
            then = f"failed run {failure.attempts}; the next run tries it again"
        else:
            then = "not retried (--jobid)"
        error = " ".join(failure.error.split())[:ERROR_SHOWN]
        out.write(f"failed: job {failure.job_id} ({', '.join(failure.streams)}): {error}; "
                  f"{then}\n")
    out.write(f"{len(result.selected)} ended jobs selected (from {result.source}), "
              f"{len(result.failed)} failed\n")
    if result.error:
        out.write(f"stopped at {result.error}; the next run starts there\n")


def run_sync(args: argparse.Namespace, settings: Settings) -> int:
    """`jobreport sync [--jobid ID] [--limit N] [--direction D] [--max-span S] [--dry-run]`."""
    aimed = settings_for(settings, args.cluster)
    if aimed is None:
        return 2
    if args.status:
        return print_status(aimed, args.cluster, args.format)
    opts = SyncOptions(direction=args.direction, limit=args.limit, max_span=args.max_span,
                       job_id=args.jobid, dry_run=args.dry_run, no_deliver=args.no_deliver)
    try:
        # a run may last minutes: SIGHUP makes it read the site's policy again
        with reload_on_sighup():
            syncer = Syncer(aimed)
            try:
                result = syncer.run(opts)
            finally:
                syncer.close()
    except Exception as exc:
        full = disk_full(exc, sync_files(aimed))
        if full is None:
            raise
        # Nothing was done past the last job written: the watermarks wait before the rest.
        print(f"jobreport: sync stopped, {full}; the next run goes on from there once there"
              " is room", file=sys.stderr)
        return 1
    print_result(result, opts.dry_run)
    return exit_status(result)


def exit_status(result: SyncResult) -> int:
    """1 when a job stopped the run or failed, or an email or a chat notice failed for
    good: the unit shows failed."""
    failed = result.delivery["failed"] or result.chat["failed"]
    return 1 if result.error or result.failed or failed else 0
