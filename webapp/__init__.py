"""jobreport: per-job usage reports for Slurm clusters.

``webapp:create_app`` is the web entry point (gunicorn 'webapp:create_app()'); the
layout below is written down as import contracts in pyproject.toml:

    cli/        every option and every line written to a terminal
    web/  mail/ the Flask app; report emails and their durable outbox
    report/     joins the sources into one JobReport and attaches the findings
    detectors/  renderers/   findings from a report; text, JSON, HTML, PDF, email
    sources/    Prometheus, the accounting view, sacct -> model records
    model.py formatting.py settings.py   the records, units, and JOBREPORT_* settings
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from webapp.report.service import ReportService
    from webapp.settings import Settings


def create_app(settings: Settings | None = None, service: ReportService | None = None) -> Flask:
    """The web app (imported on first call so the command line does not load Flask)."""
    from webapp.web.app import create_app as _create_app

    return _create_app(settings, service)
