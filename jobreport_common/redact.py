"""Secrets out of messages: credentials in URLs and passwords in SQL never reach a user,
a report, a terminal or a log line through an error message."""

from __future__ import annotations

import re

# scheme://user:password@host -> scheme://user:***@host (and a bare token before @).
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@\s:]*)(?::[^/@\s]*)?@")
# IDENTIFIED BY 'x', IDENTIFIED BY PASSWORD 'x', PASSWORD('x'), PASSWORD = 'x'
_SQL_SECRET = re.compile(
    r"(?i)(?P<kw>IDENTIFIED\s+(?:VIA\s+\w+\s+USING\s+|WITH\s+\w+\s+(?:AS|BY)\s+|BY\s+(?:PASSWORD\s+)?)"
    r"|PASSWORD\s*\(\s*|PASSWORD\s*=\s*)(?P<q>['\"])(?:\\.|(?!(?P=q)).)*(?P=q)"
)
MASK = "***"


def redact_url(text: str) -> str:
    """Hide the password (or token) of every ``scheme://user:pw@host`` in ``text``.

        http://user:pw@prom:9090/api -> http://user:***@prom:9090/api
    """
    def hide(m: re.Match[str]) -> str:
        return f"{m.group('scheme')}{m.group('user')}:{MASK}@" if m.group(0).count(":") > 1 \
            else f"{m.group('scheme')}{MASK}@"

    return _URL_USERINFO.sub(hide, text)


def redact_sql(text: str) -> str:
    """Hide quoted passwords in SQL: ``IDENTIFIED BY 'pw'`` -> ``IDENTIFIED BY '***'``."""
    return _SQL_SECRET.sub(lambda m: f"{m.group('kw')}{m.group('q')}{MASK}{m.group('q')}", text)


def redact(text: str) -> str:
    """Both: what every error message goes through before anyone sees it."""
    return redact_sql(redact_url(text))
