"""The staff report as text (terminal, email) and JSON. The staff room owns its renderer
(renderers/ render the job report, a layer below); the HTML page and the email's HTML part
are the templates ``staff.html`` and ``email/staff.html``."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from datetime import UTC, datetime

from webapp.staff.tables import StaffReport, Table
from webapp.thresholds import STAFF


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def heading(report: StaffReport) -> str:
    text = (f"Staff report for cluster {report.cluster}: {report.jobs} jobs that ended "
            f"{when(report.since)} to {when(report.until)}")
    if report.source == "archive" and report.archived_until is not None:
        text += f" (from the archive, jobs archived up to {when(report.archived_until)})"
    return text


def _table_text(t: Table) -> list[str]:
    lines = [t.title, "-" * len(t.title), t.why]
    if not t.rows:
        return [*lines, "(none)", ""]
    widths = [max(len(c), *(len(r.cells[i]) for r in t.rows)) for i, c in enumerate(t.columns)]
    lines.append("  ".join(c.ljust(w) for c, w in zip(t.columns, widths, strict=True)).rstrip())
    for r in t.rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r.cells, widths, strict=True)).rstrip())
    return [*lines, ""]


def render_text(report: StaffReport) -> str:
    lines = [*textwrap.wrap(heading(report), 80), ""]  # an 80-column terminal
    for t in report.tables:
        lines += _table_text(t)
    return "\n".join(lines)


def render_json(report: StaffReport) -> str:
    doc = {
        "cluster": report.cluster, "since": report.since, "until": report.until,
        "jobs": report.jobs, "source": report.source,
        "archived_until": report.archived_until,
        "config": {**asdict(report.config), **report.thresholds.part(STAFF)},
        "tables": {t.key: {"title": t.title, "why": t.why, "columns": list(t.columns),
                           "rows": [dict(r.values) for r in t.rows]} for t in report.tables},
    }
    return json.dumps(doc, indent=2, sort_keys=True)
