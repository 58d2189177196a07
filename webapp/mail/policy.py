"""Who gets a report email and who does not: addresses, opt-outs, the sync's rules."""

from __future__ import annotations

import logging
import re
from email.errors import HeaderParseError, NonASCIILocalPartDefect
from email.headerregistry import Address
from pathlib import Path
from typing import TypeGuard

from webapp.model import JobReport, Severity
from webapp.settings import Settings

log = logging.getLogger(__name__)

USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")  # safe inside an address
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


class BadAddress(ValueError):
    """A user's mapped address, or one given by hand, that we will not send to."""


def _read_pairs(path: str) -> dict[str, str]:
    pairs = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2:
            pairs[parts[0]] = parts[1]
    return pairs


def read_opt_out(path: str) -> frozenset[str]:
    """User names, one per line ('#' comments allowed); an empty path means nobody."""
    if not path:
        return frozenset()
    return frozenset(w for line in Path(path).read_text().splitlines()
                     for w in line.split("#", 1)[0].split()[:1])


def address_problem(addr: str, smtputf8: bool) -> str | None:
    """Why ``addr`` is not one plain address we can send to, or None.

    The email package parses it as an RFC 5322 addr-spec (no display name, brackets, list
    or line break). A non-ASCII address is deliverable only with SMTPUTF8 (``smtputf8``:
    JOBREPORT_SMTP_UTF8); RFC 6532 widens atext by every non-ASCII character, so such a
    local part is checked with those characters read as letters (the package alone
    refuses them all)."""
    if not addr.isascii():
        if not smtputf8:
            return ("it is not ASCII, and JOBREPORT_SMTP_UTF8 is off (set it to 1 when the "
                    "SMTP server offers SMTPUTF8)")
        if not addr.isprintable():
            return "it holds a control character"
        addr = _NON_ASCII.sub("a", addr)
    try:
        parsed = Address(addr_spec=addr)
    except (ValueError, IndexError, HeaderParseError, NonASCIILocalPartDefect) as exc:
        return f"not an email address ({exc})"
    if not parsed.username or not parsed.domain:
        return "not an email address (it needs a local part and a domain)"
    return None


def checked_address(addr: str, smtputf8: bool, where: str) -> str:
    """``addr`` when usable, else BadAddress naming it, ``where`` it came from and why."""
    problem = address_problem(addr, smtputf8)
    if problem:
        raise BadAddress(f"{where}: {addr!r} is not usable: {problem}")
    return addr


def mapped_address(report: JobReport, settings: Settings) -> str | None:
    """JOBREPORT_MAIL_MAP's line for the user, else JOBREPORT_MAIL_TO with {user} filled;
    None without a user; BadAddress when the address it gives is not usable.

    The template is only used for plain user names, so a hostile name cannot add
    recipients or headers."""
    user = report.user
    if not user:
        return None
    if settings.mail_map:
        mapped = _read_pairs(settings.mail_map).get(user)
        if mapped:
            return checked_address(mapped, settings.smtp_utf8,
                                   f"JOBREPORT_MAIL_MAP ({settings.mail_map}), user {user}")
    if not USER_RE.match(user):
        log.warning("user name %r of job %s is not usable in an address", user, report.job_id)
        return None
    return checked_address(settings.mail_to.replace("{user}", user), settings.smtp_utf8,
                           f"JOBREPORT_MAIL_TO, user {user}")


def owner_address(report: JobReport, settings: Settings) -> str | None:
    """``mapped_address``, a usable address or None; an unusable one is logged as an
    error naming it (the watch and the digest count the user as having no address)."""
    try:
        return mapped_address(report, settings)
    except BadAddress as exc:
        log.error("%s", exc)
        return None


def skip_reason(report: JobReport, settings: Settings, opt_out: frozenset[str]) -> str | None:
    """Why the owner gets no email for this job (sync or by hand), or None to send."""
    if report.unfinished:
        return "still running"
    if report.user in opt_out:
        return "user opted out"
    if (report.elapsed_seconds or 0.0) < settings.mail_min_runtime:
        return f"ran under {settings.mail_min_runtime:.0f} s"
    if not report.findings:
        return "no findings"
    least = Severity(settings.mail_min_severity)
    if not any(f.severity.rank <= least.rank for f in report.findings):
        return f"no finding at or above {least.value}"
    return None


def usable_address(addr: str | None, smtputf8: bool = True) -> TypeGuard[str]:
    """One plain address (``address_problem``): nothing that could add recipients."""
    if not addr:
        return False
    return address_problem(addr, smtputf8) is None
