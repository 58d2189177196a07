"""``/prometheus/``: Prometheus' read API for Grafana, passing only what the asker may read.

Who asks: the signed-in session, or the user header (``X-Grafana-User``, else
``REMOTE_USER``/``X-Remote-User``) of a peer listed in JOBREPORT_PROMETHEUS_FRONT_PROXIES;
from anybody else the header is ignored. Every expression and ``match[]`` selector is
checked by ``promql_guard`` and every job it names by the report pages' check
(``reports.may_see``: its owner, or a coordinator of its account); then the request goes
to JOBREPORT_PROMETHEUS_URL with the same parameters and Prometheus' answer comes back as
it is. A refusal is a 403 in Prometheus' error format, naming why, and one audit line in
the log. A job picker (``label_values(jobs_info{cluster="$cluster"}, jobid)``: per-job
series that name no job) is no refusal: its answer is cut to the asker's own jobs of the
window (``picked``, ``cut``), and the clusters' names pass as they are. Only Grafana's
read endpoints exist here; every other path under /prometheus/ is a 404.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from datetime import UTC, datetime

import promql_parser as pp
import requests
from flask import Blueprint, Response, current_app, request

from webapp.model import SourceUnavailable
from webapp.settings import Settings
from webapp.sources.prometheus_http import make_session
from webapp.web import auth, promql_guard, reports
from webapp.web.promql_guard import BadExpression, Refused, Rules

bp = Blueprint("prometheus_front", __name__, url_prefix="/prometheus")
log = logging.getLogger(__name__)

GRAFANA_USER_HEADER = "X-Grafana-User"
AUDIT_QUERY_CHARS = 2000  # of the refused request's expressions, in the audit line
SINGLE = ("query", "time", "start", "end", "step")  # Prometheus reads one of each
# Days of jobs a job picker lists when Grafana sends no start (it sends its time range).
PICKER_DAYS = 30
AS_IS = "as is"  # a picker's answer sent as Prometheus gave it


class BadParam(Exception):
    """A parameter Prometheus would refuse too (400, ``bad_data``)."""


def error(status: int, kind: str, message: str) -> Response:
    """An answer in Prometheus' error format."""
    body = json.dumps({"status": "error", "errorType": kind, "error": message})
    return Response(body, status=status, mimetype="application/json")


def _settings() -> Settings:
    return auth.settings()


def rules(settings: Settings) -> Rules:
    return Rules(public=settings.prometheus_front_public, cluster=settings.cluster,
                 cluster_label=settings.prometheus_cluster_label,
                 max_nodes=settings.prometheus_front_max_nodes,
                 max_points=settings.prometheus_front_max_points)


def asker() -> str | None:
    """Who asks: a trusted peer's user header, else the session's user (password login)."""
    settings = _settings()
    if auth.from_trusted_proxy():
        named = (request.headers.get(GRAFANA_USER_HEADER)
                 or request.environ.get("REMOTE_USER")
                 or request.headers.get(auth.REMOTE_USER_HEADER) or "").strip()
        if named:
            return named
    return auth.session_user() if settings.auth == "password" else None


def values(name: str) -> list[str]:
    """A parameter's every value, from the URL and the form (Grafana sends either)."""
    return request.args.getlist(name) + request.form.getlist(name)


def single(name: str, required: bool = True) -> str | None:
    got = values(name)
    if len(got) > 1:
        # Prometheus takes the form's over the URL's: check one, send another, never.
        raise BadParam(f"{name} is given more than once")
    if not got and required:
        raise BadParam(f"{name} is missing")
    return got[0] if got else None


def timestamp(name: str) -> float:
    """``start``/``end`` as Prometheus reads them: Unix seconds or RFC 3339."""
    text = single(name) or ""
    try:
        value = float(text)
    except ValueError:
        try:
            value = datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise BadParam(f"{name} {text!r} is neither Unix seconds nor RFC 3339") from None
    if not math.isfinite(value):
        raise BadParam(f"{name} {text!r} is not a time")
    return value


def step_seconds() -> float:
    """``step`` as Prometheus reads it: seconds or a duration (``15s``, ``1m``)."""
    text = single("step") or ""
    try:
        value = float(text)
    except ValueError:
        try:
            value = pp.parse_duration(text).total_seconds()
        except ValueError:
            raise BadParam(f"step {text!r} is neither seconds nor a duration") from None
    if not math.isfinite(value) or value <= 0:
        raise BadParam(f"step {text!r} must be a positive number of seconds")
    return value


def jobs_read(endpoint: str, settings: Settings, staff: bool) -> frozenset[str]:
    """The ids of the jobs the request reads (to be owned by the asker); Refused,
    BadExpression or BadParam when it is not to be sent at all."""
    r = rules(settings)
    for name in SINGLE:
        single(name, required=False)
    if endpoint in ("query", "query_range"):
        query = single("query") or ""
        if endpoint == "query_range":
            step = step_seconds()
            promql_guard.check_range(timestamp("start"), timestamp("end"), step, r)
        return promql_guard.jobs_in_query(query, r, staff=staff)
    selectors = values("match[]")
    if not selectors and endpoint == "series":
        raise BadParam("match[] is missing")  # as Prometheus says
    if not selectors and not staff:
        raise Refused(f"{endpoint} needs match[] selectors naming what it reads")
    return promql_guard.jobs_in_match(selectors, r, staff=staff)


def forward(path: str, settings: Settings) -> Response:
    """The request, same method and parameters, to Prometheus; its answer as it is."""
    session = current_app.extensions.get("jobreport.prometheus_front")
    if session is None:
        session = current_app.extensions.setdefault("jobreport.prometheus_front", make_session(
            user=settings.prometheus_user, password_file=settings.prometheus_password_file,
            token_file=settings.prometheus_token_file,
            ca_bundle=settings.prometheus_ca_bundle,
            client_cert=settings.prometheus_client_cert,
            client_key=settings.prometheus_client_key))
    url = f"{settings.prometheus_url}/api/v1/{path}"
    try:
        answer = session.request(
            request.method, url, params=list(request.args.items(multi=True)),
            data=list(request.form.items(multi=True)) if request.method == "POST" else None,
            timeout=settings.prometheus_timeout, allow_redirects=False)
    except requests.RequestException as exc:
        log.error("prometheus front: %s did not answer: %s", path, type(exc).__name__)
        return error(503, "unavailable", "Prometheus did not answer; try again later")
    return Response(answer.content, status=answer.status_code,
                    content_type=answer.headers.get("Content-Type", "application/json"))


def audit(user: str | None, endpoint: str, reason: str) -> None:
    """One line per refusal: who, what they sent, why not."""
    sent = json.dumps(values("query") + values("match[]"))[:AUDIT_QUERY_CHARS]
    log.warning("prometheus front refused user=%s peer=%s endpoint=%s reason=%s query=%s",
                json.dumps(user), auth.peer_address(), endpoint, json.dumps(reason), sent)


def picked(endpoint: str, label: str | None, settings: Settings, user: str
           ) -> frozenset[str] | str | None:
    """A job picker's request (``promql_guard.lists_jobs``): the asker's own job ids,
    which the answer is cut to (``label_values`` of the job label, ``series``); ``AS_IS``
    for which clusters there are (``label_values`` of the cluster label: no secret);
    None for any other request, checked as usual."""
    r = rules(settings)
    if endpoint == "label_values" and label == (r.cluster_label or "cluster"):
        # the picker of the cluster, which its selectors cannot name yet
        unpinned = dataclasses.replace(r, cluster_label="")
        return AS_IS if promql_guard.lists_jobs(values("match[]"), unpinned) else None
    listing = endpoint == "series" or (endpoint == "label_values" and label == r.job_label)
    if not listing:
        return None
    if not promql_guard.lists_jobs(values("match[]"), r):
        if r.cluster_label and promql_guard.lists_jobs(
                values("match[]"), dataclasses.replace(r, cluster_label="")):
            raise Refused(f"a job picker's selectors must name the cluster: one Prometheus "
                          f"holds several clusters' jobs, add {r.cluster_label}=\"{r.cluster}\"")
        return None
    start = single("start", required=False)
    since = (timestamp("start") if start is not None
             else datetime.now(UTC).timestamp() - PICKER_DAYS * 86400)
    return reports.get_service().job_ids(user, datetime.fromtimestamp(since, UTC))


def cut(body: bytes, label: str | None, own: frozenset[str], settings: Settings) -> bytes:
    """Prometheus' answer to a job picker with only the asker's jobs: label values among
    ``own``; series whose job label is one of them (and of this cluster, where one
    Prometheus holds several)."""
    r = rules(settings)
    data = json.loads(body)
    if data.get("status") != "success":
        return body
    if label is not None:
        data["data"] = sorted(v for v in data.get("data") or () if v in own)
    else:
        data["data"] = [s for s in data.get("data") or ()
                        if s.get(r.job_label) in own
                        and (not r.cluster_label or s.get(r.cluster_label) == r.cluster)]
    return json.dumps(data).encode()


def answer(endpoint: str, path: str, label: str | None = None) -> Response:
    settings = _settings()
    user = asker()
    if user is None:
        return error(401, "unauthorized", "no user: sign in to the web app, or send "
                     f"{GRAFANA_USER_HEADER} from an address of JOBREPORT_PROMETHEUS_FRONT_PROXIES")
    staff = auth.is_staff(user)
    try:
        own = None if staff else picked(endpoint, label, settings, user)
        if own is None:
            ids = jobs_read(endpoint, settings, staff)
            if not staff:
                promql_guard.check_owners(ids, lambda job_id: reports.may_see(user, job_id))
    except (BadParam, BadExpression) as exc:
        audit(user, endpoint, str(exc))
        return error(400, "bad_data", str(exc))
    except Refused as exc:
        audit(user, endpoint, str(exc))
        return error(403, "forbidden", str(exc))
    except SourceUnavailable as exc:
        log.error("prometheus front: %s", exc)
        return error(503, "unavailable", "the accounting database, which says whose jobs "
                                         "they are, is unavailable; try again later")
    sent = forward(path, settings)
    if isinstance(own, frozenset) and sent.status_code == 200:
        sent.set_data(cut(sent.get_data(), label, own, settings))
    return sent


@bp.route("/api/v1/<any(query, query_range, series, labels):endpoint>",
          methods=("GET", "POST"))
def api(endpoint: str) -> Response:
    return answer(endpoint, endpoint)


@bp.route("/api/v1/label/<name>/values", methods=("GET", "POST"))
def label_values(name: str) -> Response:
    if not promql_guard.LABEL_NAME.fullmatch(name):
        return error(400, "bad_data", f"invalid label name {name!r}")
    return answer("label_values", f"label/{name}/values", label=name)


@bp.route("/", defaults={"rest": ""}, methods=("GET", "POST"))
@bp.route("/<path:rest>", methods=("GET", "POST"))
def not_found(rest: str) -> Response:
    return error(404, "not_found", "only Grafana's read endpoints are served here: "
                 "api/v1/query, query_range, series, labels, label/<name>/values")
