"""HTML report: the template context shared by the web page, the PDF and the email.

``render(report)`` gives a standalone page (``jobreport show --format html``); the web
view renders the same ``report.html`` with the app's chrome (user, logout, links).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from webapp.charts import Chart, ChartCache
from webapp.formatting import UNKNOWN, format_bytes, format_duration, format_percent
from webapp.model import Finding, Gap, JobReport, Severity

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "templates"
SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
CHARTS = ChartCache()
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


def format_time(when: datetime | None) -> str:
    """A UTC-aware datetime as '2026-11-22 13:00:00 UTC'."""
    return UNKNOWN if when is None else when.strftime("%Y-%m-%d %H:%M:%S %Z")


def gap_text(gap: Gap) -> str:
    """The visible note for a source that failed; Prometheus gaps say 'metrics unavailable'."""
    if gap.source == "prometheus":
        return f"Metrics unavailable (Prometheus): {gap.reason}. Plots and usage numbers " \
            "from the exporter are missing from this report."
    return f"Data from {gap.source} unavailable: {gap.reason}."


def one_line(text: str) -> str:
    """Control characters (CR, LF, tab, ...) as single spaces: every value stays one line."""
    return _CONTROL.sub(" ", text)


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
    return sorted(report.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 9))


def context(report: JobReport, charts: list[Chart] | None = None) -> dict[str, Any]:
    """Everything report.html, email/report.* and the PDF need, computed once."""
    return {
        "report": report,
        "summary": summary_rows(report),
        "findings": sorted_findings(report),
        "gaps": [gap_text(g) for g in report.gaps],
        "charts": CHARTS.get(report) if charts is None else charts,
    }


def install_filters(env: Environment) -> None:
    """The formatting filters every template may use."""
    env.filters.update(bytes=format_bytes, duration=format_duration,
                       percent=format_percent, time=format_time)


def environment() -> Environment:
    """A Jinja environment on templates/ with autoescape for .html (not for .txt)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES),
                      autoescape=select_autoescape(("html", "xml")),
                      trim_blocks=True, lstrip_blocks=True)
    install_filters(env)
    return env


_ENV: Environment | None = None


def render(report: JobReport) -> str:
    """A standalone HTML page of the report (no login chrome, no links)."""
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV.get_template("report.html").render(standalone=True, **context(report))
