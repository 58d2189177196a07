"""The report as an email: text and HTML alternatives plus the PDF, to the job's owner.

Headers are built with ``email.message.EmailMessage`` (policy ``default``, which also
refuses CR/LF in header values); every piece of Slurm text that reaches a header is
made visible first (``formatting.visible``: a line break is the two characters ``\\n``),
so a job name cannot add a header.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import Policy, default
from email.utils import formatdate, make_msgid

from webapp.formatting import visible
from webapp.model import JobReport
from webapp.renderers import site_wording
from webapp.renderers.presentation import context
from webapp.renderers.templates import environment
from webapp.renderers.wording import verdict

SUBJECT_NAME_MAX = 60
LINE_MAX = 998  # RFC 5322 2.1.1: no header line longer, CRLF not counted
FOLD_AT = 78
ENCODED_WORD_BREAK = "=\N{WORD JOINER}?"
_env = None


def header_text(text: object, limit: int | None = None) -> str:
    """Slurm text made safe for a header: control characters (CR, LF, ...) shown, not
    obeyed (``visible``), and RFC 2047 encoded-word openers ``=?`` are broken with an
    invisible WORD JOINER.

    The email package decodes encoded-words in a header value it is given and writes the
    decoded text back unencoded when it is ASCII, so a job named
    ``=?utf-8?q?x=0D=0AReply-To:...?=`` would put a real CR LF in the message; with the
    joiner the value is non-ASCII and goes out as one encoded-word of the literal text."""
    clean = visible(str(text)).strip().replace("=?", ENCODED_WORD_BREAK)
    if limit is not None and len(clean) > limit:
        clean = clean[: limit - 1] + "…"
    return clean


def subject(report: JobReport) -> str:
    """'Job 123 (train) on demo: 2 problems to fix': the job's name and the verdict."""
    name = f" ({header_text(report.job_name, SUBJECT_NAME_MAX)})" if report.job_name else ""
    # Each piece cleaned once: a second pass would show the name's word joiners as \u2060.
    return (f"Job {header_text(report.job_id)}{name} on {header_text(report.cluster)}: "
            f"{verdict(report)}")


def _address(addr: str) -> str:
    if not addr.isprintable() or "@" not in addr or "=?" in addr:
        raise ValueError(f"not a usable email address: {addr!r}")
    return addr


class UrlHeader(str):
    """A header whose value is one ``<URL>`` (RFC 2369), written as it is.

    Given a plain string, the email package folds a value longer than a line into RFC 2047
    encoded-words (``=?utf-8?q?=3Chttps...?=``), which mail clients do not decode in this
    header, so they show no unsubscribe button. A URL has no whitespace to fold at, so the
    line stays whole up to RFC 5322's hard limit (998; 78 is a SHOULD); only past that is
    it folded, inside the brackets, where RFC 2369 says whitespace is ignored. The email
    package stores a value that carries its own ``name`` and ``fold`` as it is."""

    name: str

    def __new__(cls, name: str, url: str) -> UrlHeader:
        if not (url.isascii() and url.isprintable()) or any(c in url for c in " <>"):
            raise ValueError(f"not a URL to put in a header: {url!r}")
        value = super().__new__(cls, f"<{url}>")
        value.name = name
        return value

    def fold(self, *, policy: Policy) -> str:
        line = f"{self.name}: {self}"
        pieces: list[str] = []
        while len(line) > (LINE_MAX if not pieces else FOLD_AT):
            pieces.append(line[:FOLD_AT])
            line = " " + line[FOLD_AT:]
        return policy.linesep.join([*pieces, line]) + policy.linesep


def list_unsubscribe(msg: EmailMessage, url: str | None) -> None:
    """RFC 2369 / RFC 8058 one-click opt-out headers (mail clients show a button)."""
    if url:
        msg["List-Unsubscribe"] = UrlHeader("List-Unsubscribe", url)
        msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"


def render(report: JobReport, to_addr: str, from_addr: str, *, message_id: str | None = None,
           pdf: bytes | None = None, unsubscribe_url: str | None = None,
           report_url: str | None = None, policy_dir: str = "") -> EmailMessage:
    """The message, PDF attached (rendered here unless ``pdf`` is given): the headline,
    the findings with advice, the ``#SBATCH`` block, then ``report_url`` (the web page);
    signed with the site's wording from ``policy_dir`` (JOBREPORT_POLICY_DIR)."""
    global _env
    if _env is None:
        _env = environment()
    parts = {**context(report, charts=[]), "unsubscribe_url": unsubscribe_url,
             "report_url": report_url,
             "footer": site_wording.render(policy_dir, "owner_email_footer",
                                           site_wording.report_values(report,
                                                                      report_url=report_url))}
    msg = EmailMessage(policy=default)
    msg["From"] = _address(from_addr)
    msg["To"] = _address(to_addr)
    msg["Subject"] = subject(report)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = message_id or make_msgid(domain=from_addr.rpartition("@")[2] or None)
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies
    msg["X-Jobreport-Job"] = header_text(report.job_id)
    list_unsubscribe(msg, unsubscribe_url)
    msg.set_content(_env.get_template("email/report.txt").render(**parts))
    msg.add_alternative(_env.get_template("email/report.html").render(**parts), subtype="html")
    if pdf is None:
        from webapp.renderers import pdf as pdf_renderer

        pdf = pdf_renderer.render(report)
    msg.add_attachment(pdf, maintype="application", subtype="pdf",
                       filename=f"job-{header_text(report.job_id)}.pdf")
    return msg
