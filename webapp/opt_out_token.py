"""The signed token of the one-click opt-out link every email carries.

It names a (cluster, user) and the time it was issued, and is signed with the web app's
secret key (itsdangerous, as Flask's sessions are), so the link works without signing in
and nobody can forge one for another user. It works for JOBREPORT_OPT_OUT_LINK_DAYS after
the email was sent: a copy of an old email (forwarded, pasted into a ticket) cannot
silence somebody's reports for ever. An expired link is told apart from a forged one, so
its page can explain and offer sign-in instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from itsdangerous import BadSignature, TimestampSigner, URLSafeSerializer, URLSafeTimedSerializer

SALT = "jobreport-opt-out"
DAY = 86400


@dataclass(frozen=True)
class OptOutToken:
    cluster: str
    user: str
    expired: bool = False


def _serializer(secret: str, clock: Callable[[], float]) -> URLSafeTimedSerializer:
    class Signer(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(clock())

    return URLSafeTimedSerializer(secret, salt=SALT, signer=Signer)


def _names(value: object) -> tuple[str, str] | None:
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, str) and v for v in value)):
        return None
    return value[0], value[1]


def make_token(secret: str, cluster: str, user: str,
               clock: Callable[[], float] = time.time) -> str:
    return _serializer(secret, clock).dumps([cluster, user])


def read_token(secret: str, token: str, max_age_days: float,
               clock: Callable[[], float] = time.time) -> OptOutToken | None:
    """Whom a token this secret signed names, and whether it has expired; None for
    anything else. A link from before links carried their issue time reads as expired."""
    try:
        value, issued = _serializer(secret, clock).loads(token, return_timestamp=True)
        expired = clock() - issued.timestamp() > max_age_days * DAY
    except BadSignature:
        try:
            value, expired = URLSafeSerializer(secret, salt=SALT).loads(token), True
        except BadSignature:
            return None
    names = _names(value)
    return OptOutToken(*names, expired=expired) if names else None


def opt_out_url(public_url: str, secret: str, cluster: str, user: str) -> str:
    return f"{public_url.rstrip('/')}/unsubscribe/{make_token(secret, cluster, user)}"
