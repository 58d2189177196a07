"""The monthly account report: per account with coordinators (Slurm's, ``sacctmgr``), one
email to each coordinator with the report as text and as a PDF attachment, through the
durable outbox as the weekly digest goes (``digest_queue``'s batch, lock and delivery),
keyed ``cluster:account-report:account:coordinator:first-day`` so a re-run queues none
twice; a coordinator opted out of the digest (the file or the link) gets none either."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default
from email.utils import formatdate, make_msgid

from webapp.archive.account_sums import AccountSums
from webapp.archive.mail_state import MailState
from webapp.mail.outbox import Outbox, Rendered, deliver_unless_busy
from webapp.mail.policy import owner_address, read_opt_out
from webapp.mail.sending import Connect, owner_opt_out_url
from webapp.model import JobReport
from webapp.renderers.email import header_text, list_unsubscribe
from webapp.settings import Settings
from webapp.sources.coordinators import Coordinators
from webapp.staff.account_render import render_pdf, render_text, subject
from webapp.staff.account_report import AccountReport, Recent, build_account_report

KIND = "account-report"


def month_period(first: datetime) -> tuple[int, int]:
    """[first day 00:00, next month's first day 00:00) UTC of ``first``'s month."""
    start = first.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return int(start.timestamp()), int(end.timestamp())


def last_month(now: datetime) -> tuple[int, int]:
    """The last full calendar month before ``now`` (UTC)."""
    this, _ = month_period(now)
    return month_period(datetime.fromtimestamp(this - 1, UTC))


def report_key(r: AccountReport, coordinator: str) -> str:
    first = datetime.fromtimestamp(r.since, UTC).strftime("%Y-%m-%d")
    return f"{r.cluster}:{KIND}:{r.account}:{coordinator}:{first}"


def render_email(r: AccountReport, to_addr: str, from_addr: str, message_id: str,
                 unsubscribe_url: str | None) -> EmailMessage:
    msg = EmailMessage(policy=default)
    msg["From"] = from_addr
    msg["To"] = to_addr
    msg["Subject"] = header_text(subject(r))
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = message_id
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Jobreport-Account-Report"] = header_text(f"{r.account} {r.since}")
    list_unsubscribe(msg, unsubscribe_url)
    msg.set_content(render_text(r))
    msg.add_attachment(render_pdf(r), maintype="application", subtype="pdf",
                       filename=f"account-{r.account}-"
                       f"{datetime.fromtimestamp(r.since, UTC):%Y-%m-%d}.pdf")
    return msg


@dataclass
class AccountRun:
    counts: Counter[str] = field(default_factory=Counter)
    delivery: Counter[str] = field(default_factory=Counter)


def send_account_reports(settings: Settings, sums: AccountSums, recent: Recent | None,
                         coordinators: Coordinators, outbox: Outbox, connect: Connect,
                         since: int, until: int, accounts: Sequence[str] = (),
                         no_deliver: bool = False) -> AccountRun:
    """Queue (and deliver, unless ``no_deliver``) each account's report of [since, until)
    to its coordinators; ``accounts``: only these (default every coordinated one)."""
    run = AccountRun()
    domain = settings.mail_from.rpartition("@")[2] or None
    opted = (read_opt_out(settings.mail_opt_out)
             | MailState(sums.db).opted_out(settings.cluster).keys())
    by_account = coordinators.by_account()
    batch: list[tuple[str, str, str, EmailMessage | Rendered]] = []
    for account in accounts or sorted(a for a, names in by_account.items() if names):
        names = by_account.get(account, ())
        if not names:
            run.counts["no coordinator"] += 1
            continue
        r = build_account_report(sums, settings.cluster, account, since, until, recent,
                                 settings.carbon_intensity, settings.carbon_country, names)
        for name in names:
            if name in opted:
                run.counts["opted out"] += 1
                continue
            to_addr = owner_address(JobReport(job_id=KIND, cluster=settings.cluster,
                                              user=name), settings)
            if to_addr is None:
                run.counts["no address"] += 1
                continue
            key = report_key(r, name)
            if outbox.get(key) is not None:  # no PDF rendered for nothing
                run.counts["already queued"] += 1
                continue
            batch.append((key, f"{KIND}:{account}", KIND, render_email(
                r, to_addr, settings.mail_from, make_msgid(domain=domain),
                owner_opt_out_url(settings, settings.cluster, name))))
    for queued in outbox.enqueue_many(batch):
        run.counts["queued" if queued else "already queued"] += 1
    if not no_deliver:
        run.delivery = deliver_unless_busy(outbox, connect)
    return run
