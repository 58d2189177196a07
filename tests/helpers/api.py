"""The JSON API's responses checked against the OpenAPI description the app serves
(``webapp/web/openapi.json``), by openapi-core, which checks the description itself too."""

from __future__ import annotations

import json

from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse

from webapp.web.api import OPENAPI

SPEC = json.loads(OPENAPI.read_text())
DESCRIBED = OpenAPI.from_dict(SPEC)  # raises when the document is no valid OpenAPI 3.1


def checked(resp):  # noqa: ANN001, ANN201 - a Flask test client's response
    """``resp``, once openapi-core found its status and body to be what the description
    says of its path and method (raises otherwise)."""
    DESCRIBED.validate_response(WerkzeugOpenAPIRequest(resp.request),
                                WerkzeugOpenAPIResponse(resp))
    return resp


def checked_http(resp):  # noqa: ANN001, ANN201 - a requests response
    """``checked`` for an answer over HTTP (a served app, requests)."""
    DESCRIBED.validate_response(RequestsOpenAPIRequest(resp.request),
                                RequestsOpenAPIResponse(resp))
    return resp
