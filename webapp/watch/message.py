"""The emails `jobreport watch` sends: an alert (evidence table, the scancel command)
or the notice that the policy cancelled a job. Slurm text reaches headers only through
``header_text``; the HTML part is autoescaped."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import default
from email.utils import formatdate, make_msgid

from webapp.renderers import site_wording
from webapp.renderers.email import SUBJECT_NAME_MAX, header_text
from webapp.renderers.templates import environment
from webapp.watch.rules import Alert

NOTICE_DAYS = 30  # "3rd notice in 30 days"
TITLES = {
    "gpu_idle": "its GPUs are idle",
    "node_idle": "a node is idle",
    "memory_growth": "memory will run out",
    "time_limit_no_output": "time limit near, no recent output",
    "small_files_off_scratch": "many small files off scratch",
}
_env = None


def subject(alert: Alert, cluster: str, cancelled: bool) -> str:
    job = alert.job
    name = f" ({header_text(job.job_name, SUBJECT_NAME_MAX)})" if job.job_name else ""
    what = "cancelled: " if cancelled else "running, "
    return header_text(f"Job {job.job_id}{name} on {cluster} {what}"
                       f"{TITLES.get(alert.rule, alert.rule)}")


def render(alert: Alert, cluster: str, to_addr: str, from_addr: str, *,
           notice: str | None = None, cancelled: bool = False, grace: str = "",
           enforced: bool = False, policy_dir: str = "") -> EmailMessage:
    """One alert email; ``notice`` is the user's count ("3rd"), ``grace`` the policy's;
    signed with the site's wording from ``policy_dir``."""
    global _env
    if _env is None:
        _env = environment()
    job = alert.job
    footer = site_wording.render(policy_dir, "watch_footer", {
        "user": job.user, "cluster": cluster, "job_id": job.job_id, "job_name": job.job_name,
        "rule": alert.rule, "cancelled": cancelled})
    parts = {"alert": alert, "job": alert.job, "cluster": cluster, "notice": notice,
             "notice_days": NOTICE_DAYS, "cancelled": cancelled, "grace": grace,
             "enforced": enforced, "footer": footer}
    msg = EmailMessage(policy=default)
    msg["From"] = from_addr
    msg["To"] = to_addr
    msg["Subject"] = subject(alert, cluster, cancelled)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = make_msgid(domain=from_addr.rpartition("@")[2] or None)
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies
    msg["X-Jobreport-Job"] = header_text(alert.job.job_id)
    msg["X-Jobreport-Rule"] = alert.rule
    msg.set_content(_env.get_template("email/watch.txt").render(**parts))
    msg.add_alternative(_env.get_template("email/watch.html").render(**parts), subtype="html")
    return msg
