"""``/history?name=N&since=30d``: the signed-in user's past jobs of one name and the
``#SBATCH`` block they suggest. Staff may add ``user=``; anyone else sees only their own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Blueprint, abort, g, render_template, request
from flask.typing import ResponseReturnValue

from webapp.detectors.advice import PERCENTILE
from webapp.model import SourceUnavailable
from webapp.renderers.presentation import sizing_lines
from webapp.report.history import MIN_JOBS, history
from webapp.web import auth
from webapp.web import query_params as params
from webapp.web.reports import get_service

bp = Blueprint("history", __name__)
MAX_DAYS = 90  # one sacct call and two PromQL queries per 200 jobs: keep the window bounded
DEFAULT_DAYS = 30


@bp.get("/history")
def page() -> ResponseReturnValue:
    """Past jobs (of one name, or all) with peaks, efficiencies and the next #SBATCH block."""
    user = params.optional_name(request.args, "user") or g.user
    name = params.text(request.args, "name") or None
    days = params.whole_number(request.args, "days", 1, MAX_DAYS, DEFAULT_DAYS)
    if user != g.user and not auth.is_staff(g.user):
        abort(403, description="Only your own history: support staff may see others'.")
    service = get_service()
    if service.history is None:
        abort(503, description="No history source is configured.")
    since = datetime.now(UTC) - timedelta(days=days)
    try:
        past, unavailable = history(service.history, user, name, since,
                                    thresholds=service.thresholds), None
    except SourceUnavailable as exc:
        past, unavailable = None, exc.reason
    return render_template("history.html", history=past, user_name=user, name=name,
                           days=days, unavailable=unavailable, min_jobs=MIN_JOBS,
                           percentile=PERCENTILE,
                           sizing=sizing_lines(past.sizing if past else None))
