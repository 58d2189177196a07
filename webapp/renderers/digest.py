"""The weekly digest email: a user's jobs of the week, what they left unused, and their
most common finding with its advice. Text and HTML, no attachment."""

from __future__ import annotations

from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default
from email.utils import formatdate

from webapp.archive.week_sums import Digest
from webapp.renderers import site_wording
from webapp.renderers.email import header_text, list_unsubscribe
from webapp.renderers.templates import environment

_env = None


def day(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def subject(d: Digest) -> str:
    n = len(d.jobs)
    return header_text(f"Your jobs on {d.cluster}, {day(d.since)} to {day(d.until - 1)}: "
                       f"{n} job{'s' if n != 1 else ''}, {d.cpu_hours:.1f} CPU-hours unused")


def render(d: Digest, to_addr: str, from_addr: str, message_id: str,
           unsubscribe_url: str | None = None, policy_dir: str = "") -> EmailMessage:
    """The digest, signed with the site's wording from ``policy_dir``."""
    global _env
    if _env is None:
        _env = environment()
    first_day, last_day = day(d.since), day(d.until - 1)
    footer = site_wording.render(policy_dir, "digest_footer", {
        "user": d.user, "cluster": d.cluster, "first_day": first_day, "last_day": last_day,
        "jobs": len(d.jobs)})
    parts = {"d": d, "first_day": first_day, "last_day": last_day, "footer": footer,
             "unsubscribe_url": unsubscribe_url,
             "ended": {j.job_id: datetime.fromtimestamp(j.end_time, UTC)
                       .strftime("%a %d %H:%M") for j in d.jobs}}
    msg = EmailMessage(policy=default)
    msg["From"] = from_addr
    msg["To"] = to_addr
    msg["Subject"] = subject(d)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = message_id
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Jobreport-Digest"] = header_text(f"{d.user} {day(d.since)}")
    list_unsubscribe(msg, unsubscribe_url)
    msg.set_content(_env.get_template("email/digest.txt").render(**parts))
    msg.add_alternative(_env.get_template("email/digest.html").render(**parts), subtype="html")
    return msg
