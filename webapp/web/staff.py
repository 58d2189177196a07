"""Staff-only pages: the staff report (``/staff/report?days=7``) and a user's record of
alerts and cancellations (``/staff/users/<name>``). Anyone else gets a 403. Staff also
see, on every page, the site's policy when its files do not load (``policy_note``)."""

from __future__ import annotations

import time

from flask import Blueprint, abort, g, render_template, request
from flask.typing import ResponseReturnValue

from webapp.detectors.policy_in_force import in_force
from webapp.model import SourceUnavailable
from webapp.staff.render import heading, when
from webapp.staff.service import DAY, staff_report
from webapp.watch_records import AlertLog, ordinal
from webapp.web import auth
from webapp.web import query_params as params

bp = Blueprint("staff", __name__, url_prefix="/staff")
MAX_DAYS = 90  # a bounded window: the report's queries grow with it


def policy_note() -> dict[str, object]:
    """A context processor: for staff, the policy in force and the problems of its files
    when an edit does not load (templates/_policy_note.html, shown by base.html)."""
    if not auth.is_staff(g.get("user")):
        return {}
    state = in_force(auth.settings().policy_dir).state()
    return {"policy_note": state} if state.problems else {}


@bp.before_request
def staff_only() -> None:
    if not auth.is_staff(g.get("user")):
        abort(403, description="This page is for the support staff.")


@bp.get("/report")
def report() -> ResponseReturnValue:
    s = auth.settings()
    days = params.whole_number(request.args, "days", 1, MAX_DAYS, int(s.staff_report.days))
    try:
        staff, unavailable = staff_report(s, days=days), None
    except SourceUnavailable as exc:
        staff, unavailable = None, str(exc)
    return render_template("staff.html", report=staff, days=days, unavailable=unavailable,
                           heading=heading(staff) if staff else "")


@bp.get("/users/<name>")
def user(name: str) -> ResponseReturnValue:
    params.slurm_name(name, "user")
    s = auth.settings()
    days = int(s.staff_report.notice_days)
    log = AlertLog(s.outbox)
    try:
        since = time.time() - days * DAY
        alerts, cancels = log.alerts(since, name), [c for c in log.cancellations(since)
                                                    if c.user == name]
    finally:
        log.close()
    return render_template("staff_user.html", name=name, days=days, alerts=alerts,
                           cancellations=cancels, notice=ordinal(len(alerts)), when=when)
