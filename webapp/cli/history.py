"""``jobreport history [--user U] [--name N] [--since 30d]``: past jobs and the next
``#SBATCH`` block they suggest."""

from __future__ import annotations

import argparse
import textwrap
from datetime import UTC, datetime

from webapp.cli.arguments import parse_lookback
from webapp.cli.login import caller, sacct_for
from webapp.formatting import format_bytes, format_duration, format_percent
from webapp.model import History
from webapp.renderers.text import printable, sizing_block
from webapp.report.history import MIN_JOBS, history
from webapp.settings import Settings
from webapp.sources.from_settings import prometheus_from
from webapp.sources.history_data import HistorySource

SHOWN = 50  # jobs listed one by one


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", help="whose jobs (default: yours)")
    parser.add_argument("--name", help="job name (default: every name)")
    parser.add_argument("--since", default="30d", metavar="DURATION",
                        help="how far back: 12h, 30d, 8w (default 30d)")


def source_for(settings: Settings, user: str, who: str) -> HistorySource:
    """sacct as the caller; Prometheus' figures for their own jobs, or for staff and the
    service user (the same rule as ``jobreport show``)."""
    mine = settings.privileged or user == who or who in settings.staff
    return HistorySource(sacct_for(settings), prometheus_from(settings) if mine else None,
                         gpu_idle=settings.thresholds.gpu_idle)


def run_history(args: argparse.Namespace, settings: Settings) -> int:
    who = caller()
    user = args.user or who
    since = datetime.now(UTC) - parse_lookback(args.since)
    h = history(source_for(settings, user, who), user, args.name, since,
                thresholds=settings.thresholds)
    print("\n".join(render_history(h)))
    return 0


def render_history(h: History) -> list[str]:
    """The jobs (newest first), then the block: within 80 columns."""
    what = f"Jobs named '{printable(h.name)}'" if h.name else "Jobs"
    out = textwrap.wrap(f"{what} of {printable(h.user)} since {h.since:%Y-%m-%d %H:%M} UTC: "
                        f"{len(h.jobs)}", 80, subsequent_indent="  ")
    if h.jobs:
        out.append(f"{'job':<12} {'name':<14} {'state':<10} {'elapsed':>8} {'CPU eff':>8} "
                   f"{'mem peak':>10} {'mem eff':>8}")
    for j in h.jobs[:SHOWN]:
        out.append(f"{printable(j.job_id)[:12]:<12} {printable(j.name)[:14]:<14} "
                   f"{printable(j.state)[:10]:<10} {format_duration(j.elapsed_seconds):>8} "
                   f"{format_percent(j.cpu_efficiency):>8} "
                   f"{format_bytes(j.memory_peak.bytes if j.memory_peak else None):>10} "
                   f"{format_percent(j.memory_efficiency):>8}")
    if len(h.jobs) > SHOWN:
        out.append(f"... and {len(h.jobs) - SHOWN} more")
    if h.sizing is None:
        out.append(f"No #SBATCH suggestion: it needs at least {MIN_JOBS} ended jobs.")
    else:
        out += sizing_block(h.sizing)
    return out
