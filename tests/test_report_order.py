"""The report a person reads: one screen of text for an ordinary job (golden reports of the
labelled stack jobs), one order of sections in every format, and a short email.

The reports are real stack jobs as the JSON renderer wrote them (fixtures/reports/,
fixtures/SOURCES.md); ``UPDATE_GOLDEN=1`` rewrites the golden text files."""

from __future__ import annotations

import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.helpers.captured_reports import CAPTURED, REPORTS, captured
from tests.helpers.reports import sample_report
from webapp.renderers import email, html, pdf, text
from webapp.renderers import json as json_renderer
from webapp.renderers.sections import SECTIONS
from webapp.renderers.wording import headline

GOLDEN = REPORTS / "golden"
SCREEN = 40  # lines of one terminal screen
WIDTH = 80
EMAIL_LINES = 25  # before the first link
# What the labelled jobs of tests/helpers/labelled_jobs.py are: each is one screen.
ORDINARY = sorted(set(CAPTURED) - {"array"})


def _golden(name: str, out: str) -> str:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(out)
    return path.read_text()


@pytest.mark.parametrize("name", ORDINARY)
def test_golden_text_report_fits_one_screen(name):
    out = text.render(captured(name))
    assert out == _golden(name, out)
    lines = out.splitlines()
    assert len(lines) <= SCREEN, f"{name}: {len(lines)} lines"
    assert max(len(line) for line in lines) <= WIDTH
    for word in ("n/a", "unknown", "untyped", "rests on"):  # nothing a user cannot use
        assert word not in out, word


def test_details_and_audit_add_what_one_screen_leaves_out():
    report = captured("steps")
    short, full = text.render(report), text.render(report, details=True, audit=True)
    assert full.splitlines()[:3] == short.splitlines()[:3]  # title and headline
    for heading in ("Plots", "Steps", "Queue", "Waste", "Coverage", "Audit"):
        assert f"\n{heading}\n" in full and f"\n{heading}\n" not in short
    assert "\nMore: jobreport show 93 --details --audit" in short and "More:" not in full
    # The audit prints what was overridden, not every detector's "given".
    assert "Site thresholds" in full and "given; rests on" not in full


# --- one order in every format ---------------------------------------------------------

TEXT_HEADINGS = {"Key figures": "figures", "Findings": "findings",
                 "Next submission": "sizing", "Plots": "plots", "Memory": "memory",
                 "Steps": "steps",
                 "Array tasks": "tasks", "Queue": "queue", "Waste": "waste",
                 "Coverage": "coverage", "Audit": "audit"}
# The JSON's key for each section (``coverage`` holds the audit: one object, last).
JSON_KEYS = {"headline": "headline", "figures": "cpu_efficiency", "findings": "findings",
             "sizing": "sizing", "plots": "series", "memory": "memory_nodes",
             "steps": "step_lines", "tasks": "array",
             "queue": "queue", "waste": "waste", "coverage": "coverage"}


def _from_lines(lines: list[str], first: str) -> list[str]:
    """Sections in the order their headings (lines starting with one) come."""
    found = []
    for line in lines:
        if len(line.strip()) > 20 and first.startswith(line.strip()):  # it may wrap
            found.append("headline")
        for heading, section in TEXT_HEADINGS.items():
            if re.fullmatch(rf"{heading}( \(.*\)|: none)?", line.strip()):
                found.append(section)
    return found


class _Sections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id")
        if tag == "section" and ident in SECTIONS:
            self.ids.append(ident)


def _html(page: str) -> list[str]:
    parser = _Sections()
    parser.feed(page)
    return parser.ids


def _pdf(body: bytes, tmp_path: Path, first: str) -> list[str]:
    path = tmp_path / "report.pdf"
    path.write_bytes(body)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r"^Pages:\s+2$", info, re.M)  # page 1 what to do, page 2 the details
    out = subprocess.run(["pdftotext", "-raw", str(path), "-"], capture_output=True,
                         text=True, check=True).stdout
    return _from_lines(out.splitlines(), first)


def _json(report) -> list[str]:
    data = json.loads(json_renderer.render(report))
    wanted = {key: section for section, key in JSON_KEYS.items()}
    return [wanted[k] for k, v in data.items() if k in wanted and v not in (None, [], {})]


@pytest.mark.needs("pdflatex")
@pytest.mark.parametrize("name", ["steps", "array", "gpu-untouched", "shm"])
def test_every_format_has_the_same_section_order(name, tmp_path):
    report = captured(name)
    first = headline(report)
    orders = {
        "text": _from_lines(text.render(report, details=True, audit=True).splitlines(), first),
        "html": _html(html.render(report)),
        "pdf": _pdf(pdf.render(report), tmp_path, first),
        "json": _json(report),
    }
    canonical = [s for s in SECTIONS if s in orders["html"]]
    assert orders["html"] == canonical
    assert {"headline", "figures", "findings", "plots", "audit"} <= set(canonical)
    for fmt, order in orders.items():
        # JSON keeps the audit inside ``coverage``; every other format has it last.
        expected = [s for s in canonical if fmt != "json" or s != "audit"]
        assert order == expected, fmt
    msg = email.render(report, "alice@example.org", "j@example.org", pdf=b"%PDF",
                       report_url="http://127.0.0.1:8000/jobs/1")
    plain = msg.get_body(("plain",)).get_content()
    email_order = _from_lines(plain.splitlines(), first)
    assert email_order == [s for s in canonical if s in email_order]
    assert email_order[:2] == ["headline", "findings"]


# --- the email a person opens ----------------------------------------------------------

class _Text(HTMLParser):
    """The visible lines of an HTML body up to its first link."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = [""]
        self.linked = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.linked = True
        if not self.linked and tag in ("p", "div", "br", "h2", "pre"):
            self.lines.append("")

    def handle_data(self, data: str) -> None:
        if not self.linked:
            *done, last = data.split("\n")
            self.lines[-1] += done[0] if done else last
            self.lines += done[1:] + ([last] if done else [])


@pytest.mark.parametrize("report", [captured("gpu-untouched"), captured("steps"),
                                    sample_report()], ids=["gpu-untouched", "steps", "sample"])
def test_email_is_short_before_its_first_link(report):
    url = f"https://jobs.example.org/jobs/{report.job_id}"
    msg = email.render(report, "alice@example.org", "j@example.org", pdf=b"%PDF",
                       report_url=url)
    assert headline(report) in msg["Subject"] or msg["Subject"].endswith(
        headline(report).rsplit(": ", 1)[1])
    assert report.job_name in msg["Subject"]
    plain = msg.get_body(("plain",)).get_content().splitlines()
    link = next(i for i, line in enumerate(plain) if url in line)
    assert link < EMAIL_LINES, plain[:link + 1]
    before = "\n".join(plain[:link])
    assert plain[0] == headline(report) and ("#SBATCH" in before) == bool(report.sizing)
    assert all(f.advice in before for f in report.findings)
    rich = msg.get_body(("html",)).get_content()
    assert f'href="{url}"' in rich
    parser = _Text()
    parser.feed(rich.split("<body", 1)[1])
    shown = [line for line in parser.lines if line.strip()]
    assert len(shown) < EMAIL_LINES, shown
    assert [p.get_content_type() for p in msg.iter_attachments()] == ["application/pdf"]
