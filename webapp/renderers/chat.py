"""The report as a chat notice: the email's subject as the title, the report's headline
verdict, each finding with one line of advice, and the link to the job's page. Plain
text: every piece of job text is made visible (``formatting.visible``), so a job name
cannot start a line of its own or hide text, and the whole notice stays within the
smallest common chat limit."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from webapp.formatting import visible
from webapp.model import Finding, JobReport
from webapp.renderers.presentation import sorted_findings
from webapp.renderers.wording import headline, verdict

# Telegram and ntfy take 4096 (characters, bytes); leave room for a service's own prefix.
NOTICE_MAX_BYTES = 4000
TITLE_MAX = 200  # apprise's smallest title limit among the chat services is 250
NAME_MAX = 60  # a job name in the title (as in the email's subject)
LINE_MAX = 400  # the headline, one finding's message, one advice line


@dataclass(frozen=True)
class Notice:
    """One chat notice: the headline (apprise's title) and the body."""

    title: str
    body: str


def _cut(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters, its job text shown, not obeyed."""
    clean = visible(" ".join(text.split()) if text.isprintable() else text).strip()
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def job_path(cluster: str, job_id: str, multi_cluster: bool) -> str:
    """The job page's path, as the web app serves it (``webapp.web.views.job_url``)."""
    jid = quote(job_id, safe="")
    return f"/c/{quote(cluster, safe='')}/jobs/{jid}" if multi_cluster else f"/jobs/{jid}"


def title(report: JobReport) -> str:
    """'Job 123 (train) on demo: 2 problems to fix', as the email's subject says it."""
    name = f" ({_cut(report.job_name, NAME_MAX)})" if report.job_name else ""
    return _cut(f"Job {_cut(report.job_id, 40)}{name} on {_cut(report.cluster, 64)}: "
                f"{verdict(report)}", TITLE_MAX)


def _finding_lines(f: Finding) -> list[str]:
    return [f"[{f.severity.value.upper()}] {_cut(f.message, LINE_MAX)}",
            f"  What to do: {_cut(f.advice, LINE_MAX)}"]


def render(report: JobReport, page_url: str) -> Notice:
    """The notice of one job; findings past the size limit are counted, not listed, and
    the link always fits."""
    tail = ["", f"Full report: {page_url}"]
    budget = NOTICE_MAX_BYTES - len("\n".join(tail).encode()) - 80  # room for "... more"
    lines: list[str] = [_cut(headline(report), LINE_MAX), ""]
    findings = sorted_findings(report)
    for shown, f in enumerate(findings):
        more = _finding_lines(f)
        if len("\n".join(lines + more).encode()) > budget:
            left = len(findings) - shown
            lines.append(f"... and {left} more finding{'s' if left != 1 else ''} on the page.")
            break
        lines += more
    return Notice(title(report), "\n".join(lines + tail))
