"""The JSON API for portals (Open OnDemand's dashboard and the like), version 1
(docs/api.md; described by ``openapi.json`` beside this module):

- ``/api/v1/jobs``: a user's recent jobs, the rows "My jobs" shows
  (``job_lists.user_listing``, the same query parameters and pages), with a ``next`` link;
- ``/api/v1/accounts/<account>/jobs``: an account's jobs, the rows ``/accounts/<name>``
  shows (``job_lists.account_listing``), for staff and the account's coordinators;
- ``/api/v1/jobs/<cluster>/<id>``: a job's report, the JSON renderer's document, with the
  access rules of its page (``views.job_json``);
- ``/api/v1/openapi.json``: the description, to anybody.

Who asks is decided for every request by ``auth.load_user``: a session, or the user a
trusted portal's proxy names. Without one the answer is 401, and every error is JSON
(``errors.error_response``), never the HTML page or a redirect to the login form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, g, request, url_for
from flask.typing import ResponseReturnValue

from webapp.json_codec import TIME
from webapp.report.job_rows import JobRow
from webapp.web import auth, views
from webapp.web import query_params as params
from webapp.web.job_lists import Listing, account_listing, check_account, user_listing

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


def _page(listing: Listing, next_url: Callable[[int], str]) -> dict[str, Any]:
    """One page of a list as every list of the API gives it: its rows, the page and the
    next one's URL (``next_url`` of its number; null on the last)."""
    after = listing.next_page
    return {
        "api_version": API_VERSION,
        "page": listing.paged.page if listing.paged else 1,
        "pages": listing.paged.pages if listing.paged else 1,
        "total": listing.total,
        "gaps": listing.gaps,
        "jobs": [job_row(r) for r in listing.shown],
        "next": None if after is None else next_url(after),
    }


@bp.get("/jobs")
def jobs() -> ResponseReturnValue:
    """The jobs of the user who asks (staff: of ``?user=``), one page of "My jobs"."""
    who = params.optional_name(request.args, "user") or g.user
    if who != g.user and not auth.is_staff(g.user):
        abort(403, description="Only support staff may list another user's jobs.")
    q = params.list_query(request.args, auth.settings().cluster_names)
    # The query without its page, and with it (Any: url_for takes keywords of its own)
    query: dict[str, Any] = q.args(page=1) | ({} if who == g.user else {"user": who})
    this_page: dict[str, Any] = q.args()
    return _page(user_listing(q, who), lambda n: url_for("api.jobs", **query, page=n)) | {
        "user": who,
        "list_url": (url_for("views.index", **this_page) if who == g.user
                     else url_for("job_lists.user", name=who, **this_page)),
    }


@bp.get("/accounts/<account>/jobs")
def account_jobs(account: str) -> ResponseReturnValue:
    """An account's jobs, one page of its ``/accounts/<name>`` list: for staff and the
    account's Slurm coordinators (that page's check; 400 for a malformed name, 403)."""
    check_account(account)
    q = params.list_query(request.args, auth.settings().cluster_names)
    query: dict[str, Any] = q.args(page=1)
    this_page: dict[str, Any] = q.args()
    return _page(account_listing(q, account),
                 lambda n: url_for("api.account_jobs", account=account, **query, page=n)) | {
        "account": account,
        "list_url": url_for("job_lists.account", name=account, **this_page),
    }


@bp.get("/jobs/<cluster>/<job_id>")
def job(cluster: str, job_id: str) -> Response:
    """The job's report as ``/c/<cluster>/jobs/<id>.json`` gives it: that view's own code
    (400 for a malformed id, 404 naming an unknown one, 403 for another user's job)."""
    return views.job_json(job_id, cluster)


@bp.get("/openapi.json")
def openapi() -> Response:
    """The API's description; its server is where this app is mounted (a proxy's prefix)."""
    spec = json.loads(OPENAPI.read_text())
    spec["servers"] = [{"url": request.script_root or "/"}]
    return Response(json.dumps(spec, indent=1) + "\n", mimetype="application/json")
