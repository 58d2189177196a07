"""The cluster page (node states, GPUs, queue, who holds what, fair share, usage against
the allocation targets) and ``/api/constants``. Login required, like every page; other
users' holdings and fair share only where the site's Slurm shows them to every user
(``PrivateData``, ``webapp.web.cluster_view``), and always to staff."""

from __future__ import annotations

import logging
import time
from typing import cast

from flask import Blueprint, Response, current_app, g, jsonify, render_template
from flask.typing import ResponseReturnValue

from jobreport_common.constants import ConstantsError, as_json, load_constants
from webapp.json_codec import Json
from webapp.model import SourceUnavailable
from webapp.renderers.cluster_chart import usage_svg
from webapp.settings import Settings, SettingsError
from webapp.sources.cluster_overview import ClusterOverviewSource
from webapp.sources.from_settings import prometheus_from
from webapp.sources.slurm_config import SlurmConfigSource
from webapp.web import auth
from webapp.web.cluster_view import cluster_view

bp = Blueprint("cluster", __name__)
log = logging.getLogger(__name__)


def _private_data() -> frozenset[str] | None:
    """The site's PrivateData (cached by the source); None when scontrol cannot say."""
    try:
        slurm_config: SlurmConfigSource = current_app.extensions["jobreport.slurm_config"]
        return slurm_config.private_data()
    except SourceUnavailable as exc:
        log.warning("%s (%s): hiding other users' rows on /cluster", exc, exc.detail)
        return None


def constants_at_start(settings: Settings) -> Json:
    """The allocation targets file, read when the app is built: an unusable one stops the
    start naming JOBREPORT_CONSTANTS_FILE."""
    if not settings.constants_file:
        return {}
    try:
        return as_json(load_constants(settings.constants_file))
    except ConstantsError as exc:
        raise SettingsError(f"JOBREPORT_CONSTANTS_FILE={settings.constants_file!r}: {exc}"
                            ) from None


def _constants() -> Json:
    return cast(Json, current_app.extensions["jobreport.constants"])


@bp.get("/api/constants")
def constants() -> Response:
    """The allocation targets file (JOBREPORT_CONSTANTS_FILE) as JSON."""
    return jsonify(_constants())


@bp.get("/cluster")
def cluster() -> ResponseReturnValue:
    """The cluster now, from slurm-exporter's series in Prometheus."""
    s = auth.settings()
    # The same credentials and TLS as the reports' queries of that Prometheus.
    source = ClusterOverviewSource(prometheus_from(s), s.cluster)
    now = time.time()
    try:
        overview, unavailable = source.overview(now), None
    except SourceUnavailable as exc:
        overview, unavailable = None, exc.reason
    view = None
    if overview is not None:
        staff = auth.is_staff(g.user)
        # Staff see everything: scontrol is asked only on the others' behalf.
        view = cluster_view(overview, g.user, staff,
                            frozenset() if staff else _private_data())
        overview = view.overview
    accounts = _constants().get(s.cluster, {}).get("accounts", {})
    targets = {a: v["gpu_years"] for a, v in accounts.items() if "gpu_years" in v}
    plot = usage_svg(view.overview.usage, targets, now) if view and not view.hidden_by else None
    return render_template("cluster.html", cluster=s.cluster, overview=overview, view=view,
                           unavailable=unavailable, plot=plot, targets=accounts)
