"""A job's report as the email its owner gets, and the SMTP connection that sends it.

Every email goes through the durable outbox (``webapp.mail.outbox``): recorded first,
marked sent only after the SMTP server accepted it. Who gets one is decided in one
place, ``webapp.mail.owner``, for the sync and a send by hand alike.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import make_msgid

from webapp.mail.outbox import Sender
from webapp.mail.smtp import SmtpSender
from webapp.model import JobReport
from webapp.opt_out_token import opt_out_url
from webapp.renderers import email, site_wording
from webapp.renderers.pdf_store import pdf_key, pdf_store
from webapp.settings import Settings

Connect = Callable[[], Sender]
log = logging.getLogger(__name__)


def message(report: JobReport, to_addr: str, settings: Settings) -> EmailMessage:
    domain = settings.mail_from.rpartition("@")[2] or None
    from webapp.renderers import pdf  # LaTeX's modules only where a PDF is drawn

    # The attachment is the PDF the web page links to: built once, kept for both (a web
    # request building the same one holds it up to a minute). A caller who cannot write
    # the store (staff sending one by hand elsewhere) still sends it, unkept.
    render = functools.partial(
        pdf.render, footer=site_wording.report_footer(settings.policy_dir, report))
    try:
        store = pdf_store(settings, wait=60)
    except OSError as exc:
        log.warning("PDF store %s not usable (%s): the PDF is not kept",
                    settings.pdf_cache_dir, exc)
        attachment = render(report)
    else:
        attachment = store.build(report, render, pdf_key(report.cluster, report.job_id,
                                                         settings.policy_dir), slot=False)
    return email.render(report, to_addr, settings.mail_from, message_id=make_msgid(domain=domain),
                        unsubscribe_url=owner_opt_out_url(settings, report.cluster, report.user),
                        report_url=report_page_url(settings, report), pdf=attachment,
                        policy_dir=settings.policy_dir)


def report_page_url(settings: Settings, report: JobReport) -> str:
    """The report's web page as its owner reaches it (``/c/<cluster>/...`` with several
    clusters served, as ``views.job_url`` builds it)."""
    path = (f"/c/{report.cluster}/jobs/{report.job_id}" if settings.multi_cluster
            else f"/jobs/{report.job_id}")
    return settings.public_url + path


def owner_opt_out_url(settings: Settings, cluster: str, user: str | None) -> str | None:
    """The owner's one-click opt-out link (None without a user or a secret key to sign)."""
    if not user or not settings.secret_key:
        return None
    return opt_out_url(settings.public_url, settings.secret_key, cluster, user)


def smtp_connect(settings: Settings) -> Connect:
    return lambda: SmtpSender(settings)
