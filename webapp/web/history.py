"""``/history?name=N&since=30d``: the signed-in user's past jobs of one name and the
``#SBATCH`` block they suggest. Staff may add ``user=``; anyone else sees only their own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from flask import Blueprint, abort, g, render_template, request

from webapp.model import SourceUnavailable
from webapp.renderers.presentation import sizing_lines
from webapp.report.history import MIN_JOBS, PERCENTILE, history
from webapp.web import auth
from webapp.web.reports import get_service

bp = Blueprint("history", __name__)
MAX_DAYS = 90  # one sacct call and two PromQL queries per 200 jobs: keep the window bounded


@bp.get("/history")
def page():
    """Past jobs (of one name, or all) with peaks, efficiencies and the next #SBATCH block."""
    user = request.args.get("user", "").strip() or g.user
    if user != g.user and not auth.is_staff(g.user):
        abort(403, description="Only your own history: support staff may see others'.")
    name = request.args.get("name", "").strip() or None
    days = request.args.get("days", type=int) or 30
    if not 1 <= days <= MAX_DAYS:
        abort(400, description=f"days must be between 1 and {MAX_DAYS}")
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
