"""Error pages: one template for HTML, JSON for .json URLs and the API (/api/v1/), plain text
for .txt and .pdf."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, make_response, render_template, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

from webapp.detectors.policy import PolicyError
from webapp.model import InvalidJobId, JobNotFound, SourceUnavailable
from webapp.web.auth import API_PREFIX
from webapp.web.query_params import BadQuery

log = logging.getLogger(__name__)

SOURCE_NAMES = {"accounting": "The accounting database"}


def error_response(code: int, title: str, message: str) -> ResponseReturnValue:
    """The error in the format the URL asked for (the API's always JSON)."""
    if request.path.endswith(".json") or request.path.startswith(API_PREFIX):
        return jsonify(error=title, message=message, status=code), code
    if request.path.endswith((".txt", ".pdf")):
        return f"{code} {title}: {message}\n", code, {"Content-Type": "text/plain; charset=utf-8"}
    return render_template("errors/error.html", code=code, title=title, message=message), code


def invalid_job_id(exc: InvalidJobId) -> ResponseReturnValue:
    return error_response(400, "Bad Request", f"{exc}.")


def bad_query(exc: BadQuery) -> ResponseReturnValue:
    """A parameter we do not accept: 400 naming it (the message starts with its name)."""
    return error_response(400, "Bad Request", f"{exc}.")


def job_not_found(exc: JobNotFound) -> ResponseReturnValue:
    return error_response(404, "Not Found", f"No job {exc.job_id} is known to the accounting "
                                             "database.")


def source_unavailable(exc: SourceUnavailable) -> Response:
    log.error("%s", exc)
    what = SOURCE_NAMES.get(exc.source, f"The {exc.source} source")
    response = make_response(error_response(
        503, "Service Unavailable",
        f"{what} is unavailable right now, so no report can be built. Try again in a few "
        "minutes; if it persists, tell the cluster administrators."))
    response.headers["Retry-After"] = "60"
    return response


def policy_broken(_exc: PolicyError) -> Response:
    """The site's policy did not load in this process yet (an edit broken before a worker
    started): no report is judged by a guess. The loader logged the errors once; staff
    see them on every page."""
    response = make_response(error_response(
        503, "Service Unavailable",
        "The site's policy (JOBREPORT_POLICY_DIR) does not load, so no report can be judged. "
        "Tell the cluster administrators: `jobreport policy check` names the errors."))
    response.headers["Retry-After"] = "60"
    return response


def http_error(exc: HTTPException) -> Response:
    """The error page, keeping the exception's own headers (Retry-After, Allow, ...)."""
    response = make_response(error_response(exc.code or 500, exc.name,
                                            exc.description or exc.name))
    for name, value in exc.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def register(app: Flask) -> None:
    """Install the handlers on the app."""
    app.register_error_handler(InvalidJobId, invalid_job_id)
    app.register_error_handler(BadQuery, bad_query)
    app.register_error_handler(JobNotFound, job_not_found)
    app.register_error_handler(SourceUnavailable, source_unavailable)
    app.register_error_handler(PolicyError, policy_broken)
    app.register_error_handler(HTTPException, http_error)
