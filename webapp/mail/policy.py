"""Who gets a report email and who does not: addresses, opt-outs, the sync's rules."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from webapp.model import JobReport, Severity
from webapp.settings import Settings

log = logging.getLogger(__name__)

USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")  # safe inside an address
_BAD_ADDRESS = re.compile(r"[\s,;<>]")


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


def owner_address(report: JobReport, settings: Settings) -> str | None:
    """JOBREPORT_MAIL_MAP's line for the user, else JOBREPORT_MAIL_TO with {user} filled.

    The template is only used for plain user names, so a hostile name cannot add
    recipients or headers."""
    user = report.user
    if not user:
        return None
    if settings.mail_map:
        mapped = _read_pairs(settings.mail_map).get(user)
        if mapped:
            return mapped
    if not USER_RE.match(user):
        log.warning("user name %r of job %s is not usable in an address", user, report.job_id)
        return None
    return settings.mail_to.replace("{user}", user)


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


def usable_address(addr: str | None) -> bool:
    """One plain address: no spaces, separators or brackets that could add recipients."""
    return bool(addr) and "@" in addr and not _BAD_ADDRESS.search(addr)
