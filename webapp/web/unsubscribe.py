"""The one-click opt-out page every email links to: no sign-in, the signed token is the
proof. GET shows what the button does (link scanners follow GETs, so a GET changes
nothing); POST records the choice, which is also what mail clients' RFC 8058 one-click
button sends. A link past JOBREPORT_OPT_OUT_LINK_DAYS changes nothing (410) and points
to ``/emails``, where a signed-in user stops or resumes their own emails."""

from __future__ import annotations

from typing import cast

from flask import Blueprint, abort, current_app, g, render_template, request
from flask.typing import ResponseReturnValue

from webapp.archive.mail_state import MailState
from webapp.archive.store import Archive
from webapp.opt_out_token import OptOutToken, read_token
from webapp.settings import Settings
from webapp.web.query_params import choice

bp = Blueprint("unsubscribe", __name__)
GONE = 410


def _settings() -> Settings:
    return cast(Settings, current_app.config["JOBREPORT_SETTINGS"])


def _who(token: str) -> OptOutToken:
    settings = _settings()
    found = read_token(settings.secret_key, token, settings.opt_out_link_days)
    if found is None:
        abort(404, description="This link is not valid (it may have been cut short).")
    return found


def _expired(found: OptOutToken) -> tuple[str, int]:
    return render_template("unsubscribe.html", cluster=found.cluster, who=found.user,
                           expired=True, days=_settings().opt_out_link_days), GONE


@bp.get("/unsubscribe/<token>")
def page(token: str) -> ResponseReturnValue:
    """What the opt-out button will do, for whom."""
    found = _who(token)
    if found.expired:
        return _expired(found)
    return render_template("unsubscribe.html", cluster=found.cluster, who=found.user,
                           token=token, done=False)


@bp.post("/unsubscribe/<token>")
def record(token: str) -> ResponseReturnValue:
    """Record the opt-out (idempotent)."""
    found = _who(token)
    if found.expired:
        return _expired(found)
    with Archive(_settings().archive_url) as archive:
        MailState(archive.db).opt_out(found.cluster, found.user, "link")
    return render_template("unsubscribe.html", cluster=found.cluster, who=found.user,
                           token=token, done=True)


@bp.route("/emails", methods=("GET", "POST"))
def manage() -> ResponseReturnValue:
    """The signed-in user's report emails on a cluster: stop or resume them."""
    settings = _settings()
    cluster = choice(request.values, "cluster", settings.cluster_names) or settings.cluster
    with Archive(settings.archive_url) as archive:
        mail = MailState(archive.db)
        if request.method == "POST":
            if request.form.get("emails") == "stop":
                mail.opt_out(cluster, g.user, "web")
            elif request.form.get("emails") == "resume":
                mail.opt_in(cluster, g.user)
        stopped = g.user in mail.opted_out(cluster)
    return render_template("emails.html", cluster=cluster, who=g.user, stopped=stopped)
