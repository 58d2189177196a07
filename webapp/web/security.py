"""Response headers every page gets."""

from __future__ import annotations

from flask import Response, request


def security_headers(response: Response) -> Response:
    """No scripts at all, no framing, no sniffing; reports are private."""
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if request.endpoint != "views.healthz":
        response.headers.setdefault("Cache-Control", "private, no-store")
    return response
