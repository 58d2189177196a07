"""PDF report with pylatex, two pages for an ordinary job, "Page X of Y".

The sections in their one order (``sections.SECTIONS``). Page 1: the title, the headline
with its verdict, gap notes, the key figures as bar gauges, the findings with advice and
evidence, and the suggested ``#SBATCH`` block. Page 2: the details (the job's facts, the
plots in a grid of two columns, memory, steps, array tasks, queue, waste, coverage), then the
audit; long tables may add pages. Nothing floats: the one page break is before the
details. Every figure comes from ``presentation.context``, as on the page and in the
text.

Every string goes through ``escaped()`` or ``code_latex()`` (webapp.renderers.latex);
nothing untrusted is ever passed raw. The document is written and compiled in a
TemporaryDirectory that is removed whatever happens. The page total comes from a label
written at the end of the document and read back from the .aux file, so lastpage.sty is
not needed; the .aux starts out saying two pages, so an ordinary report compiles in one
pass (a longer one in two, a third only if the log still asks).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, cast

from pylatex import Document, Foot, Head, NoEscape, PageStyle

from webapp.model import JobReport
from webapp.renderers.charts import FIGURES, GRID_SIZE, to_file
from webapp.renderers.latex import _printable, code_latex, escaped
from webapp.renderers.presentation import Gauge, context, evidence_line

__all__ = ["PdfError", "_printable", "build_document", "compile_tex", "escaped", "render"]

log = logging.getLogger(__name__)

COMPILE_TIMEOUT = 60  # seconds for all passes together
MAX_PASSES = 3
RERUN = "Rerun to get cross-references right"  # LaTeX's word that a label moved
# TeX runs below the web app's own priority: on a busy host the pages people are waiting
# for get the CPU first and a PDF takes longer (bench/bench_web_scale.py).
COMPILE_NICE = ("nice", "-n", "10") if shutil.which("nice") else ()
LAST_PAGE_LABEL = "jobreport-last-page"
EXPECTED_PAGES = 2  # what the .aux says before the first pass: most reports are this long
SEVERITY_COLORS = {"critical": "sevcritical", "warning": "sevwarning", "info": "sevinfo"}
# Colours of the web page (templates/base.html), so the two read alike.
_COLORS = r"""
\definecolor{gaugefill}{rgb}{0.184,0.435,0.702}
\definecolor{gaugeover}{rgb}{0.780,0.467,0.0}
\definecolor{gaugeback}{rgb}{0.894,0.910,0.929}
\definecolor{muted}{rgb}{0.290,0.333,0.384}
\definecolor{sevcritical}{rgb}{0.702,0.149,0.118}
\definecolor{sevwarning}{rgb}{0.780,0.467,0.0}
\definecolor{sevinfo}{rgb}{0.184,0.435,0.702}
\definecolor{boxback}{rgb}{0.953,0.961,0.969}
"""
_MACROS = r"""
\newlength{\gaugewidth}\setlength{\gaugewidth}{4cm}
\newcommand{\gauge}[2]{\makebox[\gaugewidth][l]{\makebox[0pt][l]{\color{gaugeback}%
\rule[-1pt]{\gaugewidth}{8pt}}{\color{#2}\rule[-1pt]{#1\gaugewidth}{8pt}}}}
\newcommand{\heading}[1]{\par\medskip{\large\bfseries #1}\par\smallskip}
\newcommand{\detail}[1]{\par\smallskip{\bfseries #1}\par}
\setlength{\parindent}{0pt}\setlength{\parskip}{3pt}
\setlength{\tabcolsep}{4pt}
"""


RAGGED = r">{\raggedright\arraybackslash}X"  # a wrapping column without justified gaps


class PdfError(RuntimeError):
    """LaTeX failed; the message carries the end of its log."""


def _raw(doc: Document, *parts: str) -> None:
    """Append LaTeX that is either ours or already escaped."""
    doc.append(NoEscape("".join(parts)))


def _preamble(doc: Document, report: JobReport) -> None:
    doc.preamble.append(NoEscape(r"\AtEndDocument{\label{" + LAST_PAGE_LABEL + "}}"))
    doc.preamble.append(NoEscape(_COLORS + _MACROS))
    style = PageStyle("report")
    with style.create(Head("L")) as head:
        head.append(escaped(f"Job {report.job_id} on {report.cluster}"))
    with style.create(Head("R")) as head:
        head.append(escaped(f"user {report.user or 'unknown'}"))
    with style.create(Foot("C")) as foot:
        foot.append(NoEscape(r"Page \thepage\ of \pageref{" + LAST_PAGE_LABEL + "}"))
    doc.preamble.append(style)
    doc.change_document_style("report")


def _pairs_table(rows: list[tuple[str, str]], columns: int = 2, size: str = r"\small") -> str:
    """Label/value rows laid out ``columns`` pairs to a line, values wrapping."""
    spec = " ".join([r">{\bfseries}l >{\raggedright\arraybackslash}X"] * columns)
    lines = []
    for i in range(0, len(rows), columns):
        chunk = rows[i:i + columns] + [("", "")] * (columns - len(rows[i:i + columns]))
        lines.append(" & ".join(f"{escaped(label)} & {escaped(value)}" for label, value in chunk))
    return ("{" + size + r"\begin{tabularx}{\textwidth}{" + spec + "}\n"
            + "\\\\\n".join(lines) + "\\\\\n" + r"\end{tabularx}}" + "\n")


def _notes(doc: Document, c: dict[str, Any]) -> None:
    _raw(doc, r"{\large\bfseries\raggedright ", escaped(c["headline"]), r"\par}\smallskip")
    for note in c["gaps"]:
        _raw(doc, r"\fbox{\parbox{0.97\textwidth}{", escaped(note), r"}}\par")


def _gauge_row(g: Gauge) -> str:
    color = "gaugeover" if g.over else "gaugefill"
    bar = r"\gauge{" + f"{g.fill:.3f}" + "}{" + color + "}"
    return cast(str, f"{escaped(g.label)} & {bar} & {escaped(g.value)} & "
                + r"\textcolor{muted}{" + escaped(g.detail) + "}")


def _gauges(doc: Document, c: dict[str, Any]) -> None:
    _raw(doc, r"\heading{Key figures}")
    if c["array_summary"]:
        _raw(doc, r"{\bfseries Array summary}\par", _pairs_table(c["array_summary"]))
    if c["figures_from"]:
        _raw(doc, r"{\small ", escaped(c["figures_from"]), r"\par}")
    if c["gauges"]:
        _raw(doc, r"{\small\begin{tabularx}{\textwidth}{>{\bfseries}l l r X}", "\n",
             "\\\\\n".join(_gauge_row(g) for g in c["gauges"]), "\\\\\n",
             r"\end{tabularx}}", "\n")
    if c["wait"]:
        _raw(doc, r"{\small ", escaped(c["wait"]), r"\par}")
    if c["energy"]:
        _raw(doc, r"{\small ", escaped(c["energy"]), r"\par}")


def _findings(doc: Document, c: dict[str, Any]) -> None:
    findings = c["findings"]
    _raw(doc, r"\heading{Findings}")
    if not findings:
        _raw(doc, escaped(c["no_findings"]), r"\par")
    for f in findings:
        color = SEVERITY_COLORS.get(f.severity.value, "muted")
        _raw(doc, r"\textbf{\color{", color, "}", escaped(f.severity.value.upper()), r"}\quad ",
             code_latex(f.message), r"\par")
        _raw(doc, r"\hspace*{1em}\parbox{\dimexpr\textwidth-1em}{\textit{Advice:} ",
             code_latex(f.advice))
        evidence = evidence_line(f)
        if evidence:
            _raw(doc, r"\par{\small\color{muted}", code_latex(evidence), "}")
        _raw(doc, r"}\par\smallskip")


def _sizing(doc: Document, c: dict[str, Any]) -> None:
    lines = c["sizing"]
    if not lines:
        return
    _raw(doc, r"\heading{Next submission}",
         r"\colorbox{boxback}{\parbox{\dimexpr\textwidth-2\fboxsep}{\ttfamily\small ",
         r"\\".join(escaped(line) for line in lines), r"}}\par")
    if c["sizing_note"]:
        _raw(doc, r"{\small\color{muted}", escaped(c["sizing_note"]), r"\par}")


def _array_tasks(doc: Document, c: dict[str, Any]) -> None:
    rows = c["array_tasks"]
    if not rows:
        return
    # The heading is the table's first row: a table cannot break, and its heading must
    # not stay behind at the foot of the previous page.
    _raw(doc, r"\par\medskip{\small\begin{tabularx}{\textwidth}{Xlrrr}",
         r"\multicolumn{5}{@{}l}{\large\bfseries Array tasks}\\[3pt]", "\n",
         r"\textbf{task} & \textbf{state} & \textbf{elapsed} & \textbf{CPU eff.} & ",
         r"\textbf{peak memory}\\\hline", "\n",
         "\\\\\n".join(" & ".join(escaped(cell) for cell in row) for row in rows),
         "\\\\\n", r"\end{tabularx}}", "\n")
    if c["array_more"]:
        _raw(doc, escaped(f"... and {c['array_more']} more tasks (all of them in the JSON "
                          "report)."), r"\par")


def _queue(doc: Document, c: dict[str, Any]) -> None:
    if c["queue"]:
        _raw(doc, r"\detail{Queue}", _pairs_table(c["queue"], columns=1, size=r"\footnotesize"))


def _plots(doc: Document, report: JobReport, tmp: str) -> None:
    """Every plot with data, two to a row, each with its heading and summary below."""
    cells = []
    for plot in FIGURES:
        built = plot.build(report, size=GRID_SIZE)
        if built is None:
            continue
        fig, summary = built
        to_file(fig, os.path.join(tmp, f"plot-{plot.name}.pdf"))
        cells.append(
            r"\begin{minipage}[t]{0.485\textwidth}\centering"
            + r"\includegraphics[width=\linewidth]{plot-" + plot.name + ".pdf}\\\\[1pt]"
            + r"{\footnotesize\raggedright\textbf{" + escaped(plot.title) + r".} "
            + escaped(summary) + r"\par}\end{minipage}"
        )
    if not cells:
        return
    _raw(doc, r"\detail{Plots}", r"\noindent")
    for i in range(0, len(cells), 2):
        _raw(doc, cells[i], r"\hfill", cells[i + 1] if i + 1 < len(cells) else "",
             r"\par\medskip\noindent", "\n")


def _grid(heading: str, header: tuple[str, ...], rows: list[tuple[str, ...]],
          spec: str) -> str:
    """A small table whose heading is its first row (it cannot stay behind at a page foot)."""
    head = ""
    if any(header):
        head = " & ".join(r"\textbf{" + escaped(h) + "}" for h in header) + r"\\\hline" + "\n"
    body = "\\\\\n".join(" & ".join(escaped(cell) for cell in row) for row in rows)
    return cast(str, r"\par\medskip{\footnotesize\begin{tabularx}{\textwidth}{" + spec + "}"
                + r"\multicolumn{" + str(len(header)) + r"}{@{}l}{\large\bfseries "
                + escaped(heading) + r"}\\[3pt]" + "\n" + head + body + "\\\\\n"
                + r"\end{tabularx}}" + "\n")


def _steps(doc: Document, c: dict[str, Any]) -> None:
    if c["steps"]:
        _raw(doc, _grid("Steps", c["step_header"], c["steps"], "llllrrrr"))


def _memory(doc: Document, c: dict[str, Any]) -> None:
    if c["memory"]:
        _raw(doc, _grid("Memory", c["memory_header"], c["memory"], "lrrrrr"),
             r"{\footnotesize\color{muted}", escaped(c["memory_sentence"]), r"\par}")


def _waste(doc: Document, c: dict[str, Any]) -> None:
    """The sentence and how it was priced; the per-resource table is on the page and in
    the JSON (here it would push the audit onto a third page)."""
    if not c["waste_sentence"]:
        return
    _raw(doc, r"\detail{Waste}{\small ", escaped(c["waste_sentence"]), r"\par}")
    if c["waste_note"]:
        _raw(doc, r"{\footnotesize\color{muted}", escaped(c["waste_note"]), r"\par}")


def _coverage(doc: Document, c: dict[str, Any]) -> None:
    """Complete coverage is one line; a table only when something is missing."""
    if c["coverage_line"]:
        _raw(doc, r"\detail{Coverage}{\small ", escaped(c["coverage_line"]), r"\par}")
    elif c["coverage"]:
        _raw(doc, _grid("Coverage", c["coverage_header"], c["coverage"], "lrrr" + RAGGED))


def _audit(doc: Document, c: dict[str, Any]) -> None:
    """Only what was overridden or withheld; every verdict and the PromQL are in the JSON
    report and on the web page."""
    if c["audit"]:
        _raw(doc, r"\detail{Audit}", _pairs_table(c["audit"], columns=1, size=r"\footnotesize"))


def _footer(doc: Document, footer: str) -> None:
    """The site's footer (its contact, its documentation) under page 1's findings, line
    by line as the site wrote it."""
    lines = [line for line in footer.splitlines() if line.strip()]
    if lines:
        _raw(doc, r"\par\medskip\hrule\smallskip{\footnotesize\color{muted}\raggedright ",
             r"\\".join(escaped(line) for line in lines), r"\par}")


def build_document(report: JobReport, tmp: str, footer: str = "") -> Document:
    """The pylatex document; plot files are written into ``tmp``; ``footer``: the site's
    (``site_wording.report_footer``)."""
    doc = Document(documentclass="article", document_options=["a4paper", "10pt"],
                   page_numbers=False,
                   geometry_options={"margin": "1.5cm", "headheight": "14pt",
                                     "includehead": False})
    doc.packages.append(NoEscape(r"\usepackage{graphicx}"))
    doc.packages.append(NoEscape(r"\usepackage{tabularx}"))
    doc.packages.append(NoEscape(r"\usepackage{color}"))
    _preamble(doc, report)
    c = context(report, charts=[])
    # page 1: the headline and its verdict, the key figures, what to do, what to ask for
    _raw(doc, r"{\Large\bfseries\raggedright ", escaped(c["title"]), r"\par}\smallskip")
    _notes(doc, c)
    _gauges(doc, c)
    _findings(doc, c)
    _sizing(doc, c)
    _footer(doc, footer)
    # page 2: the details, then the audit
    _raw(doc, r"\clearpage", r"\detail{The job}",
         _pairs_table(c["summary"], size=r"\footnotesize"))
    _plots(doc, report, tmp)
    _memory(doc, c)
    _steps(doc, c)
    _array_tasks(doc, c)
    _queue(doc, c)
    _waste(doc, c)
    _coverage(doc, c)
    _audit(doc, c)
    return doc


def seed_aux(tex_path: str, pages: int = EXPECTED_PAGES) -> None:
    """Write the .aux a finished run of a ``pages``-page report leaves (the page total's
    label, as LaTeX writes it): the first pass then prints the right total and finds no
    label changed, and the second pass, ~0.15 s of CPU, is not needed."""
    aux = os.path.splitext(tex_path)[0] + ".aux"
    with open(aux, "w", encoding="ascii") as fh:
        fh.write("\\relax \n\\newlabel{" + LAST_PAGE_LABEL + "}{{}{" + str(pages) + "}}\n"
                 "\\gdef \\@abspage@last{" + str(pages) + "}\n")


def compile_tex(tex_path: str) -> None:
    """pdflatex, pass after pass while its log asks for one (the page total's label moved:
    a report of other than ``EXPECTED_PAGES`` pages, or no .aux yet; three passes at
    most); shell escape always off. Not latexmk: its Perl start and bookkeeping cost
    0.35 s of CPU a PDF (0.82 s against two passes' 0.46) and decide nothing more here."""
    workdir, name = os.path.split(tex_path)
    command = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
               name]
    log_path = os.path.splitext(tex_path)[0] + ".log"
    deadline = time.monotonic() + COMPILE_TIMEOUT
    for _ in range(MAX_PASSES):
        try:
            subprocess.run([*COMPILE_NICE, *command], cwd=workdir, check=True,
                           stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.CalledProcessError as exc:
            tail = exc.output.decode(errors="replace")[-2000:]
            raise PdfError(f"pdflatex failed: {tail}") from exc
        except subprocess.TimeoutExpired:
            raise PdfError(f"pdflatex took longer than {COMPILE_TIMEOUT} s") from None
        with open(log_path, encoding="latin-1") as fh:
            settled = RERUN not in fh.read()
        if settled:
            return


def render(report: JobReport, footer: str = "") -> bytes:
    """The report as PDF bytes, with the site's ``footer`` when it has one."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jobreport-pdf-") as tmp:
        doc = build_document(report, tmp, footer)
        base = os.path.join(tmp, "report")
        doc.generate_tex(base)
        seed_aux(base + ".tex")
        compile_tex(base + ".tex")
        with open(base + ".pdf", "rb") as fh:
            body = fh.read()
    log.info("PDF of job %s: %d bytes in %.2f s", report.job_id, len(body),
             time.perf_counter() - started)
    return body
