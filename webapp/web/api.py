"""The JSON API for portals (Open OnDemand's dashboard and the like), version 1
(docs/api.md; described by ``openapi.json`` beside this module):

- ``/api/v1/jobs``: a user's recent jobs, the rows "My jobs" shows
  (``job_lists.user_listing``, the same query parameters and pages), with a ``next`` link;
- ``/api/v1/jobs/<cluster>/<id>``: a job's report, the JSON renderer's document, with the
  access rules of its page (``views.job_json``);
- ``/api/v1/openapi.json``: the description, to anybody.

Who asks is decided for every request by ``auth.load_user``: a session, or the user a
trusted portal's proxy names. Without one the answer is 401, and every error is JSON
(``errors.error_response``), never the HTML page or a redirect to the login form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, g, request, url_for

from webapp.json_codec import TIME
from webapp.report.job_rows import JobRow
from webapp.web import auth, views
from webapp.web import query_params as params
from webapp.web.job_lists import user_listing

API_VERSION = 1
OPENAPI = Path(__file__).with_name("openapi.json")

bp = Blueprint("api", __name__, url_prefix=auth.API_PREFIX.rstrip("/"))


def job_row(row: JobRow) -> dict[str, Any]:
    """One row of "My jobs" as the API gives it (ratios 0..1, seconds; null: unknown)."""
    top = row.top_finding
    return {
        "cluster": row.cluster, "job_id": row.job_id, "user": row.user, "name": row.name,
        "state": row.state, "end": TIME[0](row.end), "elapsed_seconds": row.elapsed,
        "cpu_efficiency": row.cpu_efficiency, "memory_efficiency": row.memory_efficiency,
        "gpus": row.gpus, "gpu_utilization": row.gpu_utilization,
        "findings": row.findings,
        "top_finding": None if top is None else {
            "name": top.name, "severity": top.severity, "message": top.message},
        "figures_from": row.source, "missing": list(row.missing),
        "report_url": views.job_url(row.cluster, row.job_id),
        "json_url": url_for("api.job", cluster=row.cluster, job_id=row.job_id),
    }


@bp.get("/jobs")
def jobs():
    """The jobs of the user who asks (staff: of ``?user=``), one page of "My jobs"."""
    who = params.optional_name(request.args, "user") or g.user
    if who != g.user and not auth.is_staff(g.user):
        abort(403, description="Only support staff may list another user's jobs.")
    q = params.list_query(request.args, auth.settings().cluster_names)
    mine = user_listing(q, who)
    after = mine.next_page
    # The query without its page, and with it (Any: url_for takes keywords of its own)
    query: dict[str, Any] = q.args(page=1) | ({} if who == g.user else {"user": who})
    this_page: dict[str, Any] = q.args()
    return {
        "api_version": API_VERSION,
        "user": who,
        "page": mine.paged.page if mine.paged else 1,
        "pages": mine.paged.pages if mine.paged else 1,
        "total": mine.total,
        "gaps": mine.gaps,
        "jobs": [job_row(r) for r in mine.shown],
        "next": None if after is None else url_for("api.jobs", **query, page=after),
        "list_url": (url_for("views.index", **this_page) if who == g.user
                     else url_for("job_lists.user", name=who, **this_page)),
    }


@bp.get("/jobs/<cluster>/<job_id>")
def job(cluster: str, job_id: str):
    """The job's report as ``/c/<cluster>/jobs/<id>.json`` gives it: that view's own code
    (400 for a malformed id, 404 naming an unknown one, 403 for another user's job)."""
    return views.job_json(job_id, cluster)


@bp.get("/openapi.json")
def openapi():
    """The API's description; its server is where this app is mounted (a proxy's prefix)."""
    spec = json.loads(OPENAPI.read_text())
    spec["servers"] = [{"url": request.script_root or "/"}]
    return Response(json.dumps(spec, indent=1) + "\n", mimetype="application/json")
