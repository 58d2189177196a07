"""The staff report emailed to the staff list, through the durable outbox: one row per
address and window end (``staff:<cluster>:<until>:<address>``), so a re-run of the same
report sends nothing twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from email.message import EmailMessage
from email.policy import default
from email.utils import formatdate, make_msgid

from webapp.mail.outbox import Outbox, Sender, deliver
from webapp.mail.policy import checked_address
from webapp.mail.smtp import SmtpSender
from webapp.renderers.email import header_text
from webapp.renderers.templates import environment
from webapp.settings import Settings
from webapp.staff.render import heading, render_text, when
from webapp.staff.tables import StaffReport


def staff_addresses(settings: Settings) -> list[str]:
    """JOBREPORT_STAFF_MAIL_TO; BadAddress (a ValueError) naming an unusable address."""
    out = [a.strip() for a in settings.staff_mail_to.split(",") if a.strip()]
    for addr in out:
        checked_address(addr, settings.smtp_utf8, "JOBREPORT_STAFF_MAIL_TO")
    return out


def message(report: StaffReport, to_addr: str, settings: Settings) -> EmailMessage:
    msg = EmailMessage(policy=default)
    msg["From"] = settings.mail_from
    msg["To"] = to_addr
    msg["Subject"] = header_text(f"Staff report {report.cluster}: {report.jobs} jobs to "
                                 f"{when(report.until)}")
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = make_msgid(domain=settings.mail_from.rpartition("@")[2] or None)
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(render_text(report))
    html = environment().get_template("email/staff.html").render(
        report=report, heading=heading(report), base=settings.web_url)
    msg.add_alternative(html, subtype="html")
    return msg


def send_staff_report(report: StaffReport, settings: Settings,
                      connect: Callable[[], Sender] | None = None) -> tuple[int, Counter[str]]:
    """Queue one email per staff address, then deliver; (newly queued, delivery counts)."""
    outbox = Outbox(settings.outbox, metrics_dir=settings.metrics_textfile_dir)
    queued = 0
    try:
        with outbox.lock():
            for addr in staff_addresses(settings):
                key = f"staff:{report.cluster}:{int(report.until)}:{addr}"
                if outbox.get(key) is None:
                    queued += outbox.enqueue(key, "-", "staff", message(report, addr, settings))
            return queued, deliver(outbox, connect or (lambda: SmtpSender(settings)))
    finally:
        outbox.close()
