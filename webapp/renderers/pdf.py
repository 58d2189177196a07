"""PDF report with pylatex: summary, findings and each plot on its own page, "Page X of Y".

Every string that comes from Slurm goes through ``escaped()`` (pylatex's escape_latex
plus ligature breaking); nothing untrusted is ever passed raw. The document is written
and compiled in a TemporaryDirectory that is removed whatever happens. The page total
comes from a label written at the end of the document, read back on the second pass
(latexmk runs as many passes as needed), so lastpage.sty is not needed.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
import unicodedata

from pylatex import Command, Document, Foot, Head, NoEscape, PageStyle, Section, Tabularx
from pylatex.utils import bold, escape_latex

from webapp.model import JobReport
from webapp.renderers.charts import FIGURES, to_file
from webapp.renderers.presentation import (
    array_more,
    array_rows,
    array_task_rows,
    sorted_findings,
    summary_rows,
)
from webapp.renderers.queue import queue_rows
from webapp.renderers.sections import (
    COVERAGE_HEADER,
    STEP_HEADER,
    WASTE_HEADER,
    audit_rows,
    coverage_rows,
    no_findings_text,
    step_rows,
    verdict_rows,
    waste_note,
    waste_rows,
)
from webapp.renderers.wording import figures_from, gap_text, title

log = logging.getLogger(__name__)

COMPILE_TIMEOUT = 60  # seconds for all passes together
LAST_PAGE_LABEL = "jobreport-last-page"
# T1 ligatures that would turn "--" into a dash or "<<" into a guillemet.
_LIGATURE_CHARS = "-<>!?,"
# Characters T1 typesets as curly quotes; these commands print them as typed.
_QUOTES = {"'": r"\textquotesingle{}", "`": r"\textasciigrave{}", '"': r"\textquotedbl{}"}


RAGGED = r">{\raggedright\arraybackslash}X"  # a wrapping column without justified gaps


class PdfError(RuntimeError):
    """LaTeX failed; the message carries the end of its log."""


def _printable(char: str) -> str:
    if char in "\r\n\t" or unicodedata.category(char).startswith("C"):
        return " "
    # Latin-1 is what inputenc utf8 + T1 + textcomp typeset without extra packages.
    return char if ord(char) < 0x100 else "?"


def escaped(text: object) -> NoEscape:
    """Untrusted text made inert for LaTeX: the ONLY way text enters the document."""
    plain = "".join(_printable(c) for c in str(text))
    out = escape_latex(plain).replace(r"\^{}", r"\textasciicircum{}")
    for char in _LIGATURE_CHARS:
        out = out.replace(char, char + "{}")
    for char, command in _QUOTES.items():
        out = out.replace(char, command)
    return NoEscape(out)


def _preamble(doc: Document, report: JobReport) -> None:
    doc.preamble.append(NoEscape(r"\AtEndDocument{\label{" + LAST_PAGE_LABEL + "}}"))
    doc.preamble.append(NoEscape(r"\setlength{\parindent}{0pt}\setlength{\parskip}{4pt}"))
    style = PageStyle("report")
    with style.create(Head("L")) as head:
        head.append(escaped(f"Job {report.job_id} on {report.cluster}"))
    with style.create(Head("R")) as head:
        head.append(escaped(f"user {report.user or 'unknown'}"))
    with style.create(Foot("C")) as foot:
        foot.append(NoEscape(r"Page \thepage\ of \pageref{" + LAST_PAGE_LABEL + "}"))
    doc.preamble.append(style)
    doc.change_document_style("report")


def _array(doc: Document, report: JobReport) -> None:
    """The array's summary and its tasks' spread, before any single task's figures."""
    with doc.create(Section("Array summary", numbering=False)):
        with doc.create(Tabularx(r">{\bfseries}lX", width_argument=NoEscape(r"\textwidth"))) as t:
            for label, value in array_rows(report):
                t.add_row((escaped(label), escaped(value)))
        doc.append(NoEscape(r"\par\medskip"))
        with doc.create(Tabularx(r"Xlrrr", width_argument=NoEscape(r"\textwidth"))) as t:
            t.add_row([bold(h) for h in ("task", "state", "elapsed", "CPU eff.", "peak memory")])
            t.add_hline()
            for row in array_task_rows(report):
                t.add_row([escaped(cell) for cell in row])
        more = array_more(report)
        if more:
            doc.append(escaped(f"... and {more} more tasks (all of them in the JSON report)."))
    doc.append(NoEscape(r"\medskip"))


def _summary(doc: Document, report: JobReport) -> None:
    doc.append(NoEscape(r"{\Large "))
    doc.append(escaped(title(report)))
    doc.append(NoEscape(r"}\par\medskip"))
    for gap in report.gaps:
        doc.append(NoEscape(r"\fbox{\parbox{0.95\textwidth}{"))
        doc.append(escaped(gap_text(gap)))
        doc.append(NoEscape(r"}}\par\medskip"))
    if report.array:
        _array(doc, report)
    note = figures_from(report)
    if note:
        doc.append(escaped(note))
        doc.append(NoEscape(r"\par\medskip"))
    with doc.create(Section("Summary", numbering=False)):
        with doc.create(Tabularx(r">{\bfseries}lX", width_argument=NoEscape(r"\textwidth"))) as t:
            for label, value in summary_rows(report):
                t.add_row((escaped(label), escaped(value)))
        _queue(doc, report)


def _queue(doc: Document, report: JobReport) -> None:
    rows = queue_rows(report)
    if rows:
        doc.append(NoEscape(r"\par\medskip{\large\bfseries Queue}\par"))
        with doc.create(Tabularx(r">{\bfseries}lX", width_argument=NoEscape(r"\textwidth"))) as t:
            for label, value in rows:
                t.add_row((escaped(label), escaped(value)))


def _findings(doc: Document, report: JobReport) -> None:
    doc.append(NoEscape(r"\clearpage"))
    with doc.create(Section("Findings", numbering=False)):
        findings = sorted_findings(report)
        if not findings:
            doc.append(escaped(no_findings_text(report)))
        for f in findings:
            doc.append(bold(escaped(f.severity.value.upper())))
            doc.append(NoEscape(r"\quad "))
            doc.append(escaped(f.message))
            doc.append(NoEscape(r"\par Advice: "))
            doc.append(escaped(f.advice))
            if f.evidence:
                doc.append(NoEscape(r"\par{\small "))
                doc.append(escaped("; ".join(f"{k} = {v}" for k, v in f.evidence.items())))
                doc.append(NoEscape("}"))
            doc.append(NoEscape(r"\par\bigskip"))


def _plots(doc: Document, report: JobReport, tmp: str) -> None:
    for name, heading, build in FIGURES:
        built = build(report)
        if built is None:
            continue
        fig, summary = built
        path = os.path.join(tmp, f"plot-{name}.pdf")
        to_file(fig, path)
        doc.append(NoEscape(r"\clearpage"))
        with doc.create(Section(heading, numbering=False)):
            doc.append(Command("includegraphics", options=NoEscape(r"width=\textwidth"),
                               arguments=NoEscape(f"plot-{name}.pdf")))
            doc.append(NoEscape(r"\par"))
            doc.append(escaped(summary))


def _grid(doc: Document, header: tuple[str, ...], rows: list[tuple[str, ...]],
          spec: str) -> None:
    with doc.create(Tabularx(spec, width_argument=NoEscape(r"\textwidth"))) as t:
        if any(header):
            t.add_row([bold(escaped(h)) for h in header])
            t.add_hline()
        for row in rows:
            t.add_row([escaped(cell) for cell in row])
    doc.append(NoEscape(r"\par\medskip"))


def _sections(doc: Document, report: JobReport) -> None:
    """Steps, waste, coverage and audit: tables at the end (the PDF's layout is elsewhere)."""
    steps, waste = step_rows(report), waste_rows(report)
    if not (steps or waste or report.audit):
        return
    doc.append(NoEscape(r"\clearpage"))
    doc.append(NoEscape(r"{\footnotesize "))
    if steps:
        with doc.create(Section("Steps", numbering=False)):
            _grid(doc, STEP_HEADER, steps, "llllrrrr")
    if waste:
        with doc.create(Section("Waste", numbering=False)):
            _grid(doc, WASTE_HEADER, waste, "lXXrr")
            note = waste_note(report)
            if note:
                doc.append(escaped(note))
    if report.audit:
        with doc.create(Section("Coverage and audit", numbering=False)):
            cov = coverage_rows(report)
            if cov:
                _grid(doc, COVERAGE_HEADER, cov, "lrrrX")
            _grid(doc, ("", ""), audit_rows(report), r">{\bfseries}l" + RAGGED)
            _grid(doc, ("detector", "rests on", "verdict"), verdict_rows(report),
                  "l" + RAGGED + RAGGED)
            doc.append(escaped("The exact PromQL queries are in the JSON report and the web page."))
    doc.append(NoEscape("}"))


def build_document(report: JobReport, tmp: str) -> Document:
    """The pylatex document; plot files are written into ``tmp``."""
    doc = Document(documentclass="article", document_options=["a4paper", "11pt"],
                   page_numbers=False, geometry_options={"margin": "2cm", "headheight": "14pt"})
    doc.packages.append(NoEscape(r"\usepackage{graphicx}"))
    doc.packages.append(NoEscape(r"\usepackage{tabularx}"))
    _preamble(doc, report)
    _summary(doc, report)
    _findings(doc, report)
    _plots(doc, report, tmp)
    _sections(doc, report)
    return doc


def compile_tex(tex_path: str) -> None:
    """latexmk when installed, else two pdflatex passes; shell escape always off."""
    workdir, name = os.path.split(tex_path)
    common = ["-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape"]
    if shutil.which("latexmk"):
        commands = [["latexmk", "-pdf", "-quiet", f"-pdflatex=pdflatex {' '.join(common)} %O %S",
                     name]]
    else:
        commands = [["pdflatex", *common, name]] * 2
    deadline = time.monotonic() + COMPILE_TIMEOUT
    for command in commands:
        try:
            subprocess.run(command, cwd=workdir, check=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.CalledProcessError as exc:
            tail = exc.output.decode(errors="replace")[-2000:]
            raise PdfError(f"{command[0]} failed: {tail}") from exc
        except subprocess.TimeoutExpired:
            raise PdfError(f"{command[0]} took longer than {COMPILE_TIMEOUT} s") from None


def render(report: JobReport) -> bytes:
    """The report as PDF bytes."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jobreport-pdf-") as tmp:
        doc = build_document(report, tmp)
        base = os.path.join(tmp, "report")
        doc.generate_tex(base)
        compile_tex(base + ".tex")
        with open(base + ".pdf", "rb") as fh:
            body = fh.read()
    log.info("PDF of job %s: %d bytes in %.2f s", report.job_id, len(body),
             time.perf_counter() - started)
    return body
