"""The signed token of the one-click opt-out link every email carries.

It names a (cluster, user) and is signed with the web app's secret key (itsdangerous, as
Flask's sessions are), so the link works without signing in and nobody can forge one for
another user. It does not expire: an opt-out link in a year-old email still works.
"""

from __future__ import annotations

from itsdangerous import BadSignature, URLSafeSerializer

SALT = "jobreport-opt-out"


def make_token(secret: str, cluster: str, user: str) -> str:
    return URLSafeSerializer(secret, salt=SALT).dumps([cluster, user])


def read_token(secret: str, token: str) -> tuple[str, str] | None:
    """(cluster, user) of a token this secret signed; None for anything else."""
    try:
        value = URLSafeSerializer(secret, salt=SALT).loads(token)
    except BadSignature:
        return None
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, str) and v for v in value)):
        return None
    return value[0], value[1]


def opt_out_url(public_url: str, secret: str, cluster: str, user: str) -> str:
    return f"{public_url.rstrip('/')}/unsubscribe/{make_token(secret, cluster, user)}"
