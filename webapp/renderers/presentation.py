"""What every renderer shows, computed once: summary rows, gap notes, findings in order.

The web page, the standalone HTML, the PDF and the email all read these, so a figure or
a note reads the same everywhere.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from webapp.formatting import UNKNOWN, format_bytes, format_duration, format_percent
from webapp.model import Finding, Gap, JobReport
from webapp.renderers.charts import Chart, ChartCache
from webapp.renderers.queue import queue_rows

CHARTS = ChartCache()
# Line breaks of every kind (and other control characters): one value stays one line.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


def format_time(when: datetime | None) -> str:
    """A UTC-aware datetime as '2026-11-22 13:00:00 UTC'."""
    return UNKNOWN if when is None else when.strftime("%Y-%m-%d %H:%M:%S %Z")


def gap_text(gap: Gap) -> str:
    """The visible note for a source that failed; Prometheus gaps say 'metrics unavailable'."""
    if gap.source == "archive":  # not a failure: the report was rebuilt from the archive
        return gap.reason
    if gap.source == "prometheus":
        return f"Metrics unavailable (Prometheus): {gap.reason}. Plots and usage numbers " \
            "from the exporter are missing from this report."
    return f"Data from {gap.source} unavailable: {gap.reason}."


def one_line(text: str) -> str:
    """Control characters (CR, LF, tab, ...) as single spaces: every value stays one line."""
    return CONTROL_CHARS.sub(" ", text)


def summary_rows(report: JobReport) -> list[tuple[str, str]]:
    """Label/value pairs of the summary table, one line each, not escaped (renderers do)."""
    return [(label, one_line(value)) for label, value in _summary_rows(report)]


def _summary_rows(report: JobReport) -> list[tuple[str, str]]:
    def of(used: str, asked: str, ratio: float | None) -> str:
        return f"{used} of {asked} ({format_percent(ratio)})" if ratio is not None else used

    cpu_used = "unknown" if report.cpu_seconds is None else format_duration(report.cpu_seconds)
    return [
        ("Job", f"{report.job_id} on {report.cluster}"),
        ("Name", report.job_name or "unknown"),
        ("User", f"{report.user or 'unknown'} (account {report.account or 'unknown'})"),
        ("Partition", report.partition or "unknown"),
        ("Nodes", ", ".join(report.nodes) or "unknown"),
        ("State", f"{report.state or 'unknown'} (exit code {report.exit_code or 'unknown'})"),
        ("Submitted", format_time(report.submit_time)),
        ("Started", format_time(report.start_time)),
        ("Ended", format_time(report.end_time)),
        ("Elapsed", f"{format_duration(report.elapsed_seconds)} of "
                    f"{format_duration(report.time_limit_seconds)} time limit"),
        ("CPUs", f"{report.cpus or 'unknown'} allocated; CPU time {cpu_used}; "
                 f"efficiency {format_percent(report.cpu_efficiency)}"),
        ("Memory", of(format_bytes(report.memory_peak_bytes),
                      format_bytes(report.memory_requested_bytes), report.memory_efficiency)
         + " peak of requested"),
        ("GPUs", str(report.gpus)),
        ("Work directory", report.work_dir or "unknown"),
    ]


def sorted_findings(report: JobReport) -> list[Finding]:
    """Most severe first, stable otherwise."""
    return sorted(report.findings, key=lambda f: f.severity.rank)


def context(report: JobReport, charts: list[Chart] | None = None) -> dict[str, Any]:
    """Everything report.html, email/report.* and the PDF need, computed once."""
    return {
        "report": report,
        "summary": summary_rows(report),
        "findings": sorted_findings(report),
        "gaps": [gap_text(g) for g in report.gaps] + list(report.notes),
        "charts": CHARTS.get(report) if charts is None else charts,
        "queue": [(label, one_line(value)) for label, value in queue_rows(report)],
    }
