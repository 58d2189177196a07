"""Web pages: the lookup form, a job's report in four formats, and the health check."""

from __future__ import annotations

import logging
import threading
import time

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    g,
    redirect,
    render_template,
    request,
    url_for,
)

from webapp import auth
from webapp.model import JobId, JobReport
from webapp.renderers import html
from webapp.settings import Settings

bp = Blueprint("views", __name__)
log = logging.getLogger(__name__)
_service_lock = threading.Lock()
REPORT_TTL = 30.0  # seconds a built report is reused; a page may be this much out of date


class ReportCache:
    """Built reports by job id for REPORT_TTL seconds, so the page, its PDF and a reload
    do not each query the accounting DB, sacct and Prometheus again. Access is still
    checked on every request; failures are never cached."""

    def __init__(self, ttl: float = REPORT_TTL, size: int = 256) -> None:
        self.ttl, self.size = ttl, size
        self._items: dict[str, tuple[float, JobReport]] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str, build) -> JobReport:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(job_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        report = build(job_id)
        with self._lock:
            if len(self._items) >= self.size:
                self._items = {k: v for k, v in self._items.items() if v[0] > now}
                while len(self._items) >= self.size:
                    self._items.pop(next(iter(self._items)))
            self._items[job_id] = (now + self.ttl, report)
        return report


def get_service():
    """The app's report service, built on first use (so the app starts without a DB)."""
    ext = current_app.extensions
    if ext.get("jobreport.service") is None:
        with _service_lock:
            if ext.get("jobreport.service") is None:
                from webapp.build import ReportService

                ext["jobreport.service"] = ReportService(auth.settings())
    return ext["jobreport.service"]


def _deny(canonical: str, owner: str | None) -> None:
    log.warning("user %s denied job %s of %s", g.user, canonical, owner)
    abort(403, description=f"Job {canonical} belongs to another user; only its owner "
                           "and support staff may see it.")


def load_report(job_id: str) -> JobReport:
    """Check the user may see the job, then build its report (400, 404, 403, 503 otherwise).

    For anybody but staff the owner comes first, from one accounting query, so nobody can
    make the app query Prometheus and sacct for a job they may not see."""
    canonical = str(JobId.parse(job_id))
    service = get_service()
    if not auth.is_staff(g.user):
        owner = service.owner(canonical)  # JobNotFound: 404; accounting down: 503
        if owner is None or owner != g.user:
            _deny(canonical, owner)
    report = current_app.extensions["jobreport.reports"].get(canonical, service.build)
    if not auth.can_view(g.user, report):  # the report's owner agrees with the check above
        _deny(canonical, report.user)
    return report


@bp.get("/")
def index():
    """Job lookup form; ?job=ID redirects to that job's page."""
    job = request.args.get("job", "").strip()
    if job:
        return redirect(url_for("views.job", job_id=str(JobId.parse(job))))
    return render_template("index.html")


@bp.get("/jobs/<job_id>")
def job(job_id: str):
    """The report as an HTML page with findings and inline SVG plots."""
    report = load_report(job_id)
    links = [(fmt.upper(), url_for(f"views.job_{fmt}", job_id=report.job_id))
             for fmt in ("pdf", "json", "txt")]
    return render_template("report.html", links=links, **html.context(report))


@bp.get("/jobs/<job_id>.pdf")
def job_pdf(job_id: str):
    """The report as a PDF, one section per page."""
    from webapp.renderers import pdf

    report = load_report(job_id)
    body = pdf.render(report)  # logs its render time
    return Response(body, mimetype="application/pdf", headers={
        "Content-Disposition": f'inline; filename="job-{report.job_id}.pdf"'})


@bp.get("/jobs/<job_id>.json")
def job_json(job_id: str):
    """The report as JSON (the same document `jobreport show --format json` prints)."""
    from webapp.renderers import json as json_renderer

    return Response(json_renderer.render(load_report(job_id)), mimetype="application/json")


@bp.get("/jobs/<job_id>.txt")
def job_txt(job_id: str):
    """The report as plain text."""
    from webapp.renderers import text

    return Response(text.render(load_report(job_id)), mimetype="text/plain")


@bp.get("/healthz")
def healthz():
    """Liveness for the load balancer: no login, no database."""
    return {"status": "ok"}


def security_headers(response: Response) -> Response:
    """No scripts at all, no framing, no sniffing; reports are private."""
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "views.healthz":
        response.headers.setdefault("Cache-Control", "private, no-store")
    return response


def split_bind(bind: str) -> tuple[str, int]:
    """'127.0.0.1:8000' -> ('127.0.0.1', 8000); '[::1]:8000' works too."""
    host, _, port = bind.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def run_serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """`jobreport serve`: the Flask development server (gunicorn in production)."""
    from webapp import create_app

    default_host, default_port = split_bind(settings.bind)
    app: Flask = create_app(settings)
    app.run(host=host or default_host, port=port or default_port, threaded=True)
