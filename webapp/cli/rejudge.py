"""`jobreport rejudge`: the archive's reports judged again under the policy in force."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from webapp.archive.store import Archive
from webapp.cli.arguments import lookback_seconds
from webapp.detectors.policy_in_force import in_force
from webapp.report.rejudge import rejudge
from webapp.settings import Settings
from webapp.sources.gpu_metrics import gpu_metrics


def add_rejudge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=lookback_seconds, default=30 * 86400.0, metavar="AGE",
                        help="the jobs that ended in this window, e.g. 30d (the default), 2w")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the jobs whose findings would change; write nothing")


def run_rejudge(args: argparse.Namespace, settings: Settings,
                out: TextIO = sys.stdout) -> int:
    if not settings.archive_url:
        sys.stderr.write("jobreport: no archive (JOBREPORT_ARCHIVE_URL)\n")
        return 2
    policy = in_force(settings.policy_dir).policy()
    now = int(time.time())
    with Archive(settings.archive_url) as archive:
        done = rejudge(archive, settings.cluster, now - int(args.since), now,
                       settings.thresholds, policy, settings.min_coverage,
                       gpu_metrics(settings.gpu_metrics), dry_run=args.dry_run,
                       progress="rejudge")
    for job_id in done.job_ids:
        out.write(f"{job_id}: findings changed\n")
    out.write(f"{done.jobs} archived reports judged again under policy "
              f"{policy.version or 'none'}: {done.changed} changed"
              f"{' (dry run: nothing written)' if args.dry_run else ''}\n")
    return 0
