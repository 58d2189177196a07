"""HTML report: a standalone page of ``report.html``.

``render(report)`` gives a standalone page (``jobreport show --format html``); the web
view renders the same ``report.html`` with the app's chrome (user, logout, links).
"""

from __future__ import annotations

from jinja2 import Environment

from webapp.model import JobReport
from webapp.renderers.presentation import context
from webapp.renderers.templates import environment

_ENV: Environment | None = None


def render(report: JobReport, footer: str = "") -> str:
    """A standalone HTML page of the report (no login chrome, no links), with the site's
    ``footer`` (``site_wording.report_footer``) as the web page has it."""
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV.get_template("report.html").render(standalone=True, site_footer=footer,
                                                    **context(report))
