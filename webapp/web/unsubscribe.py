"""The one-click opt-out page every email links to: no sign-in, the signed token is the
proof. GET shows what the button does (link scanners follow GETs, so a GET changes
nothing); POST records the choice, which is also what mail clients' RFC 8058 one-click
button sends."""

from __future__ import annotations

from flask import Blueprint, abort, current_app, render_template

from webapp.archive.mail_state import MailState
from webapp.archive.opt_out_link import read_token
from webapp.archive.store import Archive
from webapp.settings import Settings

bp = Blueprint("unsubscribe", __name__)


def _who(token: str) -> tuple[str, str]:
    settings: Settings = current_app.config["JOBREPORT_SETTINGS"]
    found = read_token(settings.secret_key, token)
    if found is None:
        abort(404, description="This link is not valid (it may have been cut short).")
    return found


@bp.get("/unsubscribe/<token>")
def page(token: str):
    """What the opt-out button will do, for whom."""
    cluster, user = _who(token)
    return render_template("unsubscribe.html", cluster=cluster, who=user, token=token,
                           done=False)


@bp.post("/unsubscribe/<token>")
def record(token: str):
    """Record the opt-out (idempotent)."""
    cluster, user = _who(token)
    settings: Settings = current_app.config["JOBREPORT_SETTINGS"]
    with Archive(settings.archive_url) as archive:
        MailState(archive.db).opt_out(cluster, user, "link")
    return render_template("unsubscribe.html", cluster=cluster, who=user, token=token,
                           done=True)
