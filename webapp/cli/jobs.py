"""``jobreport [jobs] [--user U] [--days 7] [--limit 20]``: recent jobs, with the rows and
figures of the web app's job list (``webapp.report.job_rows``: one ``sacct`` call per
list, the archived report where there is one), as a table within 80 columns."""

from __future__ import annotations

import argparse
import textwrap
from collections import Counter
from datetime import UTC, datetime, timedelta

from webapp.cli.login import caller, recent_rows
from webapp.formatting import format_duration, format_percent
from webapp.lists.job_list import ListQuery, select
from webapp.renderers.text import printable
from webapp.report.job_rows import JobRow
from webapp.settings import Settings

RECENT_DAYS = 7
RECENT_LIMIT = 20
WIDTH = 80
IDS_NAMED = 6  # job ids named after a blank figure's reason; the rest are counted
# (header, width, alignment): 77 columns with the spaces between them. Longer text ends
# in "+", as sacct's own columns do (OUT_OF_ME+).
COLUMNS = (("job", 12, "<"), ("name", 12, "<"), ("state", 10, "<"), ("elapsed", 7, ">"),
           ("CPU eff", 7, ">"), ("mem eff", 7, ">"), ("GPU use", 7, ">"), ("findings", 8, ">"))


def add_jobs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", help="whose jobs (default: yours)")
    parser.add_argument("--days", type=float, default=RECENT_DAYS,
                        help=f"how far back (default {RECENT_DAYS})")
    parser.add_argument("--limit", type=int, default=RECENT_LIMIT,
                        help=f"the most recent N jobs (default {RECENT_LIMIT})")


def run_jobs(args: argparse.Namespace, settings: Settings) -> int:
    """The caller's (or --user's) jobs that ended in the last days or have not ended."""
    who = caller()
    # Also the command run without one: its namespace has none of these options.
    user = getattr(args, "user", None) or who
    days = getattr(args, "days", RECENT_DAYS)
    limit = max(1, getattr(args, "limit", RECENT_LIMIT))
    now = datetime.now(UTC)
    rows, gaps = recent_rows(settings, user, who, now - timedelta(days=days), now)
    print("\n".join(render_jobs(user, days, select(rows, ListQuery()), gaps, limit)))
    return 0


def render_jobs(user: str, days: float, rows: list[JobRow], gaps: list[str],
                limit: int) -> list[str]:
    """The rows (newest first) as a table, then where the figures come from and why any
    is blank, as the web list's "figures from" column says; every line within WIDTH."""
    shown = rows[:limit]
    out = textwrap.wrap(f"Jobs of {printable(user)} in the last {days:g} days: {len(rows)}"
                        + (f", the {len(shown)} most recent (--limit)"
                           if len(rows) > len(shown) else ""), WIDTH, subsequent_indent="  ")
    for gap in gaps:
        out += textwrap.wrap(f"Note: {gap[0].upper()}{gap[1:]}.", WIDTH, subsequent_indent="  ")
    if not shown:
        return out
    out.append(_line(tuple(h for h, _, _ in COLUMNS)))
    out += [_line(_cells(r)) for r in shown]
    sources = Counter(r.source for r in shown)
    out += textwrap.wrap("Figures from: " + ", ".join(f"{s} {n}" for s, n in sources.items())
                         + (" (sacct's memory peak is seff's estimate)" if "sacct" in sources
                            else "") + ".", WIDTH, subsequent_indent="  ")
    missing: dict[str, list[str]] = {}
    for r in shown:
        for why in r.missing:
            missing.setdefault(why, []).append(r.job_id)
    for why, ids in missing.items():
        which = ("every job listed" if len(ids) == len(shown) else
                 ", ".join(ids[:IDS_NAMED]) + (f" +{len(ids) - IDS_NAMED} more"
                                               if len(ids) > IDS_NAMED else ""))
        out += textwrap.wrap(f"Blank: {printable(why)}: {which}.", WIDTH, subsequent_indent="  ")
    out.append("Details: jobreport show JOBID; one name's history: jobreport history --name NAME")
    return out


def _cells(r: JobRow) -> tuple[str, ...]:
    def pct(ratio: float | None) -> str:
        return "-" if ratio is None else format_percent(ratio)

    gpu = "no GPU" if not r.gpus else f"{r.gpus}x {pct(r.gpu_utilization)}"
    return (r.job_id, printable(r.name), printable(r.state),
            "-" if r.elapsed is None else format_duration(r.elapsed),
            pct(r.cpu_efficiency), pct(r.memory_efficiency), gpu,
            "-" if r.findings is None else str(r.findings))


def _line(cells: tuple[str, ...]) -> str:
    return " ".join(f"{_fit(c, w):{a}{w}}" for c, (_, w, a) in zip(cells, COLUMNS, strict=True))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "+"
