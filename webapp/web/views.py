"""Web pages: the lookup form, a job's report in four formats, and the health check."""

from __future__ import annotations

import functools

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue

from webapp.model import JobId
from webapp.renderers import site_wording
from webapp.renderers.presentation import context
from webapp.sources.prometheus import RESOLUTIONS
from webapp.web import auth
from webapp.web import query_params as params
from webapp.web.job_lists import my_jobs
from webapp.web.pdfs import PdfBuilds
from webapp.web.reports import authorize, load_report

PDF_RELOAD_SECONDS = 3  # the "being built" page's reload

bp = Blueprint("views", __name__)


def job_url(cluster: str | None, job_id: str, fmt: str = "") -> str:
    """A job's URL: ``/jobs/<id>`` with one cluster, ``/c/<cluster>/jobs/<id>`` with more."""
    s = auth.settings()
    named = cluster if s.multi_cluster else None
    return url_for(f"views.job_{fmt}" if fmt else "views.job", job_id=job_id,
                   cluster=named or s.cluster if s.multi_cluster else None)


def _kept_key(cluster: str | None, job_id: JobId) -> str:
    """The job's key in the host's store of PDFs and plots (this deployment's cluster
    when the URL names none), as the sync's email attachment keys it too."""
    from webapp.renderers.pdf_store import pdf_key

    settings = auth.settings()
    return pdf_key(cluster or settings.cluster, str(job_id), settings.policy_dir)


@bp.get("/")
def index() -> ResponseReturnValue:
    """The user's recent jobs and the lookup form; ?job=ID redirects to that job's page."""
    job = params.text(request.args, "job")
    if job:
        cluster = params.choice(request.args, "cluster", auth.settings().cluster_names) or None
        return redirect(job_url(cluster, str(JobId.parse(job))))
    return my_jobs()


@bp.get("/jobs/<job_id>")
@bp.get("/c/<cluster>/jobs/<job_id>")
def job(job_id: str, cluster: str | None = None) -> ResponseReturnValue:
    """The report as an HTML page with findings and inline SVG plots."""
    canonical = JobId.parse(job_id)
    report = load_report(canonical, cluster=cluster)
    links = [(fmt.upper(), job_url(report.cluster, report.job_id, fmt))
             for fmt in ("pdf", "json", "txt")]
    # The plots are folded into the details: each an image loaded when they are opened.
    charts = current_app.extensions["jobreport.pdfs"].chart_refs(
        report, _kept_key(cluster, canonical))
    # Staff also see each gap's technical detail (driver errors); users the plain reason.
    footer = site_wording.report_footer(auth.settings().policy_dir, report)
    return render_template("report.html", links=links, site_footer=footer,
                           plot_base=job_url(report.cluster, report.job_id) + "/plots/",
                           **context(report, charts=charts, staff=auth.is_staff(g.user)))


@bp.get("/jobs/<job_id>/plots/<plot>.svg")
@bp.get("/c/<cluster>/jobs/<job_id>/plots/<plot>.svg")
def job_plot(job_id: str, plot: str, cluster: str | None = None) -> Response:
    """One plot of the report as an SVG image (the page's details load them lazily)."""
    from webapp.renderers.charts import PLOTS
    from webapp.renderers.pdf_store import final

    canonical = JobId.parse(job_id)
    if plot not in PLOTS:
        abort(404, description="No such plot: the plots are " + ", ".join(PLOTS) + ".")
    report = load_report(canonical, cluster=cluster)
    charts = current_app.extensions["jobreport.pdfs"].charts(
        report, _kept_key(cluster, canonical))
    chart = next((c for c in charts if c.name == plot), None)
    if chart is None:
        abort(404, description=f"Job {canonical} has no {plot} plot (no such series).")
    return Response(chart.svg, mimetype="image/svg+xml", headers={
        "Cache-Control": "private, max-age=86400" if final(report) else "no-store"})


@bp.get("/jobs/<job_id>.pdf")
@bp.get("/c/<cluster>/jobs/<job_id>.pdf")
def job_pdf(job_id: str, cluster: str | None = None) -> ResponseReturnValue:
    """The report as a PDF, one section per page (kept on the host once the job has ended:
    ``webapp.renderers.pdf_store``)."""
    from webapp.renderers import pdf
    canonical = JobId.parse(job_id)
    authorize(canonical, cluster)
    builds: PdfBuilds = current_app.extensions["jobreport.pdfs"]
    key = _kept_key(cluster, canonical)
    body = builds.cached(key)
    if body is None and not builds.pending(key):
        report = load_report(canonical, authorized=True, cluster=cluster)
        footer = site_wording.report_footer(auth.settings().policy_dir, report)
        body = builds.build(report, functools.partial(pdf.render, footer=footer), key=key)
    if body is None:  # built in the background: this page reloads until it is kept
        return render_template("pdf_building.html", job=str(canonical),
                               page=job_url(cluster, str(canonical)),
                               retry=PDF_RELOAD_SECONDS), 202, {
            "Retry-After": str(PDF_RELOAD_SECONDS), "Cache-Control": "no-store"}
    return Response(body, mimetype="application/pdf", headers={
        "Content-Disposition": f'inline; filename="job-{canonical}.pdf"'})


@bp.get("/jobs/<job_id>.json")
@bp.get("/c/<cluster>/jobs/<job_id>.json")
def job_json(job_id: str, cluster: str | None = None) -> Response:
    """The report as JSON (what `jobreport show --format json` prints): compact, series at
    the plots' resolution; ?pretty=1 indents it, ?resolution=full has the finest series."""
    from webapp.renderers import json as json_renderer

    resolution = params.choice(request.args, "resolution", RESOLUTIONS, "plot")
    pretty = params.flag(request.args, "pretty", "indented")
    report = load_report(JobId.parse(job_id), resolution=resolution, cluster=cluster)
    return Response(json_renderer.render(report, pretty=pretty), mimetype="application/json")


@bp.get("/jobs/<job_id>.txt")
@bp.get("/c/<cluster>/jobs/<job_id>.txt")
def job_txt(job_id: str, cluster: str | None = None) -> Response:
    """The report as plain text, its details and audit included (a download, not a screen)."""
    from webapp.renderers import text

    report = load_report(JobId.parse(job_id), cluster=cluster)
    footer = site_wording.report_footer(auth.settings().policy_dir, report)
    return Response(text.render(report, details=True, audit=True, footer=footer),
                    mimetype="text/plain")


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Liveness for the load balancer: no login, no database."""
    return {"status": "ok"}
